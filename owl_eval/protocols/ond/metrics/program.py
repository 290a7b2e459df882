"""The SAIL-ON program metrics of a test: :func:`program_metrics` computes every registered OND metric
(METRICS.md section 1); the metrics are declared next to their functions in
:mod:`~owl_eval.protocols.ond.metrics.detection`, :mod:`~owl_eval.protocols.ond.metrics.accuracy`,
:mod:`~owl_eval.protocols.ond.metrics.reaction` and :mod:`~owl_eval.protocols.ond.metrics.open_set`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from owl_eval.metrics.keys import MetricKey
from owl_eval.metrics.results import MetricResults, Series
from owl_eval.metrics.validation import MetricInputError, check_option
from owl_eval.protocols.ond.metrics.accuracy import TOP_K
from owl_eval.protocols.ond.metrics.declared import OND, ProgramOptions
from owl_eval.protocols.ond.metrics.detection import DETECTION_METRIC_NAMES, threshold_rows, vs_threshold
from owl_eval.protocols.ond.metrics.flat import FlatTrials
from owl_eval.protocols.ond.metrics.trial import CONDITIONS, DETECTION_THRESHOLD_GRID, NRP_WINDOWS, OndTrial

#: per-step series reported by :func:`program_metrics` (name -> what a step is)
SERIES = {
    **{MetricKey(f"top{k}", axis="batch"): "mini-batch index" for k in TOP_K},
    **{MetricKey(name, axis="threshold"): "threshold x 1000" for name in DETECTION_METRIC_NAMES},
}


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

    Every metric registered in :data:`~owl_eval.protocols.ond.metrics.declared.OND` is computed, in order, from
    ``flat`` (the trials), ``baseline`` and ``options`` (:class:`ProgramOptions`), whichever it needs; one whose
    declared N/A rule holds (no baseline, condition given, ...) is N/A with the rule's reason and not computed.
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

    options = ProgramOptions(float(threshold), asymptotic_width, nrp_window, condition, threshold_grid)
    results = MetricResults()
    for _, values, _ in OND.compute({"flat": flat, "baseline": flat_baseline, "options": options}):
        _store(results, values)

    if threshold_grid:
        grid = np.asarray(DETECTION_THRESHOLD_GRID)
        rows = threshold_rows(flat, flat_baseline, options, grid)
        for t, row in zip(grid, rows):
            for _, values, _ in row:
                for name, value in values.items():
                    results.set(MetricKey(name, threshold=float(t)), value)  # an N/A keeps its reason
        steps = np.round(grid * 1000).astype(np.int64)
        for name, table in vs_threshold(rows).items():
            results.series[MetricKey(name, axis="threshold")] = Series(steps, table)  # NaN where N/A
    return results


def _store(results: MetricResults, values: dict) -> None:
    for name, value in values.items():
        if isinstance(value, Series):
            results.series[name] = value
        else:
            results.set(name, value)


def versus_baseline() -> frozenset[str]:
    """The names of the metrics that compare the agent with a baseline (those that need one, M3-M6): a baseline
    scored on its own does not report them."""
    return frozenset(spec.name for entry in OND if "baseline" in entry.needs for spec in entry.specs)
