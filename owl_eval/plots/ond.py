"""OND figures: detection timelines, top-1 per batch (agent vs baseline), detection vs threshold, novelty ROC."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from owl_eval.metrics.ond import DETECTION_THRESHOLD_GRID, detection_vs_threshold  # noqa: E402
from owl_eval.metrics.open_set import binary_curve_counts  # noqa: E402
from owl_eval.metrics.results import MetricResults  # noqa: E402


def detection_timeline(trials, *, threshold: float, max_trials: int = 6):
    """P(world changed) against sample index for the first trials, red light and threshold marked."""
    shown = trials[:max_trials]
    fig, axes = plt.subplots(len(shown), 1, figsize=(8, 1.6 * len(shown) + 0.6), sharex=True, squeeze=False)
    for ax, trial in zip(axes[:, 0], shown):
        ax.plot(trial.p_world_changed, lw=1.2, color="tab:blue", label="P(world changed)")
        ax.plot(trial.p_class[:, 0], lw=0.6, color="tab:gray", alpha=0.6, label="p(unknown)")
        ax.axhline(threshold, color="tab:orange", ls="--", lw=1, label=f"threshold {threshold:g}")
        if trial.red_light is not None:
            ax.axvline(trial.red_light, color="tab:red", lw=1.2, label="red light")
        ax.set_ylim(-0.05, 1.05)
        ax.set_ylabel(trial.trial_id or "trial", fontsize=8)
    axes[0, 0].legend(loc="upper left", fontsize=7, ncol=4)
    axes[-1, 0].set_xlabel("sample index in trial")
    fig.suptitle("Detection timeline")
    fig.tight_layout()
    return fig


def top1_per_batch(results: MetricResults):
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for key, label in (("top1_batch", "agent"), ("baseline.top1_batch", "baseline")):
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


def detection_rate_vs_threshold(trials, thresholds=DETECTION_THRESHOLD_GRID):
    table = detection_vs_threshold(trials, thresholds)
    grid = np.asarray(table.get("threshold", thresholds), dtype=float)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for key, label in (("m2_cdt_pct", "M2 correctly detected trials %"), ("m21_fp_pct", "M2.1 false-positive trials %")):
        if key in table:
            ax.plot(grid, np.asarray(table[key], dtype=float), marker="o", label=label)
    ax.set_xlabel("detection threshold on P(world changed)")
    ax.set_ylabel("% of trials")
    ax.set_ylim(-2, 102)
    ax.legend()
    ax.set_title("Detection vs threshold")
    fig.tight_layout()
    return fig


def roc_points(trials) -> tuple[np.ndarray, np.ndarray] | None:
    """(FPR, TPR) of ``p_class[:, 0]`` for novel samples, pooled over every sample of every trial (the
    samples ``auroc_novel`` is computed on), from (0, 0) to (1, 1); None without both novel and known."""
    novel = np.concatenate([t.gt_novel for t in trials]).astype(bool)
    score = np.concatenate([t.p_class[:, 0] for t in trials]).astype(np.float64)
    if novel.all() or not novel.any():
        return None
    tp, fp = binary_curve_counts(novel, score)[:2]
    return np.concatenate(([0.0], fp / fp[-1])), np.concatenate(([0.0], tp / tp[-1]))


def novelty_roc(record, results: MetricResults):
    """ROC of the unknown-class score p_class[:, 0] (novel = positive), agent and baseline."""
    fig, ax = plt.subplots(figsize=(4.8, 4.6))
    ax.plot([0, 1], [0, 1], color="tab:gray", lw=0.8, ls=":", label="chance")
    runs = (("agent", record.trials, "auroc_novel"), ("baseline", record.baseline_trials, "baseline.auroc_novel"))
    for label, trials, key in runs:
        points = roc_points(trials) if trials else None
        if points is None:
            continue
        value = results.values.get(key)
        text = f"{label} (AUROC {value:.3f})" if isinstance(value, float) else label
        # tie groups move together, so a tied score is a straight diagonal segment (the half credit)
        ax.plot(*points, lw=1.4, label=text)
    ax.set_xlabel("false-positive rate (known samples flagged)")
    ax.set_ylabel("true-positive rate (novel samples flagged)")
    ax.set_xlim(-0.01, 1.01)
    ax.set_ylim(-0.01, 1.01)
    ax.set_aspect("equal")
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("Novelty ROC (p_class[:, 0], all trials)")
    fig.tight_layout()
    return fig


def ond_figures(record, results: MetricResults, *, threshold: float) -> dict:
    figures = {
        "detection_timeline": detection_timeline(record.trials, threshold=threshold),
        "top1_per_batch": top1_per_batch(results),
        "detection_vs_threshold": detection_rate_vs_threshold(record.trials),
        "novelty_roc": novelty_roc(record, results),
    }
    return figures
