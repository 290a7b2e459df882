"""Detection metrics (M1, M2, M2.1, per-sample novelty detection) at one threshold and over a grid."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from owl_eval.metrics.results import NA
from owl_eval.metrics.validation import MetricInputError, as_array
from owl_eval.protocols.ond.metrics.flat import FlatTrials, mean_over, zero_if_undefined
from owl_eval.protocols.ond.metrics.trial import DETECTION_THRESHOLD_GRID, OndTrial

# Trial-level detection (M1, M2, M2.1): what p_world_changed says about the red light. Under condition
# "given" the agent is told the red light, so these measure nothing (N/A with GIVEN_REASON).
TRIAL_DETECTION_NAMES = ("m1_mean_fn_cdt", "m2_cdt_pct", "m2_cdt_pct_all", "m21_fp_pct")
# Per-sample detection by the unknown-class score: p_class[:, 0] >= threshold against gt_novel (ours).
UNKNOWN_SCORE_NAMES = tuple(
    f"unknown_score_{rate}_{segment}"
    for segment in ("pre", "post")
    for rate in ("precision", "recall", "f1", "accuracy")
)
# sail-on-client's m_ndp / m_ndp_pre / m_ndp_post on P(world changed): p_world_changed > threshold against
# gt_novel, with the reference's segments and zero conventions, under the reference's key names.
M_NDP_RATES = ("accuracy", "precision", "recall", "f1_score")
M_NDP_NAMES = tuple(f"m_ndp{mode}_{rate}" for mode in ("", "_pre", "_post") for rate in M_NDP_RATES)
# What p_world_changed says: not measured when the red light is given.
WORLD_CHANGED_NAMES = (*TRIAL_DETECTION_NAMES, *M_NDP_NAMES)
DETECTION_METRIC_NAMES = (*TRIAL_DETECTION_NAMES, *UNKNOWN_SCORE_NAMES, *M_NDP_NAMES)
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
    segments = {"pre": (flat.starts, flat.post_start), "post": (flat.post_start, flat.ends)}
    for segment, rates, has_segment, no_novel in _segment_rates(flat, flat.p_class[:, 0] >= threshold, segments):
        reason = f"no trial has {segment}-novelty samples"
        # Without a novel sample in the segment (always so before the red light, which is the first novel
        # sample), TP = 0 and FN = 0: precision, recall and F1 are 0 by construction, not a measurement.
        for rate, values in rates.items():
            if no_novel and rate != "accuracy":
                out[f"unknown_score_{rate}_{segment}"] = NA(
                    f"no novel sample {'before' if segment == 'pre' else 'from'} the red light in any trial: "
                    f"{rate} would be 0 by construction (sail-on-client reports that 0)"
                )
            else:
                out[f"unknown_score_{rate}_{segment}"] = mean_over(values, has_segment, reason)
    out.update(_m_ndp(flat, threshold))
    return out


def _segment_rates(flat: FlatTrials, predicted: np.ndarray, segments: dict):
    """Per trial and segment ``[lo, hi)``, the per-sample detection rates of ``predicted`` against ``gt_novel``:
    yields ``(key, {precision, recall, f1, accuracy}, segment not empty, no novel sample in any segment)``.
    An empty denominator gives 0 (sail-on-client's convention)."""
    tp_running = flat.cumulative(predicted & flat.gt_novel)
    predicted_running = flat.cumulative(predicted)
    for key, (lo, hi) in segments.items():
        size = hi - lo
        tp = flat.segment_sums(tp_running, lo, hi)
        n_predicted = flat.segment_sums(predicted_running, lo, hi)
        n_true = flat.segment_sums(flat.novel_running, lo, hi)
        fp, fn = n_predicted - tp, n_true - tp
        tn = size - tp - fp - fn
        precision = zero_if_undefined(tp, tp + fp)
        recall = zero_if_undefined(tp, tp + fn)
        rates = {
            "precision": precision,
            "recall": recall,
            "f1": zero_if_undefined(2 * precision * recall, precision + recall),
            "accuracy": zero_if_undefined(tp + tn, size),
        }
        included = size > 0
        yield key, rates, included, bool(included.any() and not n_true[included].any())


def _m_ndp(flat: FlatTrials, threshold: float) -> dict[str, float | NA]:
    """sail-on-client 0.30's ``m_ndp`` (``metrics.py``) per trial on ``p_world_changed``, mean over trials.

    As the reference: a sample is predicted novel when ``p_world_changed > threshold`` (strictly);
    precision = TP / (TP + FP) and recall = TP / (TP + FN) are 0 on an empty denominator, F1 is 0 when both
    are 0; ``full_test`` is the whole trial; ``post_novelty`` runs from the first novel sample (the red light)
    to the end and is undefined (the reference's -1) without novelty; ``pre_novelty`` runs up to the first
    novel sample, or over the whole trial when the trial has no novel sample or only novel samples. Not
    rounded (the reference rounds to 5 decimals). A trial whose segment is empty (pre-novelty of a trial
    whose first sample is novel and a later one is not: the reference divides 0 by 0) is left out.
    """
    out: dict[str, float | NA] = {}
    n_novel = flat.segment_sums(flat.novel_running, flat.starts, flat.ends)
    only_novel = n_novel == flat.lengths
    pre_end = np.where(flat.has_novelty & ~only_novel, flat.post_start, flat.ends)
    segments = {"": (flat.starts, flat.ends), "_pre": (flat.starts, pre_end), "_post": (flat.post_start, flat.ends)}
    empty_reasons = {
        "": "no trial",
        "_pre": "no trial has pre-novelty samples",
        "_post": "no trial has novelty (the reference reports -1)",
    }
    predicted = flat.p_world_changed > threshold
    for mode, rates, included, no_novel in _segment_rates(flat, predicted, segments):
        for rate, values in rates.items():
            rate = "f1_score" if rate == "f1" else rate  # the reference's key
            name = f"m_ndp{mode}_{rate}"
            if no_novel and rate != "accuracy":
                out[name] = NA(
                    f"no novel sample in the {mode[1:] or 'full'}-novelty segment of any trial: {rate} would be 0 "
                    "by construction (sail-on-client reports that 0)"
                )
            else:
                out[name] = mean_over(values, included, empty_reasons[mode])
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
