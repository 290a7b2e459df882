"""The SAIL-ON program metrics of a test: :func:`program_metrics` (METRICS.md section 1)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from owl_eval.metrics.keys import MetricKey
from owl_eval.metrics.results import NA, MetricResults, Series
from owl_eval.metrics.validation import MetricInputError, check_option
from owl_eval.protocols.ond.metrics.blocks import (  # re-exported: the public building blocks
    _open_set_metrics_unchecked,
    _rank_unchecked,
)
from owl_eval.protocols.ond.metrics.detection import (
    DETECTION_METRIC_NAMES,
    GIVEN_REASON,
    WORLD_CHANGED_NAMES,
    _detection_metrics,
    _detection_table,
)
from owl_eval.protocols.ond.metrics.flat import FlatTrials, mean_over, ratio_or_nan
from owl_eval.protocols.ond.metrics.trial import CONDITIONS, DETECTION_THRESHOLD_GRID, NRP_WINDOWS, OndTrial


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
    p_class[:, 0] (per-sample ``unknown_score_*``); sail-on-client's ``m_ndp_*`` threshold p_world_changed with ``>``. ``asymptotic_width``: samples at the end of a trial used by M6 and by
    NRP when ``nrp_window="asymptotic"`` (``"post"``: from the red light on, as sail-on-client).
    ``condition``: ``"system"`` reports NRP as ``m3_nrp_*``, ``"given"`` as ``m4_nrp_*``; under ``"given"`` the
    agent is told the red light, so M1, M2, M2.1 and sail-on-client's ``m_ndp`` on p_world_changed
    (:data:`WORLD_CHANGED_NAMES`) are N/A.

    Values that are fixed by construction are N/A with the reason, never a number: precision, recall and F1
    of a segment without novel samples (``unknown_score_*_pre``), M5/M6 when the agent's ``p_class`` equals the
    baseline's on every trial, and the novelty-score metrics of a constant score (:mod:`owl_eval.protocols.ond.metrics.blocks`).
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

    flat = FlatTrials(trials)
    flat_baseline = None
    if baseline is not None:
        flat_baseline = FlatTrials(baseline, what="baseline")
        flat.check_aligned(flat_baseline)

    given = condition == "given"
    results = MetricResults()
    for name, value in _detection_metrics(flat, float(threshold)).items():
        results.set(name, NA(GIVEN_REASON) if given and name in WORLD_CHANGED_NAMES else value)

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
            acc = ratio_or_nan(flat.segment_sums(running[id(rank), k], lo, hi), hi - lo)
            accuracy[k, suffix] = acc
            results.set(f"top{k}{suffix}", mean_over(acc, hi > lo, f"no trial has {suffix[1:]}-novelty samples"))
        results.series[MetricKey(f"top{k}", axis="batch")] = _batch_series(flat, correct)

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
                not_measured = given and name in WORLD_CHANGED_NAMES
                point = MetricKey(name, threshold=float(t))
                results.set(point, NA(GIVEN_REASON) if not_measured else value)  # an N/A keeps its reason
        table = _detection_table(flat, grid, rows)
        steps = np.round(grid * 1000).astype(np.int64)
        for name in DETECTION_METRIC_NAMES:
            if not (given and name in WORLD_CHANGED_NAMES):
                results.series[MetricKey(name, axis="threshold")] = Series(steps, table[name])  # NaN where N/A
    return results


def _batch_series(flat: FlatTrials, correct: np.ndarray) -> Series:
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
        return ratio_or_nan(flat.segment_sums(running[key], lo, hi), hi - lo)

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
        nrp = 100.0 * ratio_or_nan(accuracy(rank, k, agent_window), accuracy(baseline_rank, k, pre))
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
        ratio_or_nan(agent_post, agent_post + baseline_post),
        "agent and baseline both have top-1 accuracy 0 after the red light",
    )
    report(
        "m6_apti_top1",
        ratio_or_nan(accuracy(rank, 1, asym), accuracy(baseline_rank, 1, asym)),
        f"baseline top-1 accuracy on the last {asymptotic_width} samples is 0",
    )
