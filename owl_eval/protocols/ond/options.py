"""The OND ``metrics`` node, typed: SAIL-ON program metric settings (METRICS.md section 1)."""

from __future__ import annotations

from dataclasses import dataclass

from owl_eval.evaluation.options import MetricOptions, checked, choice, metric_names, positive_int, unit_interval
from owl_eval.typed import as_bool


@dataclass(frozen=True)
class OndMetricOptions(MetricOptions):
    """``owl_eval/protocols/ond/conf/metrics/ond.yaml``: SAIL-ON program metrics (METRICS.md section 1)."""

    protocol = "ond"
    threshold: float = checked(0.5, unit_interval)
    asymptotic_width: int = checked(100, positive_int)
    nrp_window: str = checked("post", choice("post", "asymptotic"))
    threshold_grid: bool = checked(True, as_bool)
    names: list[str] | None = checked(None, metric_names("ond"))
