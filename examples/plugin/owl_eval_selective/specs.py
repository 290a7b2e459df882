"""The selective protocol's set of registered metrics (:data:`SELECTIVE`) and the names it reports.

A metric is declared by a decorator on its function (``@SELECTIVE.metric``, :mod:`owl_eval.metrics.declare`), at
the end of :mod:`owl_eval_selective.metrics`, the module the descriptor names in ``metric_modules``; the scoring
(:mod:`owl_eval_selective.evaluation`) computes every registered one.

``risk_at_{k}_coverage`` is declared once as a template (a name holding ``{k}``, :func:`coverage_spec`): ``k`` is a
coverage of ``metrics.coverages`` in percent (0.8 -> ``risk_at_80_coverage``), so every configured coverage
resolves to this declaration.
"""

from __future__ import annotations

from owl_eval.metrics.declare import MetricSet
from owl_eval.metrics.keys import MetricKey
from owl_eval.metrics.results import MetricSpec

__all__ = ["COVERAGE_TEMPLATE", "DEFAULT_COVERAGES", "SELECTIVE", "SERIES", "coverage_name", "coverage_spec"]

PROTOCOL = "selective"
SELECTIVE = MetricSet(PROTOCOL)
DEFAULT_COVERAGES = (0.8, 0.9, 0.95)
COVERAGE_TEMPLATE = "risk_at_{k}_coverage"
SERIES = "risk_coverage"


def coverage_percent(coverage: float) -> int:
    """``0.8`` -> 80 (``metrics.coverages`` holds whole percentages only; see the options)."""
    return int(round(coverage * 100))


def coverage_name(coverage: float) -> MetricKey:
    """The key of the selective risk at ``coverage``, reported as ``risk_at_80_coverage``."""
    return MetricKey(COVERAGE_TEMPLATE, k=coverage_percent(coverage))


def coverage_spec(name: str = COVERAGE_TEMPLATE) -> MetricSpec:
    return MetricSpec(
        name,
        PROTOCOL,
        False,
        (0.0, 1.0),
        description="Selective risk (error rate among the accepted samples) when the most confident samples are "
        "accepted until the coverage reaches k percent (a tie block at the cut is accepted whole, metrics.ties=group).",
        latex=r"r_j = E_{k_j} / k_j,\ j = \min\{j : k_j / n \ge k/100\}",
    )
