"""Detection metrics (M1, M2, M2.1, per-sample novelty detection) at one threshold and over a grid."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from owl_eval.metrics.ond.flat import FlatTrials, mean_over, zero_if_undefined
from owl_eval.metrics.ond.trial import DETECTION_THRESHOLD_GRID, OndTrial
from owl_eval.metrics.results import NA
from owl_eval.metrics.validation import MetricInputError, as_array

# Trial-level detection (M1, M2, M2.1): what p_world_changed says about the red light. Under condition
# "given" the agent is told the red light, so these measure nothing (N/A with GIVEN_REASON).
TRIAL_DETECTION_NAMES = ("m1_mean_fn_cdt", "m2_cdt_pct", "m2_cdt_pct_all", "m21_fp_pct")
DETECTION_METRIC_NAMES = (
    *TRIAL_DETECTION_NAMES,
    *(f"ndp_{rate}_{segment}" for segment in ("pre", "post") for rate in ("precision", "recall", "f1", "accuracy")),
)
GIVEN_REASON = "the red light is given (condition given): detection is not measured"


def _detection_metrics(flat: FlatTrials, threshold: float) -> dict[str, float | NA]:
    out: dict[str, float | NA] = {}
    detection = flat.first_detection(threshold)
    detected = detection >= 0
    has_novelty = flat.has_novelty
    cdt = has_novelty & detected & (detection >= flat.red_light)
    early = detected & (~has_novelty | (detection < flat.red_light))
    n_novel_trials = int(has_novelty.sum())
    out["m1_mean_fn_cdt"] = mean_over(
        (detection - flat.red_light).astype(np.float64),
        cdt,
        f"no correctly detected trial at threshold {threshold:g}: none of the {n_novel_trials} trials with novelty "
        "has p_world_changed >= threshold at or after its red light",
    )
    out["m2_cdt_pct"] = (
        100.0 * cdt.sum() / n_novel_trials if n_novel_trials else NA("no trial has novelty (every red_light is None)")
    )
    out["m2_cdt_pct_all"] = 100.0 * cdt.sum() / flat.n_trials
    out["m21_fp_pct"] = 100.0 * early.sum() / flat.n_trials

    # per-sample novelty detection: p_class[:, 0] >= threshold against gt_novel, per trial, pre/post red light
    predicted = flat.p_class[:, 0] >= threshold
    true_novel = flat.gt_novel
    segments = {"pre": (flat.starts, flat.post_start), "post": (flat.post_start, flat.ends)}
    running = {
        "tp": flat.cumulative(predicted & true_novel),
        "predicted": flat.cumulative(predicted),
        "true": flat.novel_running,
    }
    for segment, (lo, hi) in segments.items():
        size = hi - lo
        tp = flat.segment_sums(running["tp"], lo, hi)
        n_predicted = flat.segment_sums(running["predicted"], lo, hi)
        n_true = flat.segment_sums(running["true"], lo, hi)
        fp, fn = n_predicted - tp, n_true - tp
        tn = size - tp - fp - fn
        precision = zero_if_undefined(tp, tp + fp)
        recall = zero_if_undefined(tp, tp + fn)
        f1 = zero_if_undefined(2 * precision * recall, precision + recall)
        accuracy = zero_if_undefined(tp + tn, size)
        has_segment = size > 0
        reason = f"no trial has {segment}-novelty samples"
        # Without a novel sample in the segment (always so before the red light, which is the first novel
        # sample), TP = 0 and FN = 0: precision, recall and F1 are 0 by construction, not a measurement.
        no_novel = has_segment.any() and not n_true[has_segment].any()
        for rate, values in (("precision", precision), ("recall", recall), ("f1", f1), ("accuracy", accuracy)):
            if no_novel and rate != "accuracy":
                out[f"ndp_{rate}_{segment}"] = NA(
                    f"no novel sample {'before' if segment == 'pre' else 'from'} the red light in any trial: "
                    f"{rate} would be 0 by construction (sail-on-client reports that 0)"
                )
            else:
                out[f"ndp_{rate}_{segment}"] = mean_over(values, has_segment, reason)
    return out


def detection_vs_threshold(
    trials: Sequence[OndTrial], thresholds: Sequence[float] = DETECTION_THRESHOLD_GRID
) -> dict[str, np.ndarray]:
    """The detection metrics (M1, M2, M2 over all trials, M2.1, per-sample NDP) at each threshold.

    Returns ``{"threshold": [T], name: [T] for name in DETECTION_METRIC_NAMES}``, NaN where a value is
    N/A (e.g. M1 without a correctly detected trial): the data of a detection-vs-threshold figure.
    Each entry equals ``program_metrics(trials, threshold=t)[name]``.
    """
    grid = _check_thresholds(thresholds)
    flat = FlatTrials(trials)
    return _detection_table(flat, grid)


def _check_thresholds(thresholds) -> np.ndarray:
    grid = as_array("thresholds", thresholds, ndim=1, finite=True, low=0.0, high=1.0)
    if grid.size == 0:
        raise MetricInputError("thresholds: expected at least one threshold, got an empty list")
    return grid


def _detection_table(flat: FlatTrials, grid: np.ndarray, rows: list | None = None) -> dict[str, np.ndarray]:
    table = {"threshold": grid.copy()}
    if rows is None:
        rows = [_detection_metrics(flat, float(t)) for t in grid]
    for name in DETECTION_METRIC_NAMES:
        table[name] = np.array([math.nan if isinstance(row[name], NA) else row[name] for row in rows])
    return table
