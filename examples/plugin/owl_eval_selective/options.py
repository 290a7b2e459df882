"""The selective ``metrics`` node, typed: the coverages the selective risk is reported at and the conventions of
:mod:`owl_eval_selective.metrics`. owl-eval puts it in Hydra's ConfigStore as ``metrics=selective`` (from the
descriptor's ``options``), its defaults written here only."""

from __future__ import annotations

import re
from dataclasses import dataclass

from owl_eval.errors import ConfigError
from owl_eval.evaluation.options import MetricOptions, checked, choice, metric_names
from owl_eval.typed import as_float
from owl_eval_selective.specs import DEFAULT_COVERAGES, coverage_name, coverage_percent

COVERAGE_NAME = re.compile(r"^risk_at_[0-9]+_coverage$")


def _coverages(value, key) -> list[float]:
    """A non-empty list of distinct whole percentages in (0, 1] (0.8, 0.95, 1.0): each is reported under
    ``risk_at_<percent>_coverage``, so 0.975 would have no name of its own."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise ConfigError(f"{key}: expected a list of coverages in (0, 1] (e.g. [0.8, 0.9, 0.95]), got {value!r}")
    if not value:
        raise ConfigError(f"{key}: expected at least one coverage in (0, 1], got []")
    out: list[float] = []
    for i, item in enumerate(value):
        c = as_float(item, f"{key}[{i}]", minimum=0.0, maximum=1.0, open_minimum=True)
        if abs(c * 100 - coverage_percent(c)) > 1e-9:
            raise ConfigError(
                f"{key}[{i}]: expected a whole percentage in (0, 1] (0.8, 0.95, 0.99, 1.0: the risk is reported as "
                f"risk_at_<percent>_coverage), got {item!r}"
            )
        if any(coverage_percent(c) == coverage_percent(o) for o in out):
            raise ConfigError(f"{key}: {item!r} is listed twice ({coverage_name(c)})")
        out.append(c)
    return out


@dataclass(frozen=True)
class SelectiveMetricOptions(MetricOptions):
    """Selective-classification metrics (``metrics=selective``): AURC, E-AURC, the selective risk at each coverage,
    accuracy; the risk-coverage curve as a series (step = accepted test samples) under ``detail/risk_coverage``.
    See :mod:`owl_eval_selective.metrics` for what each choice means."""

    protocol = "selective"
    # whole percentages in (0, 1]: risk_at_80_coverage, risk_at_90_coverage, ...
    coverages: list[float] = checked(list(DEFAULT_COVERAGES), _coverages)
    # group: tied confidences accepted together | order: ties broken by sample order
    ties: str = checked("group", choice("group", "order"))
    # step: (1/n) sum_k E_k / k (Geifman et al.) | trapezoid (FD-Shifts)
    integration: str = checked("step", choice("step", "trapezoid"))
    # E-AURC's oracle AURC: empirical (exact on n samples) | closed_form (R + (1-R) ln(1-R))
    optimal: str = checked("empirical", choice("empirical", "closed_form"))
    names: list[str] | None = checked(None, metric_names("selective"))  # null = every metric; or the names to keep

    def __post_init__(self):
        """A selected ``risk_at_<k>_coverage`` is one of ``coverages`` (else it would silently be missing); runs
        after owl-eval's base class has checked and typed every field."""
        reported = {coverage_name(c) for c in self.coverages}
        for name in self.names or ():
            if COVERAGE_NAME.match(name) and name not in reported:
                raise ConfigError(
                    f"metrics.names: {name} is not reported with metrics.coverages={list(self.coverages)} "
                    f"(reported: {', '.join(sorted(reported))}); add its coverage to metrics.coverages"
                )
