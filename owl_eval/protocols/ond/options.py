"""The OND ``metrics`` node, typed: SAIL-ON program metric settings (METRICS.md section 1)."""

from __future__ import annotations

from dataclasses import dataclass

from owl_eval.evaluation.options import MetricOptions, checked, choice, metric_names, positive_int, unit_interval
from owl_eval.typed import as_bool


@dataclass(frozen=True)
class OndMetricOptions(MetricOptions):
    """The ``metrics`` node of ``+experiment=ond_*`` (``metrics=ond``): SAIL-ON program metrics (METRICS.md section 1)."""

    protocol = "ond"
    threshold: float = checked(0.5, unit_interval)  # detection threshold on P(world changed) and on p_class[:, 0]
    asymptotic_width: int = checked(100, positive_int)  # m of M6 (and of nrp_window=asymptotic); domain dependent
    # post (sail-on-client) | asymptotic (the seed's prose)
    nrp_window: str = checked("post", choice("post", "asymptotic"))
    threshold_grid: bool = checked(True, as_bool)  # also report detection metrics at 0.175 ... 0.9 and plot them
    names: list[str] | None = checked(None, metric_names("ond"))  # null = every metric; or the names to keep
