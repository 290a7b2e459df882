"""Continual scoring: Renate's (and Avalanche-style) metrics of an accuracy matrix (METRICS.md section 2).

A live run's record, a saved record and a matrix produced elsewhere are scored alike; a matrix whose init
accuracies ``b`` or test sizes ``n`` are unknown (``record.has_init`` / ``record.has_sizes`` false, set by
:mod:`owl_eval.protocols.continual.sources.accuracy_matrix`) has the metrics that need them N/A. A partial record (``k``
completed rows) is scored on ``A[:k, :k]`` (see :mod:`owl_eval.protocols.continual.driver`).

Large sequences: the metrics are vectorised over the matrix (no per-cell Python object), and column ``i`` of ``A``
is a series ``task/<i>/accuracy`` for at most ``metrics.max_task_series`` tasks (:func:`task_series_tasks`), so a
run of T tasks logs O(T) metric rows, not T²; the whole matrix is in the record (``continual_record.npz``), and
the tag ``task_series`` (:meth:`ContinualEvaluation.run_tags`) names the tasks that have a series.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from owl_eval.evaluation.base import Evaluation, Scored
from owl_eval.metrics.keys import MetricKey
from owl_eval.metrics.results import NA, MetricResults, Series
from owl_eval.protocols.continual.metrics import SPECS, continual_metrics
from owl_eval.protocols.continual.options import MAX_TASK_SERIES, ContinualMetricOptions, task_series_tasks

TASK_SERIES_TAG = "task_series"
CURVE_TASKS = 10  # the task accuracy figure draws at most this many tasks (one tab10 colour each), evenly spread
TAG_LISTS_TASKS = 100  # the tag lists the tasks with a series up to this many, else gives the rule


class ContinualEvaluation(Evaluation[ContinualMetricOptions]):
    name = "continual"

    def score(self, record, options: ContinualMetricOptions | None = None, *, figures: bool = True) -> Scored:
        cap = MAX_TASK_SERIES if options is None else options.max_task_series
        results = score_continual(record, max_task_series=cap)
        if not figures or record.num_completed == 0:
            return Scored(results)
        title = f"Accuracy matrix ({record.domain}, {record.scenario})" if record.domain else "Accuracy matrix"
        return Scored(
            results,
            {
                "accuracy": np.asarray(record.accuracy, dtype=np.float64),
                "init_accuracy": np.asarray(record.init_accuracy, dtype=np.float64),
                "task_classes": record.task_classes,
                "curve_tasks": task_series_tasks(record.num_tasks, CURVE_TASKS),
                "title": title,
            },
        )

    def figures(self, scored: Scored, options: ContinualMetricOptions) -> dict:
        if not scored.figure_data:
            return {}
        from owl_eval.protocols.continual.figures import continual_figures

        return continual_figures(scored.figure_data, scored.results)

    def run_tags(
        self,
        record,
        options: ContinualMetricOptions,
        *,
        record_logged: bool = True,
        logged_as: Callable[[MetricKey], str] = str,
    ) -> dict[str, str]:
        """``task_series`` when ``metrics.max_task_series`` left tasks without a ``task/<i>/accuracy`` series:
        which have one, and where every task's accuracy is."""
        T = record.num_tasks
        shown = task_series_tasks(T, options.max_task_series)
        if len(shown) == T:
            return {}
        listed = (
            ", ".join(str(i) for i in shown.tolist())
            if len(shown) <= TAG_LISTS_TASKS
            else f"tasks floor(m * {T - 1} / {len(shown) - 1} + 0.5) for m = 0..{len(shown) - 1}"
        )
        key = logged_as(MetricKey("accuracy", task=0)).replace("/0/", "/<i>/")  # detail/task/<i>/accuracy
        where = (
            "record/continual_record.npz, array 'accuracy' (row j: after learning task j)"
            if record_logged
            else "not logged (tracking.log_record=false)"
        )
        return {
            TASK_SERIES_TAG: f"{len(shown)} of {T} tasks have a series {key} "
            f"(metrics.max_task_series={options.max_task_series}, an even spread): {listed or 'none'}; "
            f"the whole accuracy matrix: {where}"
        }


def score_continual(record, *, max_task_series: int | None = None) -> MetricResults:
    """Every continual metric of the record's completed rows, and the accuracy series of the tasks
    :func:`task_series_tasks` picks (every task with ``max_task_series`` None)."""
    k = record.num_completed
    out = MetricResults()
    out.set("tasks_completed", k)
    has_init, has_sizes = getattr(record, "has_init", True), getattr(record, "has_sizes", True)
    if k == 0 and has_init and has_sizes:
        for spec in SPECS:
            out.set(spec.name, NA("no task was learned and evaluated before the run stopped"))
        return out
    A = np.asarray(record.accuracy, dtype=np.float64)
    metrics = continual_metrics(
        A[:k, :k],
        init_accuracy=record.init_accuracy[:k] if has_init else None,
        num_instances=record.num_instances[:k] if has_sizes else None,
    )
    out.update(MetricResults(values=metrics.values, na=metrics.na))
    for name, series in metrics.series.items():
        out.series[name.with_fields(axis="task")] = series  # by_task/<name>
    steps = np.arange(k)
    for i in task_series_tasks(record.num_tasks, max_task_series).tolist():
        out.series[MetricKey("accuracy", task=i)] = Series(steps, A[:k, i])
    return out
