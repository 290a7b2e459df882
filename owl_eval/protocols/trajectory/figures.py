"""Trajectory figures: example scenes, error against horizon, KDE calibration curve, class reliability.

Drawn from values computed by :mod:`owl_eval.protocols.trajectory.evaluation` (``figure_data``) and the metric results only."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from owl_eval.metrics.results import MetricResults  # noqa: E402


def example_scenes(scenes: list[dict]):
    """History, truth and predictions of each agent of a few scenes (``{title, agents, history, truth,
    predictions}`` each); each agent's index is written at its last observed position."""
    fig, axes = plt.subplots(1, len(scenes), figsize=(4.2 * len(scenes), 4.2), squeeze=False)
    for ax, scene in zip(axes[0], scenes):
        for i, a in enumerate(scene["agents"]):
            color = f"C{a % 10}"
            h = scene["history"][i]
            for p in scene["predictions"][:, i]:
                ax.plot(p[:, 0], p[:, 1], color=color, lw=0.5, alpha=0.35)
            ax.plot(h[:, 0], h[:, 1], color=color, lw=2.0, marker=".", ms=3)
            last = h[np.isfinite(h).all(-1)]
            if len(last):
                ax.annotate(str(a), last[-1], xytext=(3, 3), textcoords="offset points", fontsize=7, color=color)
            t = scene["truth"][i]
            ax.plot(t[:, 0], t[:, 1], color="k", lw=1.2, ls="--")
        ax.set_title(scene["title"], fontsize=8)
        ax.set_aspect("equal", adjustable="datalim")
        ax.tick_params(labelsize=7)
    axes[0, 0].plot([], [], color="C0", lw=2, label="history")
    axes[0, 0].plot([], [], color="k", ls="--", label="truth")
    axes[0, 0].plot([], [], color="C0", lw=0.5, label="predictions")
    axes[0, 0].legend(fontsize=7, loc="best")
    fig.suptitle("Example scenes (metres)")
    fig.tight_layout()
    return fig


def error_vs_horizon(data: dict, results: MetricResults):
    """Mean (over predictions) and min (over predictions) displacement per future step, with constant velocity."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    series = results.series.get("displacement_by_step_marginal")
    if series is not None:
        ax.plot(series.steps * data["dt"], series.values, marker="o", ms=3, label="predictor: mean over predictions")
    ax.plot(
        data["horizon"], data["best"], marker="s", ms=3, label=f"predictor: min over {data['num_preds']} predictions"
    )
    ax.plot(data["horizon"], data["constant_velocity"], color="gray", ls="--", label="constant velocity (reference)")
    ax.set_xlabel("prediction horizon [s]")
    ax.set_ylabel("displacement error [m]")
    ax.set_title("Error against horizon")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def error_by_step_from_series(results: MetricResults):
    """Displacement per future step from the logged series alone (when only the metric results exist)."""
    fig, ax = plt.subplots(figsize=(6.5, 4))
    for name in ("displacement_by_step_marginal", "displacement_by_step_joint"):
        s = results.series.get(name)
        if s is not None:
            ax.plot(
                s.steps,
                s.values,
                marker="o",
                ms=3,
                label=name.replace("displacement_by_step_", "mean over predictions, "),
            )
    ax.set_xlabel("future step")
    ax.set_ylabel("displacement [m]")
    ax.legend(fontsize=8)
    ax.set_title("Displacement error against horizon")
    fig.tight_layout()
    return fig


def kde_calibration(data: dict):
    """The KDE calibration curve (``{levels, share, agents}``; ``share`` None without a non-singular KDE)."""
    fig, ax = plt.subplots(figsize=(4.8, 4.4))
    levels = data["levels"]
    ax.plot(levels, 1 - levels, color="gray", ls="--", label="calibrated")
    if data["share"] is not None:
        ax.plot(levels, data["share"], label=f"predictor ({data['agents']} agents)")
    else:
        ax.text(
            0.5,
            0.5,
            "no non-singular KDE\n(N_P <= 2 x valid steps,\nor identical predictions)",
            ha="center",
            va="center",
            transform=ax.transAxes,
            fontsize=9,
        )
    ax.set_xlabel("level k/200")
    ax.set_ylabel("share of agents with m > level")
    ax.set_title("KDE calibration (ECE curve)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def class_reliability(data: dict):
    """Observed class frequency against predicted probability per bin (``{predicted, observed, class_names}``)."""
    fig, ax = plt.subplots(figsize=(4.8, 4.4))
    ax.plot([0, 1], [0, 1], color="gray", ls="--", label="calibrated")
    if data["predicted"] is not None:
        ax.plot(data["predicted"], data["observed"], marker="o", label="predictor")
    ax.set_xlabel("predicted class probability")
    ax.set_ylabel("observed frequency")
    ax.set_title(f"Turn classes ({', '.join(data['class_names'])})", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def trajectory_figures(data: dict, results: MetricResults) -> dict:
    """Every trajectory figure from the evaluation's ``figure_data`` and the (selected) results."""
    return {
        "example_scenes": example_scenes(data["example_scenes"]),
        "error_vs_horizon": error_vs_horizon(data["error_vs_horizon"], results),
        "kde_calibration": kde_calibration(data["kde_calibration"]),
        "class_reliability": class_reliability(data["class_reliability"]),
    }
