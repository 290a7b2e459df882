"""Continual scoring: Renate's (and Avalanche-style) metrics of an accuracy matrix (METRICS.md section 2).

A live run's record, a saved record and a matrix produced elsewhere are scored alike; a matrix whose init
accuracies ``b`` or test sizes ``n`` are unknown (``record.has_init`` / ``record.has_sizes`` false, set by
:mod:`owl_eval.protocols.continual.sources.accuracy_matrix`) has the metrics that need them N/A. A partial record (``k``
completed rows) is scored on ``A[:k, :k]`` (see :mod:`owl_eval.protocols.continual.driver`).
"""

from __future__ import annotations

import numpy as np

from owl_eval.evaluation.base import Evaluation, Scored
from owl_eval.metrics.results import NA, MetricResults, Series
from owl_eval.protocols.continual.metrics import SPECS, continual_metrics
from owl_eval.protocols.continual.options import ContinualMetricOptions

SERIES_PREFIX = "by_task/"


class ContinualEvaluation(Evaluation[ContinualMetricOptions]):
    name = "continual"

    def score(self, record, options: ContinualMetricOptions | None = None, *, figures: bool = True) -> Scored:
        results = score_continual(record)
        if not figures or record.num_completed == 0:
            return Scored(results)
        title = f"Accuracy matrix ({record.domain}, {record.scenario})" if record.domain else "Accuracy matrix"
        return Scored(
            results,
            {
                "accuracy": np.asarray(record.accuracy, dtype=np.float64),
                "init_accuracy": np.asarray(record.init_accuracy, dtype=np.float64),
                "task_classes": record.task_classes,
                "title": title,
            },
        )

    def figures(self, scored: Scored, options: ContinualMetricOptions) -> dict:
        if not scored.figure_data:
            return {}
        from owl_eval.protocols.continual.figures import continual_figures

        return continual_figures(scored.figure_data, scored.results)


def score_continual(record) -> MetricResults:
    """Every continual metric of the record's completed rows."""
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
        out.series[SERIES_PREFIX + name] = series
    steps = np.arange(k)
    for i in range(record.num_tasks):
        out.series[f"task/{i}/accuracy"] = Series(steps, A[:, i])
    return out
