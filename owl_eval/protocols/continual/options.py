"""The continual ``metrics`` node, typed: how many per-task accuracy series are logged, and the selection."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from owl_eval.evaluation.options import MetricOptions, checked, metric_names
from owl_eval.typed import as_int

#: ``metrics.max_task_series`` by default: every task of a sequence of up to 10 tasks has its series.
MAX_TASK_SERIES = 10


def _task_series_cap(value, key):
    """A whole number >= 0, or ``null``: no cap (one series per task, T² metric rows for T tasks)."""
    return None if value is None else as_int(value, key, minimum=0)


@dataclass(frozen=True)
class ContinualMetricOptions(MetricOptions):
    """The ``metrics`` node ``metrics=continual`` (METRICS.md section 2).

    ``max_task_series``: at most this many tasks get their accuracy over the sequence logged as a series
    ``task/<i>/accuracy`` (column i of the accuracy matrix, one point per completed task): every task when the
    sequence has no more tasks than that, else an even spread from the first task to the last. The metrics
    do not depend on it; the whole matrix is in the run's ``record/`` artifact, and a run that left tasks out
    has the tag ``task_series`` saying which are logged. ``null``: every task (T² metric rows for T tasks).
    """

    protocol = "continual"
    max_task_series: int | None = checked(MAX_TASK_SERIES, _task_series_cap)
    names: list[str] | None = checked(None, metric_names("continual"))  # null = every metric; or the names to keep


def task_series_tasks(num_tasks: int, cap: int | None) -> np.ndarray:
    """The tasks whose accuracy is logged as a series: all of them when ``cap`` is None or at least
    ``num_tasks``, else ``cap`` tasks spread evenly from the first to the last (rounded to the nearest task)."""
    if cap is None or cap >= num_tasks:
        return np.arange(num_tasks)
    if cap <= 1:
        return np.arange(cap)  # one series: the first task's
    # steps of (T - 1) / (cap - 1) > 1, rounded half up: distinct tasks, the first and the last among them
    return np.floor(np.linspace(0, num_tasks - 1, cap) + 0.5).astype(np.int64)
