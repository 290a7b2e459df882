"""Detection metrics (M1, M2, M2.1, per-sample novelty detection) at one threshold and over a grid.

Each is registered in :data:`~owl_eval.protocols.ond.metrics.declared.OND` with the tag ``THRESHOLD_GRID``: it reads
``options.threshold``, so :func:`~owl_eval.protocols.ond.metrics.program.program_metrics` can also report it at every
threshold of the grid (:func:`threshold_rows`, :func:`vs_threshold`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from owl_eval.metrics.declare import Declared, NAIf
from owl_eval.metrics.results import NA
from owl_eval.metrics.validation import MetricInputError, as_array
from owl_eval.protocols.ond.metrics.declared import OND, THRESHOLD_GRID, ProgramOptions
from owl_eval.protocols.ond.metrics.flat import FlatTrials, mean_over, zero_if_undefined
from owl_eval.protocols.ond.metrics.trial import DETECTION_THRESHOLD_GRID, OndTrial

# Trial-level detection (M1, M2, M2.1): what p_world_changed says about the red light. Under condition
# "given" the agent is told the red light, so these measure nothing (N/A with GIVEN_REASON).
TRIAL_DETECTION_NAMES = ("m1_mean_fn_cdt", "m2_cdt_pct", "m2_cdt_pct_all", "m21_fp_pct")
# Per-sample detection by the unknown-class score: p_class[:, 0] >= threshold against gt_novel (ours).
UNKNOWN_SCORE_RATES = ("precision", "recall", "f1", "accuracy")
UNKNOWN_SCORE_NAMES = tuple(
    f"unknown_score_{rate}_{segment}" for segment in ("pre", "post") for rate in UNKNOWN_SCORE_RATES
)
# sail-on-client's m_ndp / m_ndp_pre / m_ndp_post on P(world changed): p_world_changed > threshold against
# gt_novel, with the reference's segments and zero conventions, under the reference's key names.
M_NDP_MODES = ("", "_pre", "_post")
M_NDP_RATES = ("accuracy", "precision", "recall", "f1_score")
M_NDP_NAMES = tuple(f"m_ndp{mode}_{rate}" for mode in M_NDP_MODES for rate in M_NDP_RATES)
# What p_world_changed says: not measured when the red light is given.
WORLD_CHANGED_NAMES = (*TRIAL_DETECTION_NAMES, *M_NDP_NAMES)
DETECTION_METRIC_NAMES = (*TRIAL_DETECTION_NAMES, *UNKNOWN_SCORE_NAMES, *M_NDP_NAMES)
GIVEN_REASON = "the red light is given (condition given): detection is not measured"
GIVEN = NAIf(GIVEN_REASON, lambda options, **_: options.condition == "given")

_INF = math.inf


# ---- trial-level detection: the first index with p_world_changed >= threshold, against the red light


def _trial_detection(flat: FlatTrials, threshold: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per trial: the first detection (-1: never), correctly detected (CDT: novelty and a detection at or after
    the red light), early (a detection before the red light, any detection without novelty). Shared by M1-M2.1."""

    def compute():
        detection = flat.first_detection(threshold)
        detected = detection >= 0
        cdt = flat.has_novelty & detected & (detection >= flat.red_light)
        early = detected & (~flat.has_novelty | (detection < flat.red_light))
        return detection, cdt, early

    return flat.shared(("trial_detection", threshold), compute)


@OND.metric(
    "m1_mean_fn_cdt",
    higher_is_better=False,
    bounds=(0.0, _INF),
    title="M1: FN in correctly detected trials",
    description="M1: mean number of post-novelty samples before the first detection, over correctly detected trials",
    na=(GIVEN,),
    needs=("flat", "options"),
    tags=(THRESHOLD_GRID,),
)
def _m1_mean_fn_cdt(flat: FlatTrials, options: ProgramOptions) -> float | NA:
    """M1 = mean over CDT trials of (d - red_light), d the first detection (sail-on-client ``m_num_stats``)."""
    detection, cdt, _ = _trial_detection(flat, options.threshold)
    return mean_over(
        (detection - flat.red_light).astype(np.float64),
        cdt,
        f"no correctly detected trial at threshold {options.threshold:g}: none of the {int(flat.has_novelty.sum())} "
        "trials with novelty has p_world_changed >= threshold at or after its red light",
    )


@OND.metric(
    "m2_cdt_pct",
    higher_is_better=True,
    bounds=(0.0, 100.0),
    title="M2: correctly detected trials (%)",
    description="M2: % of trials with novelty that are correctly detected (detection at or after the red light)",
    na=(GIVEN,),
    needs=("flat", "options"),
    tags=(THRESHOLD_GRID,),
)
def _m2_cdt_pct(flat: FlatTrials, options: ProgramOptions) -> float | NA:
    """M2 = 100 #CDT / #trials with novelty (sail-on-client ``m_num_stats``)."""
    _, cdt, _ = _trial_detection(flat, options.threshold)
    n_novel_trials = int(flat.has_novelty.sum())
    if not n_novel_trials:
        return NA("no trial has novelty (every red_light is None)")
    return 100.0 * cdt.sum() / n_novel_trials


@OND.metric(
    "m2_cdt_pct_all",
    higher_is_better=True,
    bounds=(0.0, 100.0),
    description="M2 over all trials: % correctly detected trials among all trials",
    na=(GIVEN,),
    needs=("flat", "options"),
    tags=(THRESHOLD_GRID,),
)
def _m2_cdt_pct_all(flat: FlatTrials, options: ProgramOptions) -> float:
    """100 #CDT / #trials."""
    _, cdt, _ = _trial_detection(flat, options.threshold)
    return 100.0 * cdt.sum() / flat.n_trials


