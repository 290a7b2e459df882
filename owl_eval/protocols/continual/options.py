"""The continual ``metrics`` node, typed: only the selection (the continual metrics have no settings)."""

from __future__ import annotations

from dataclasses import dataclass

from owl_eval.evaluation.options import MetricOptions, checked, metric_names


@dataclass(frozen=True)
class ContinualMetricOptions(MetricOptions):
    """``owl_eval/protocols/continual/conf/metrics/continual.yaml``: only the selection (the continual metrics have no settings)."""

    protocol = "continual"
    names: list[str] | None = checked(None, metric_names("continual"))
