"""OND (open-world novelty detection) program metrics: SAIL-ON M1-M6, top-k, per-sample detection, open set.

Definitions: shared/METRICS.md section 1 (they override everything else). Reference: sail-on-client
0.30.0, ``sail_on_client.evaluate`` (``metrics.py``: ``m_num_stats``, ``m_acc``, ``m_ndp``;
``image_classification.py``: ``m_is_cdt_and_is_early``, ``m_nrp``; ``utils.py``: ``topk_accuracy``).
Our numbers equal the reference on ordinary inputs except where METRICS.md fixes it:

* a detection on the last sample is a correctly detected trial (the reference requires the 1-based
  detection index to be < the trial length, which refuses it);
* pre-novelty is ``[:red_light]`` and post-novelty ``[red_light:]`` (the reference's ``m_acc`` adds 1 to
  the 0-based red-light index and so counts the first novel sample as pre-novelty);
* top-k ties go to the lower column (the reference's ``np.argsort`` breaks ties arbitrarily);
* per-sample detection uses ``score >= threshold`` like the trial-level detection (``m_ndp`` uses ``>``);
* a baseline with zero pre-novelty accuracy makes that trial's NRP N/A instead of a division by zero;
* nothing is rounded (the reference rounds accuracies and rates to 5 decimals).

Everything is computed on all trials at once: the trials are concatenated into flat arrays, and
per-trial quantities are segment sums (cumulative sums read at segment bounds) or ``reduceat``.
The pure per-trial building blocks live in :mod:`owl_eval.metrics.ond.blocks`; this module holds the data type,
the program-level aggregation and the metric declarations.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from owl_eval.metrics.ond.blocks import (  # re-exported: the public building blocks
    _open_set_metrics_unchecked,
    _rank_unchecked,
    asymptotic_performance_task_improvement,
    correctly_detected,
    detected_early,
    detection_index,
    novelty_detection_performance,
    novelty_reaction_performance,
    open_set_metrics,
    overall_performance_task_improvement,
    rank_of_true_class,
    top_k_accuracy,
    topk_correct,
)
from owl_eval.metrics.open_set import (
    auroc,
    average_precision,
    fpr_at_tpr,
    novelty_score_metrics,
    oscr,
)
from owl_eval.metrics.results import NA, MetricResults, MetricSpec, Series
from owl_eval.metrics.validation import MetricInputError, as_array, check_option

__all__ = [
    "OndTrial",
    "program_metrics",
    "detection_vs_threshold",
    "SPECS",
    "SERIES",
    "DETECTION_THRESHOLD_GRID",
    "DETECTION_METRIC_NAMES",
    "TRIAL_DETECTION_NAMES",
    "GIVEN_REASON",
    # per-trial building blocks (owl_eval.metrics.ond.blocks) and open-set functions (owl_eval.metrics.open_set)
    "detection_index",
    "correctly_detected",
    "detected_early",
    "rank_of_true_class",
    "topk_correct",
    "top_k_accuracy",
    "novelty_detection_performance",
    "novelty_reaction_performance",
    "overall_performance_task_improvement",
    "asymptotic_performance_task_improvement",
    "open_set_metrics",
    "auroc",
    "average_precision",
    "fpr_at_tpr",
    "oscr",
    "novelty_score_metrics",
]

DETECTION_THRESHOLD_GRID: tuple[float, ...] = (0.175, 0.225, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
NRP_WINDOWS = ("post", "asymptotic")
CONDITIONS = ("system", "given")
ROW_SUM_TOLERANCE = 1e-6


# --------------------------------------------------------------------------------------------------
# The data of one trial
# --------------------------------------------------------------------------------------------------


@dataclass
class OndTrial:
    """One OND trial: ground truth and one agent's outputs, checked on construction.

    ``gt_class[N]`` (0 = unknown/novel, 1..K known), ``gt_novel[N]`` (0/1), ``red_light`` (0-based index
    of the first novel sample, None when the trial has no novelty), ``p_world_changed[N]`` in [0, 1],
    ``p_class[N, K+1]`` (column 0 = unknown, rows sum to 1 within 1e-6), ``batch_size`` (samples per
    mini-batch; the last batch may be shorter). Arrays are converted once (int64 / float64) here so
    that the program metrics only concatenate them.
    """

    gt_class: np.ndarray
    gt_novel: np.ndarray
    red_light: int | None
    p_world_changed: np.ndarray
    p_class: np.ndarray
    batch_size: int
    trial_id: str = ""

    def __post_init__(self):
        who = f"trial {self.trial_id!r}" if self.trial_id else "trial (no trial_id)"
        if (
            isinstance(self.batch_size, (bool, np.bool_))
            or not isinstance(self.batch_size, (int, np.integer))
            or self.batch_size < 1
        ):
            raise MetricInputError(f"{who}: batch_size must be a positive int, got {self.batch_size!r}")
        self.batch_size = int(self.batch_size)

        def where(index: int) -> str:
            return f"sample {index} (batch {index // self.batch_size}, batch_size {self.batch_size})"

        gt_class = as_array(f"{who}: gt_class", self.gt_class, ndim=1, allow_nan=False)
        n = gt_class.size
        if n == 0:
            raise MetricInputError(f"{who}: gt_class is empty; a trial needs at least one sample")
        non_integer = gt_class != np.round(gt_class)
        if non_integer.any():
            i = int(np.argmax(non_integer))
            raise MetricInputError(
                f"{who}: gt_class must hold integer class ids, got {gt_class[i].item()!r} at {where(i)}"
            )

        p_class = as_array(f"{who}: p_class", self.p_class, shape=(n, None))
        if p_class.shape[1] < 2:
            raise MetricInputError(
                f"{who}: p_class needs K+1 >= 2 columns (column 0 = unknown), got shape {p_class.shape}"
            )
        _check_probabilities(f"{who}: p_class", p_class, where)
        row_error = np.abs(p_class.sum(axis=1) - 1.0)
        if (row_error > ROW_SUM_TOLERANCE).any():
            i = int(np.argmax(row_error > ROW_SUM_TOLERANCE))
            raise MetricInputError(
                f"{who}: p_class rows must sum to 1 within {ROW_SUM_TOLERANCE:g}; row at {where(i)} sums to "
                f"{p_class[i].sum().item()!r} (normalise the scores, or set normalize: true in the protocol config)"
            )
        n_columns = p_class.shape[1]
        outside = (gt_class < 0) | (gt_class >= n_columns)
        if outside.any():
            i = int(np.argmax(outside))
            raise MetricInputError(
                f"{who}: gt_class must lie in [0, {n_columns - 1}] (p_class has {n_columns} columns), got {gt_class[i]:g} at {where(i)}"
            )

        gt_novel = as_array(f"{who}: gt_novel", self.gt_novel, shape=(n,), allow_nan=False)
        not_binary = (gt_novel != 0) & (gt_novel != 1)
        if not_binary.any():
            i = int(np.argmax(not_binary))
            raise MetricInputError(f"{who}: gt_novel must be 0/1, got {gt_novel[i].item()!r} at {where(i)}")

        p_world_changed = as_array(f"{who}: p_world_changed", self.p_world_changed, shape=(n,))
        _check_probabilities(f"{who}: p_world_changed", p_world_changed, where)

        novel_positions = np.flatnonzero(gt_novel)
        first_novel = int(novel_positions[0]) if novel_positions.size else None
        red_light = self.red_light
        if red_light is not None:
            if isinstance(red_light, (bool, np.bool_)) or not isinstance(red_light, (int, np.integer)):
                raise MetricInputError(f"{who}: red_light must be an int index or None, got {red_light!r}")
            red_light = int(red_light)
            if not 0 <= red_light < n:
                raise MetricInputError(f"{who}: red_light must be a 0-based index in [0, {n - 1}], got {red_light}")
        if red_light != first_novel:
            raise MetricInputError(
                f"{who}: red_light is {red_light!r} but the first novel sample in gt_novel is at index {first_novel!r}; "
                "red_light must be the 0-based index of the first novel sample (None when there is none)"
            )

        self.gt_class = gt_class.astype(np.int64)
        self.gt_novel = gt_novel.astype(np.int64)
        self.red_light = red_light
        self.p_world_changed = p_world_changed
        self.p_class = p_class

    @property
    def n_samples(self) -> int:
        return int(self.gt_class.size)

    @property
    def n_known_classes(self) -> int:
        return int(self.p_class.shape[1] - 1)


def _check_probabilities(name: str, values: np.ndarray, where) -> None:
    nan = np.isnan(values)
    if nan.any():
        i = np.unravel_index(int(np.argmax(nan)), values.shape)
        raise MetricInputError(f"{name}: NaN at {where(int(i[0]))}{_column_text(i)}; expected scores in [0, 1]")
    outside = (values < 0.0) | (values > 1.0)
    if outside.any():
        i = np.unravel_index(int(np.argmax(outside)), values.shape)
        raise MetricInputError(
            f"{name}: value {values[i].item()!r} at {where(int(i[0]))}{_column_text(i)} is outside [0, 1]"
        )


def _column_text(index: tuple) -> str:
    return f", column {int(index[1])}" if len(index) > 1 else ""


# --------------------------------------------------------------------------------------------------
# All trials as flat arrays
# --------------------------------------------------------------------------------------------------


class _FlatTrials:
    """Trials concatenated: sample arrays of length sum(N_t), per-trial bounds into them."""

    def __init__(self, trials: Sequence[OndTrial], *, what: str = "trials"):
        if isinstance(trials, OndTrial) or not isinstance(trials, Sequence):
            raise MetricInputError(f"{what}: expected a list of OndTrial, got {type(trials).__name__}")
        if len(trials) == 0:
            raise MetricInputError(f"{what}: expected at least one OndTrial, got an empty list")
        for i, trial in enumerate(trials):
            if not isinstance(trial, OndTrial):
                raise MetricInputError(f"{what}[{i}]: expected an OndTrial, got {type(trial).__name__}")
        n_columns = {t.p_class.shape[1] for t in trials}
        if len(n_columns) > 1:
            first = trials[0].p_class.shape[1]
            i = next(i for i, t in enumerate(trials) if t.p_class.shape[1] != first)
            raise MetricInputError(
                f"{what}[{i}] ({trials[i].trial_id!r}): p_class has {trials[i].p_class.shape[1]} columns, "
                f"{what}[0] has {first}; all trials must share the K+1 classes"
            )
        self.trials = trials
        self.ids = [t.trial_id or f"#{i}" for i, t in enumerate(trials)]
        self.lengths = np.fromiter((t.gt_class.size for t in trials), np.int64, len(trials))
        self.starts = np.concatenate(([0], np.cumsum(self.lengths)[:-1]))
        self.ends = self.starts + self.lengths
        self.red_light = np.fromiter(
            (-1 if t.red_light is None else t.red_light for t in trials), np.int64, len(trials)
        )
        self.has_novelty = self.red_light >= 0
        # post-novelty starts at the red light; a trial without novelty is all pre-novelty
        self.post_start = np.where(self.has_novelty, self.starts + self.red_light, self.ends)
        self.batch_size = np.fromiter((t.batch_size for t in trials), np.int64, len(trials))
        self.gt_class = np.concatenate([t.gt_class for t in trials])
        self.gt_novel = np.concatenate([t.gt_novel for t in trials]).astype(bool)
        self.p_world_changed = np.concatenate([t.p_world_changed for t in trials])
        self.p_class = np.concatenate([t.p_class for t in trials])

    @functools.cached_property
    def trial_of_sample(self) -> np.ndarray:
        return np.repeat(np.arange(self.n_trials), self.lengths)

    @functools.cached_property
    def local_index(self) -> np.ndarray:
        """0-based position of each sample inside its trial."""
        return np.arange(self.gt_class.size) - np.repeat(self.starts, self.lengths)

    @functools.cached_property
    def novel_running(self) -> np.ndarray:
        """Running count of gt_novel (threshold-independent: shared by every threshold of a grid)."""
        return self.cumulative(self.gt_novel)

    @property
    def n_trials(self) -> int:
        return len(self.trials)

    def check_aligned(self, baseline: _FlatTrials) -> None:
        """The baseline must run on the very same trials: same lengths, red lights and ground truth."""
        if baseline.n_trials != self.n_trials:
            raise MetricInputError(
                f"baseline: {baseline.n_trials} trials for {self.n_trials} agent trials; they must be aligned"
            )
        for name, mine, theirs in (
            ("length", self.lengths, baseline.lengths),
            ("red_light", self.red_light, baseline.red_light),
        ):
            differ = mine != theirs
            if differ.any():
                i = int(np.argmax(differ))
                raise MetricInputError(
                    f"baseline[{i}] ({baseline.ids[i]!r}): {name} {theirs[i]} differs from trials[{i}] ({self.ids[i]!r}) {name} {mine[i]}"
                )
        if baseline.p_class.shape[1] != self.p_class.shape[1]:
            raise MetricInputError(
                f"baseline: p_class has {baseline.p_class.shape[1]} columns, the agent's has {self.p_class.shape[1]}"
            )
        for name, mine, theirs in (
            ("gt_class", self.gt_class, baseline.gt_class),
            ("gt_novel", self.gt_novel, baseline.gt_novel),
        ):
            differ = mine != theirs
            if differ.any():
                j = int(np.argmax(differ))
                i = int(self.trial_of_sample[j])
                raise MetricInputError(
                    f"baseline[{i}] ({baseline.ids[i]!r}): {name} differs from trials[{i}] ({self.ids[i]!r}) "
                    f"at sample {int(self.local_index[j])}; the baseline must run on the same trials"
                )

    @staticmethod
    def cumulative(values: np.ndarray) -> np.ndarray:
        """Running count with a leading 0, so that a segment sum is two look-ups."""
        out = np.empty(values.size + 1, dtype=np.int64)
        out[0] = 0
        np.cumsum(values, dtype=np.int64, out=out[1:])
        return out

    @staticmethod
    def segment_sums(running: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """sum(values[lo_t:hi_t]) per trial from ``running = cumulative(values)`` (absolute flat bounds;
        an empty segment gives 0)."""
        return running[hi] - running[lo]

    def asymptotic_start(self, width: int) -> np.ndarray:
        """Start of the last ``width`` samples of each trial (the whole trial when it is shorter)."""
        return np.maximum(self.starts, self.ends - width)

    def first_detection(self, threshold: float) -> np.ndarray:
        """Per trial: first 0-based index with p_world_changed >= threshold, -1 when never."""
        never = np.iinfo(np.int64).max
        candidate = np.where(self.p_world_changed >= threshold, self.local_index, never)
        first = np.minimum.reduceat(candidate, self.starts)
        return np.where(first == never, -1, first)


def _mean_over(values: np.ndarray, included: np.ndarray, what: str) -> float | NA:
    if not included.any():
        return NA(what)
    return float(values[included].mean())


def _ratio_or_nan(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1), np.nan)


def _zero_if_undefined(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    # sail-on-client's m_ndp convention: precision/recall/F1 with an empty denominator are 0
    return np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1), 0.0)


# --------------------------------------------------------------------------------------------------
# Detection metrics (M1, M2, M2.1, per-sample NDP) at one threshold
# --------------------------------------------------------------------------------------------------

# Trial-level detection (M1, M2, M2.1): what p_world_changed says about the red light. Under condition
# "given" the agent is told the red light, so these measure nothing (N/A with GIVEN_REASON).
TRIAL_DETECTION_NAMES = ("m1_mean_fn_cdt", "m2_cdt_pct", "m2_cdt_pct_all", "m21_fp_pct")
DETECTION_METRIC_NAMES = (
    *TRIAL_DETECTION_NAMES,
    *(f"ndp_{rate}_{segment}" for segment in ("pre", "post") for rate in ("precision", "recall", "f1", "accuracy")),
)
GIVEN_REASON = "the red light is given (condition given): detection is not measured"


def _detection_metrics(flat: _FlatTrials, threshold: float) -> dict[str, float | NA]:
    out: dict[str, float | NA] = {}
    detection = flat.first_detection(threshold)
    detected = detection >= 0
    has_novelty = flat.has_novelty
    cdt = has_novelty & detected & (detection >= flat.red_light)
    early = detected & (~has_novelty | (detection < flat.red_light))
    n_novel_trials = int(has_novelty.sum())
    out["m1_mean_fn_cdt"] = _mean_over(
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
        precision = _zero_if_undefined(tp, tp + fp)
        recall = _zero_if_undefined(tp, tp + fn)
        f1 = _zero_if_undefined(2 * precision * recall, precision + recall)
        accuracy = _zero_if_undefined(tp + tn, size)
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
                out[f"ndp_{rate}_{segment}"] = _mean_over(values, has_segment, reason)
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
    flat = _FlatTrials(trials)
    return _detection_table(flat, grid)


def _check_thresholds(thresholds) -> np.ndarray:
    grid = as_array("thresholds", thresholds, ndim=1, finite=True, low=0.0, high=1.0)
    if grid.size == 0:
        raise MetricInputError("thresholds: expected at least one threshold, got an empty list")
    return grid


def _detection_table(flat: _FlatTrials, grid: np.ndarray, rows: list | None = None) -> dict[str, np.ndarray]:
    table = {"threshold": grid.copy()}
    if rows is None:
        rows = [_detection_metrics(flat, float(t)) for t in grid]
    for name in DETECTION_METRIC_NAMES:
        table[name] = np.array([math.nan if isinstance(row[name], NA) else row[name] for row in rows])
    return table


# --------------------------------------------------------------------------------------------------
# The program metrics
# --------------------------------------------------------------------------------------------------


def program_metrics(
    trials: Sequence[OndTrial],
    baseline: Sequence[OndTrial] | None = None,
    *,
    threshold: float = 0.5,
    asymptotic_width: int = 100,
    nrp_window: str = "post",
    condition: str = "system",
    threshold_grid: bool = False,
) -> MetricResults:
    """SAIL-ON OND program metrics over a set of trials (METRICS.md section 1).

    ``baseline``: the baseline agent's trials, aligned with ``trials`` (same ground truth), needed for
    M3-M6 (N/A without it). ``threshold``: detection threshold on p_world_changed (M1, M2, M2.1) and on
    p_class[:, 0] (per-sample NDP). ``asymptotic_width``: samples at the end of a trial used by M6 and by
    NRP when ``nrp_window="asymptotic"`` (``"post"``: from the red light on, as sail-on-client).
    ``condition``: ``"system"`` reports NRP as ``m3_nrp_*``, ``"given"`` as ``m4_nrp_*``; under ``"given"`` the
    agent is told the red light, so M1, M2 and M2.1 (:data:`TRIAL_DETECTION_NAMES`) are N/A.

    Values that are fixed by construction are N/A with the reason, never a number: precision, recall and F1
    of a segment without novel samples (``ndp_*_pre``), M5/M6 when the agent's ``p_class`` equals the
    baseline's on every trial, and the novelty-score metrics of a constant score (:mod:`owl_eval.metrics.ond.blocks`).
    ``threshold_grid``: also report the detection metrics at 0.175 ... 0.9 as ``name@t`` and as series
    ``name_vs_threshold`` (step = threshold in thousandths, e.g. 175).

    Returns a :class:`MetricResults`; every name is declared in :data:`SPECS`.
    """
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, (int, float, np.floating))
        or not 0.0 <= threshold <= 1.0
    ):
        raise MetricInputError(f"threshold: expected a number in [0, 1], got {threshold!r}")
    if (
        isinstance(asymptotic_width, bool)
        or not isinstance(asymptotic_width, (int, np.integer))
        or asymptotic_width < 1
    ):
        raise MetricInputError(f"asymptotic_width: expected a positive int, got {asymptotic_width!r}")
    check_option("nrp_window", nrp_window, NRP_WINDOWS)
    check_option("condition", condition, CONDITIONS)
    check_option("threshold_grid", threshold_grid, (True, False))

    flat = _FlatTrials(trials)
    flat_baseline = None
    if baseline is not None:
        flat_baseline = _FlatTrials(baseline, what="baseline")
        flat.check_aligned(flat_baseline)

    given = condition == "given"
    results = MetricResults()
    for name, value in _detection_metrics(flat, float(threshold)).items():
        results.set(name, NA(GIVEN_REASON) if given and name in TRIAL_DETECTION_NAMES else value)

    # ---- top-k accuracy of the agent, per trial then averaged over the trials that have the segment
    rank = _rank_unchecked(flat.gt_class, flat.p_class)  # inputs were checked by OndTrial
    running: dict = {}  # (id of a rank array, k) -> running count of rank < k, shared with the baseline metrics
    segments = {
        "": (flat.starts, flat.ends),
        "_pre": (flat.starts, flat.post_start),
        "_post": (flat.post_start, flat.ends),
    }
    accuracy = {}
    for k in (1, 3):
        correct = rank < k
        running[id(rank), k] = flat.cumulative(correct)
        for suffix, (lo, hi) in segments.items():
            acc = _ratio_or_nan(flat.segment_sums(running[id(rank), k], lo, hi), hi - lo)
            accuracy[k, suffix] = acc
            results.set(f"top{k}{suffix}", _mean_over(acc, hi > lo, f"no trial has {suffix[1:]}-novelty samples"))
        results.series[f"top{k}_batch"] = _batch_series(flat, correct)

    # ---- baseline-dependent metrics: M3/M4 (NRP), M5 (OPTI), M6 (APTI)
    nrp_prefix = "m3" if condition == "system" else "m4"
    dependent = [f"{nrp_prefix}_nrp_top1", f"{nrp_prefix}_nrp_top3", "m5_opti_top1", "m6_apti_top1"]
    if flat_baseline is None:
        for name in dependent:
            results.set(name, NA("needs a baseline agent's trials (baseline=None)"))
    else:
        _baseline_metrics(results, flat, flat_baseline, rank, running, asymptotic_width, nrp_window, nrp_prefix)

    # ---- open-set recognition over all samples of all trials
    for name, value in _open_set_metrics_unchecked(flat.gt_class, flat.gt_novel, flat.p_class, rank).items():
        results.set(name, value)

    if threshold_grid:
        grid = np.asarray(DETECTION_THRESHOLD_GRID)
        rows = [_detection_metrics(flat, float(t)) for t in grid]
        for t, row in zip(grid, rows):
            for name, value in row.items():
                not_measured = given and name in TRIAL_DETECTION_NAMES
                results.set(f"{name}@{t:g}", NA(GIVEN_REASON) if not_measured else value)  # an N/A keeps its reason
        table = _detection_table(flat, grid, rows)
        steps = np.round(grid * 1000).astype(np.int64)
        for name in DETECTION_METRIC_NAMES:
            if not (given and name in TRIAL_DETECTION_NAMES):
                results.series[f"{name}_vs_threshold"] = Series(steps, table[name])  # NaN where N/A
    return results


def _batch_series(flat: _FlatTrials, correct: np.ndarray) -> Series:
    """Accuracy per mini-batch index: each trial's accuracy on its b-th batch, averaged over trials."""
    n_batches = -(-flat.lengths // flat.batch_size)  # ceil
    batch_offset = np.concatenate(([0], np.cumsum(n_batches)[:-1]))
    batch_of_sample = flat.local_index // flat.batch_size[flat.trial_of_sample]
    cell = batch_offset[flat.trial_of_sample] + batch_of_sample  # one cell per (trial, batch)
    n_cells = int(n_batches.sum())
    cell_accuracy = np.bincount(cell, weights=correct, minlength=n_cells) / np.bincount(cell, minlength=n_cells)
    batch_index_of_cell = np.arange(n_cells) - np.repeat(batch_offset, n_batches)
    steps = np.arange(int(n_batches.max()))
    totals = np.bincount(batch_index_of_cell, weights=cell_accuracy, minlength=steps.size)
    counts = np.bincount(batch_index_of_cell, minlength=steps.size)
    return Series(steps, totals / counts)


def _baseline_metrics(results, flat, flat_baseline, rank, running, asymptotic_width, nrp_window, nrp_prefix) -> None:
    baseline_rank = _rank_unchecked(flat_baseline.gt_class, flat_baseline.p_class)
    novel_trials = flat.has_novelty
    if not novel_trials.any():
        for name in (f"{nrp_prefix}_nrp_top1", f"{nrp_prefix}_nrp_top3", "m5_opti_top1", "m6_apti_top1"):
            results.set(
                name, NA("no trial has novelty (every red_light is None); M3-M6 average over trials with novelty")
            )
        return
    asym_lo = flat.asymptotic_start(asymptotic_width)
    post = (flat.post_start, flat.ends)
    pre = (flat.starts, flat.post_start)
    asym = (asym_lo, flat.ends)

    def accuracy(ranks, k, bounds):
        key = (id(ranks), k)
        if key not in running:
            running[key] = flat.cumulative(ranks < k)
        lo, hi = bounds
        return _ratio_or_nan(flat.segment_sums(running[key], lo, hi), hi - lo)

    def report(name, per_trial, excluded_reason):
        """Mean over trials with novelty whose value is defined; count the excluded ones."""
        usable = novel_trials & ~np.isnan(per_trial)
        n_excluded = int((novel_trials & ~usable).sum())
        results.set(f"{name}_n_excluded", n_excluded)
        if not usable.any():
            novel_ids = [flat.ids[i] for i in np.flatnonzero(novel_trials)]
            listed = ", ".join(novel_ids[:10]) + (f" and {len(novel_ids) - 10} more" if len(novel_ids) > 10 else "")
            results.set(name, NA(f"every trial with novelty is excluded: {excluded_reason} (trials {listed})"))
        else:
            results.set(name, float(per_trial[usable].mean()))

    agent_window = post if nrp_window == "post" else asym
    for k in (1, 3):
        nrp = 100.0 * _ratio_or_nan(accuracy(rank, k, agent_window), accuracy(baseline_rank, k, pre))
        # a baseline with no pre-novelty samples gives NaN above too: same exclusion
        report(
            f"{nrp_prefix}_nrp_top{k}",
            nrp,
            f"baseline top-{k} accuracy before the red light is 0 (or there is no pre-novelty sample)",
        )

    if np.array_equal(flat.p_class, flat_baseline.p_class):
        # The agent is the baseline: M5 = 0.5 and M6 = 1 on every trial by construction, not a measurement.
        reason = "the agent is the baseline (identical p_class on every trial): M5 = 0.5 and M6 = 1 by construction"
        for name in ("m5_opti_top1", "m6_apti_top1"):
            results.set(name, NA(reason))
            results.set(f"{name}_n_excluded", NA(reason))
        return
    agent_post, baseline_post = accuracy(rank, 1, post), accuracy(baseline_rank, 1, post)
    report(
        "m5_opti_top1",
        _ratio_or_nan(agent_post, agent_post + baseline_post),
        "agent and baseline both have top-1 accuracy 0 after the red light",
    )
    report(
        "m6_apti_top1",
        _ratio_or_nan(accuracy(rank, 1, asym), accuracy(baseline_rank, 1, asym)),
        f"baseline top-1 accuracy on the last {asymptotic_width} samples is 0",
    )


# --------------------------------------------------------------------------------------------------
# Declarations
# --------------------------------------------------------------------------------------------------


def _spec(name, higher, bounds, description, log_scale=False):
    return MetricSpec(
        name=name, protocol="ond", higher_is_better=higher, bounds=bounds, description=description, log_scale=log_scale
    )


_INF = math.inf
_DETECTION_SPECS = {
    "m1_mean_fn_cdt": (
        False,
        (0.0, _INF),
        "M1: mean number of post-novelty samples before the first detection, over correctly detected trials",
    ),
    "m2_cdt_pct": (
        True,
        (0.0, 100.0),
        "M2: % of trials with novelty that are correctly detected (detection at or after the red light)",
    ),
    "m2_cdt_pct_all": (True, (0.0, 100.0), "M2 over all trials: % correctly detected trials among all trials"),
    "m21_fp_pct": (
        False,
        (0.0, 100.0),
        "M2.1: % of trials with a detection before the red light (any detection when no novelty)",
    ),
    **{
        f"ndp_{rate}_{segment}": (
            None if (segment == "pre" and rate != "accuracy") else True,
            (0.0, 1.0),
            f"per-sample novelty detection {rate} of p_class[:, 0] >= threshold against gt_novel, {segment} red light, mean over trials"
            + (
                " (N/A: no novel sample comes before the red light, so it would be 0 by construction)"
                if segment == "pre" and rate != "accuracy"
                else ""
            ),
        )
        for segment in ("pre", "post")
        for rate in ("precision", "recall", "f1", "accuracy")
    },
}


def _build_specs() -> list[MetricSpec]:
    specs = [_spec(name, *declaration) for name, declaration in _DETECTION_SPECS.items()]
    for k in (1, 3):
        for suffix, where in (
            ("", "the whole trial"),
            ("_pre", "samples before the red light"),
            ("_post", "samples from the red light on"),
        ):
            specs.append(_spec(f"top{k}{suffix}", True, (0.0, 1.0), f"top-{k} accuracy on {where}, mean over trials"))
    for prefix, condition in (("m3", "system detection"), ("m4", "given detection")):
        for k in (1, 3):
            name = f"{prefix}_nrp_top{k}"
            specs.append(
                _spec(
                    name,
                    True,
                    (0.0, _INF),
                    f"{prefix.upper()}: 100 x agent post-novelty top-{k} / baseline pre-novelty top-{k}, mean over trials with novelty ({condition})",
                )
            )
            specs.append(
                MetricSpec(
                    name=f"{name}_n_excluded",
                    protocol="ond",
                    higher_is_better=None,
                    bounds=(0.0, _INF),
                    description=f"trials with novelty left out of {name} (baseline pre-novelty top-{k} accuracy 0)",
                )
            )
    specs.append(
        _spec(
            "m5_opti_top1",
            True,
            (0.0, 1.0),
            "M5: agent post top-1 / (agent post top-1 + baseline post top-1), mean over trials with novelty; 0.5 = parity",
        )
    )
    specs.append(
        _spec(
            "m6_apti_top1",
            True,
            (0.0, _INF),
            "M6: agent top-1 / baseline top-1 on the last asymptotic_width samples, mean over trials with novelty",
        )
    )
    for name in ("m5_opti_top1", "m6_apti_top1"):
        specs.append(
            MetricSpec(
                name=f"{name}_n_excluded",
                protocol="ond",
                higher_is_better=None,
                bounds=(0.0, _INF),
                description=f"trials with novelty left out of {name} (undefined ratio)",
            )
        )
    specs += [
        _spec(
            "auroc_novel",
            True,
            (0.0, 1.0),
            "AUROC of p_class[:, 0] for novel samples over all samples (ties count one half)",
        ),
        _spec(
            "aupr_novel",
            True,
            (0.0, 1.0),
            "average precision of p_class[:, 0] for novel samples (sklearn average_precision_score)",
        ),
        _spec(
            "fpr_at_95tpr",
            False,
            (0.0, 1.0),
            "share of known samples scored at or above the threshold that catches 95% of novel samples",
        ),
        _spec(
            "oscr",
            True,
            (0.0, 1.0),
            "open-set classification rate (Dhamija et al. 2018) on the highest known-class score",
        ),
    ]
    for t in DETECTION_THRESHOLD_GRID:
        for name, (higher, bounds, description) in _DETECTION_SPECS.items():
            specs.append(_spec(f"{name}@{t:g}", higher, bounds, f"{description}; at threshold {t:g}"))
    return specs


SPECS: list[MetricSpec] = _build_specs()

#: per-step series reported by :func:`program_metrics` (name -> what a step is)
SERIES = {
    "top1_batch": "mini-batch index",
    "top3_batch": "mini-batch index",
    **{f"{name}_vs_threshold": "threshold x 1000" for name in DETECTION_METRIC_NAMES},
}
