"""Trajectory figures: example scenes, error against horizon, KDE calibration curve, class reliability."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from owl_eval.api.trajectory import constant_velocity_future  # noqa: E402
from owl_eval.metrics.results import MetricResults  # noqa: E402

MAX_KDE_SCENES = 300  # the calibration curve is drawn from the first scenes only (KDE cost)


def example_scenes(record, *, num_scenes: int = 4, max_preds: int = 20):
    """A few scenes (the most crowded ones, spread over the test set): history, truth and predictions."""
    counts = record.pred_steps.any(-1).sum(-1)
    order = np.argsort(-counts, kind="stable")[: max(1, num_scenes) * 4]
    chosen = np.sort(order[:: max(1, len(order) // max(1, num_scenes))][:num_scenes])
    fig, axes = plt.subplots(1, len(chosen), figsize=(4.2 * len(chosen), 4.2), squeeze=False)
    for ax, s in zip(axes[0], chosen):
        for a in np.nonzero(record.pred_steps[s].any(-1))[0]:
            color = f"C{a % 10}"
            h = record.path_history[s, a]
            for p in record.path_pred[s, :max_preds, a]:
                ax.plot(p[:, 0], p[:, 1], color=color, lw=0.5, alpha=0.35)
            ax.plot(h[:, 0], h[:, 1], color=color, lw=2.0, marker=".", ms=3)
            t = record.path_true[s, 0, a]
            ax.plot(t[:, 0], t[:, 1], color="k", lw=1.2, ls="--")
        ax.set_title(f"{record.scene_source[s]} @ {record.scene_frame[s]}", fontsize=8)
        ax.set_aspect("equal", adjustable="datalim")
        ax.tick_params(labelsize=7)
    axes[0, 0].plot([], [], color="C0", lw=2, label="history")
    axes[0, 0].plot([], [], color="k", ls="--", label="truth")
    axes[0, 0].plot([], [], color="C0", lw=0.5, label="predictions")
    axes[0, 0].legend(fontsize=7, loc="best")
    fig.suptitle("Example scenes (metres)")
    fig.tight_layout()
    return fig


def error_vs_horizon(record, results: MetricResults):
    """Mean (over predictions) and min (over predictions) displacement per future step, with constant velocity."""
    dt = record.dt
    steps = np.arange(1, record.pred_steps.shape[-1] + 1)
    true = record.path_true[:, 0]
    mask = record.pred_steps
    err = np.linalg.norm(record.path_pred - true[:, None], axis=-1)  # [S, P, A, N_O]
    n = mask.sum((0, 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        best = np.where(mask, np.nan_to_num(err).min(1), 0.0).sum((0, 1)) / n
        cv = constant_velocity_future(record.path_history, len(steps))
        cv_err = np.where(mask, np.nan_to_num(np.linalg.norm(cv - true, axis=-1)), 0.0).sum((0, 1)) / n
    fig, ax = plt.subplots(figsize=(6.5, 4))
    series = results.series.get("displacement_by_step_marginal")
    if series is not None:
        ax.plot(series.steps * dt, series.values, marker="o", ms=3, label="predictor: mean over predictions")
    ax.plot(steps * dt, best, marker="s", ms=3, label=f"predictor: min over {record.path_pred.shape[1]} predictions")
    ax.plot(steps * dt, cv_err, color="gray", ls="--", label="constant velocity (reference)")
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
            ax.plot(s.steps, s.values, marker="o", ms=3, label=name.replace("displacement_by_step_", "mean over predictions, "))
    ax.set_xlabel("future step")
    ax.set_ylabel("displacement [m]")
    ax.legend(fontsize=8)
    ax.set_title("Displacement error against horizon")
    fig.tight_layout()
    return fig


def kde_calibration(record):
    """Share of agents whose truth is less likely than more than a level of the predictions, against the
    ideal (the curve whose mean gap is the marginal KDE ECE; ECE_traj_indep.py)."""
    from owl_eval.metrics.trajectory import kde_log_probs

    sl = slice(0, MAX_KDE_SCENES)
    fig, ax = plt.subplots(figsize=(4.8, 4.4))
    levels = np.linspace(0, 1, 201)
    ax.plot(levels, 1 - levels, color="gray", ls="--", label="calibrated")
    if record.log_probs is not None:
        lp = record.log_probs[sl]
        n_p = lp.shape[1] - 1
        log_true, log_pred, ok = lp[:, n_p], lp[:, :n_p], record.pred_steps[sl].any(-1)
    else:
        log_true, log_pred, ok = kde_log_probs(record.path_true[sl], record.path_pred[sl], record.pred_steps[sl])
    if ok.any():
        m = (log_pred.transpose(0, 2, 1)[ok] > log_true[ok][:, None]).mean(1)
        frac = (m[None, :] > levels[:, None]).mean(1)
        ax.plot(levels, frac, label=f"predictor ({int(ok.sum())} agents)")
    else:
        ax.text(0.5, 0.5, "no non-singular KDE\n(N_P <= 2 x valid steps,\nor identical predictions)",
                ha="center", va="center", transform=ax.transAxes, fontsize=9)
    ax.set_xlabel("level k/200")
    ax.set_ylabel("share of agents with m > level")
    ax.set_title("KDE calibration (ECE curve)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def class_reliability(record, *, bins: int = 10):
    """Observed class frequency against predicted probability in equal-count bins (the class ECE's bins)."""
    fig, ax = plt.subplots(figsize=(4.8, 4.4))
    ax.plot([0, 1], [0, 1], color="gray", ls="--", label="calibrated")
    if len(record.p_true):
        t, p = record.p_true.ravel(), record.p_pred.ravel()
        order = np.argsort(p, kind="stable")
        groups = np.array_split(order, min(bins, len(order)))
        ax.plot([p[g].mean() for g in groups], [t[g].mean() for g in groups], marker="o", label="predictor")
    ax.set_xlabel("predicted class probability")
    ax.set_ylabel("observed frequency")
    ax.set_title(f"Turn classes ({', '.join(map(str, record.class_names))})", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def trajectory_figures(record, results: MetricResults, *, num_scenes: int = 4, class_bins: int = 10) -> dict:
    return {"example_scenes": example_scenes(record, num_scenes=num_scenes),
            "error_vs_horizon": error_vs_horizon(record, results),
            "kde_calibration": kde_calibration(record),
            "class_reliability": class_reliability(record, bins=class_bins)}