@OND.metric(
    "m21_fp_pct",
    higher_is_better=False,
    bounds=(0.0, 100.0),
    title="M2.1: false-positive trials (%)",
    description="M2.1: % of trials with a detection before the red light (any detection when no novelty)",
    na=(GIVEN,),
    needs=("flat", "options"),
    tags=(THRESHOLD_GRID,),
)
def _m21_fp_pct(flat: FlatTrials, options: ProgramOptions) -> float:
    """M2.1 = 100 #early trials / #trials (sail-on-client ``m_is_cdt_and_is_early``)."""
    _, _, early = _trial_detection(flat, options.threshold)
    return 100.0 * early.sum() / flat.n_trials


# ---- per-sample detection


def _by_construction(segment: str, rate: str) -> bool:
    # before the red light there is no novel sample: precision, recall and F1 are 0 by construction
    return segment == "pre" and rate != "accuracy"


@OND.family(
    *(
        OND.spec(
            f"unknown_score_{rate}_{segment}",
            None if _by_construction(segment, rate) else True,
            (0.0, 1.0),
            description=f"per-sample novelty detection {rate} of the unknown-class score p_class[:, 0] >= threshold "
            f"against gt_novel, {segment} red light, mean over trials (not sail-on-client's m_ndp, which thresholds "
            "p_world_changed)"
            + (
                " (N/A: no novel sample comes before the red light, so it would be 0 by construction)"
                if _by_construction(segment, rate)
                else ""
            ),
        )
        for segment in ("pre", "post")
        for rate in UNKNOWN_SCORE_RATES
    ),
    needs=("flat", "options"),
    tags=(THRESHOLD_GRID,),
)
def _unknown_score(flat: FlatTrials, options: ProgramOptions) -> dict[str, float | NA]:
    """Per trial and segment (pre: ``[:red_light]``, post: ``[red_light:]``), precision TP / (TP + FP), recall
    TP / (TP + FN), F1 = 2PR / (P + R) and accuracy (TP + TN) / n of ``p_class[:, 0] >= threshold`` against
    ``gt_novel`` (0 on an empty denominator, sail-on-client's convention), mean over the trials that have the
    segment (METRICS.md section 1)."""
    out: dict[str, float | NA] = {}
    segments = {"pre": (flat.starts, flat.post_start), "post": (flat.post_start, flat.ends)}
    predicted = flat.p_class[:, 0] >= options.threshold
    for segment, rates, has_segment, no_novel in _segment_rates(flat, predicted, segments):
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


# sail-on-client's rates in the order _segment_rates yields them: the order m_ndp* values are reported in
_M_NDP_REPORTED = tuple(
    f"m_ndp{mode}_{rate}" for mode in M_NDP_MODES for rate in ("precision", "recall", "f1_score", "accuracy")
)


@OND.family(
    *(
        OND.spec(
            f"m_ndp{mode}_{rate}",
            None if (mode == "_pre" and rate != "accuracy") else True,
            (0.0, 1.0),
            description=f"sail-on-client's m_ndp{mode} {rate}: p_world_changed > threshold against gt_novel per sample, "
            f"{where}, mean over trials (reference conventions, unrounded)",
        )
        for mode, where in zip(
            M_NDP_MODES,
            (
                "whole trial",
                "before the first novel sample (whole trial without novelty)",
                "from the first novel sample on (trials with novelty)",
            ),
        )
        for rate in M_NDP_RATES
    ),
    na=(GIVEN,),
    na_names=lambda **_: _M_NDP_REPORTED,
    needs=("flat", "options"),
    tags=(THRESHOLD_GRID,),
)
def _m_ndp(flat: FlatTrials, options: ProgramOptions) -> dict[str, float | NA]:
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
    predicted = flat.p_world_changed > options.threshold
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

    Returns ``{"threshold": [T], name: [T] for name in DETECTION_METRIC_NAMES}`` (and every other registered
    threshold-grid metric), NaN where a value is N/A (e.g. M1 without a correctly detected trial): the data of a
    detection-vs-threshold figure. Each entry equals ``program_metrics(trials, threshold=t)[name]``.
    """
    grid = _check_thresholds(thresholds)
    flat = FlatTrials(trials)
    return {"threshold": grid.copy(), **vs_threshold(threshold_rows(flat, None, ProgramOptions(), grid))}


def _check_thresholds(thresholds) -> np.ndarray:
    grid = as_array("thresholds", thresholds, ndim=1, finite=True, low=0.0, high=1.0)
    if grid.size == 0:
        raise MetricInputError("thresholds: expected at least one threshold, got an empty list")
    return grid


Row = list[tuple[Declared, dict, str | None]]


def threshold_rows(
    flat: FlatTrials, baseline: FlatTrials | None, options: ProgramOptions, grid: np.ndarray
) -> list[Row]:
    """Per threshold t of ``grid``, every threshold-grid metric at t: ``(entry, {name: value}, N/A rule reason)``."""
    return [
        list(
            OND.compute(
                {"flat": flat, "baseline": baseline, "options": options.at(float(t))},
                where=lambda entry: THRESHOLD_GRID in entry.tags,
            )
        )
        for t in grid
    ]


def vs_threshold(rows: list[Row]) -> dict[str, np.ndarray]:
    """Each threshold-grid name over the thresholds of ``rows`` (NaN where N/A), in declaration order; a metric
    that is N/A by a declared rule at every threshold (detection under the given condition) measures nothing
    and has none."""
    out: dict[str, np.ndarray] = {}
    for i, (entry, _, _) in enumerate(rows[0] if rows else []):
        if all(row[i][2] is not None for row in rows):
            continue
        for spec in entry.specs:
            values = [row[i][1][spec.name] for row in rows]
            out[spec.name] = np.array([math.nan if isinstance(v, NA) else v for v in values])
    return out
