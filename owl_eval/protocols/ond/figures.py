"""OND figures: detection timelines, top-1 per batch (agent vs baseline), detection vs threshold, novelty ROC.

Drawn from values computed by :mod:`owl_eval.protocols.ond.evaluation` (``figure_data``) and the metric results only."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from owl_eval.metrics.keys import MetricKey  # noqa: E402
from owl_eval.metrics.results import MetricResults  # noqa: E402


def detection_timeline(timeline: list[dict], *, threshold: float):
    """P(world changed) against sample index for the first trials, red light and threshold marked;
    ``timeline``: one ``{trial_id, p_world_changed, p_unknown, red_light}`` per trial shown."""
    fig, axes = plt.subplots(len(timeline), 1, figsize=(8, 1.6 * len(timeline) + 0.6), sharex=True, squeeze=False)
    for ax, trial in zip(axes[:, 0], timeline):
        ax.plot(trial["p_world_changed"], lw=1.2, color="tab:blue", label="P(world changed)")
        ax.plot(trial["p_unknown"], lw=0.6, color="tab:gray", alpha=0.6, label="p(unknown)")
        ax.axhline(threshold, color="tab:orange", ls="--", lw=1, label=f"threshold {threshold:g}")
        if trial["red_light"] is not None:
            ax.axvline(trial["red_light"], color="tab:red", lw=1.2, label="red light")
        ax.set_ylim(-0.05, 1.05)
        ax.set_ylabel(trial["trial_id"] or "trial", fontsize=8)
    axes[0, 0].legend(loc="upper left", fontsize=7, ncol=4)
    axes[-1, 0].set_xlabel("sample index in trial")
    fig.suptitle("Detection timeline")
    fig.tight_layout()
    return fig


def top1_per_batch(results: MetricResults):
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for key, label in (
        (MetricKey("top1", axis="batch"), "agent"),
        (MetricKey("top1", agent="baseline", axis="batch"), "baseline"),
    ):
        if key in results.series:
            s = results.series[key]
            ax.plot(s.steps, s.values, marker="o", ms=3, label=label)
    ax.set_xlabel("mini-batch index")
    ax.set_ylabel("top-1 accuracy (mean over trials)")
    ax.set_ylim(-0.02, 1.02)
    ax.legend()
    ax.set_title("Top-1 per batch")
    fig.tight_layout()
    return fig


def detection_rate_vs_threshold(table: dict):
    """M2 and M2.1 against the detection threshold (``table``: ``metrics.ond.detection_vs_threshold``)."""
    grid = np.asarray(table["threshold"], dtype=float)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for key, label in (
        ("m2_cdt_pct", "M2 correctly detected trials %"),
        ("m21_fp_pct", "M2.1 false-positive trials %"),
    ):
        if key in table:
            ax.plot(grid, np.asarray(table[key], dtype=float), marker="o", label=label)
    ax.set_xlabel("detection threshold on P(world changed)")
    ax.set_ylabel("% of trials")
    ax.set_ylim(-2, 102)
    ax.legend()
    ax.set_title("Detection vs threshold")
    fig.tight_layout()
    return fig


def novelty_roc(curves: list[dict], results: MetricResults):
    """ROC of the unknown-class score p_class[:, 0] (novel = positive), agent and baseline; ``curves``: one
    ``{label, fpr, tpr, auroc_key}`` per run that has both novel and known samples."""
    fig, ax = plt.subplots(figsize=(4.8, 4.6))
    ax.plot([0, 1], [0, 1], color="tab:gray", lw=0.8, ls=":", label="chance")
    for curve in curves:
        value = results.values.get(curve["auroc_key"])
        label = curve["label"]
        text = f"{label} (AUROC {value:.3f})" if isinstance(value, float) else label
        # tie groups move together, so a tied score is a straight diagonal segment (the half credit)
        ax.plot(curve["fpr"], curve["tpr"], lw=1.4, label=text)
    ax.set_xlabel("false-positive rate (known samples flagged)")
    ax.set_ylabel("true-positive rate (novel samples flagged)")
    ax.set_xlim(-0.01, 1.01)
    ax.set_ylim(-0.01, 1.01)
    ax.set_aspect("equal")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("Novelty ROC (p_class[:, 0], all trials)")
    fig.tight_layout()
    return fig


def ond_figures(data: dict, results: MetricResults) -> dict:
    """Every OND figure from the evaluation's ``figure_data`` and the (selected) results."""
    return {
        "detection_timeline": detection_timeline(data["timeline"], threshold=data["threshold"]),
        "top1_per_batch": top1_per_batch(results),
        "detection_vs_threshold": detection_rate_vs_threshold(data["detection_vs_threshold"]),
        "novelty_roc": novelty_roc(data["roc"], results),
    }
