"""The registered trajectory metrics (:data:`TRAJECTORY`): the chunked table's entries
(:func:`~owl_eval.protocols.trajectory.metrics.table.table_metric`) and the class metrics
(:mod:`~owl_eval.protocols.trajectory.metrics.classification`), in that order."""

from __future__ import annotations

from owl_eval.metrics.declare import MetricSet

TRAJECTORY = MetricSet(
    "trajectory",
    order=("owl_eval.protocols.trajectory.metrics.table", "owl_eval.protocols.trajectory.metrics.classification"),
)
