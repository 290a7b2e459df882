"""The selective protocol's metric declarations (``SPECS``), read by owl-eval's metric registry.

``risk_at_{k}_coverage`` is declared once as a template (a name holding ``{k}``): ``k`` is a coverage of
``metrics.coverages`` in percent (0.8 -> ``risk_at_80_coverage``), so every configured coverage resolves to
this declaration. The formulas are in
:mod:`owl_eval_selective.metrics`.
"""

from __future__ import annotations

from owl_eval.metrics.keys import MetricKey
from owl_eval.metrics.results import MetricSpec

__all__ = ["COVERAGE_TEMPLATE", "DEFAULT_COVERAGES", "SERIES", "SPECS", "coverage_name", "coverage_spec"]

PROTOCOL = "selective"
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


SPECS: list[MetricSpec] = [
    MetricSpec(
        "aurc",
        PROTOCOL,
        False,
        (0.0, 1.0),
        description="Area under the risk-coverage curve (Geifman et al., ICLR 2019): mean over the samples of the "
        "selective risk at the threshold that first accepts the sample (metrics.integration=step).",
        latex=r"\sum_j \frac{k_j - k_{j-1}}{n} r_j",
    ),
    MetricSpec(
        "excess_aurc",
        PROTOCOL,
        False,
        (-1.0, 1.0),
        description="E-AURC: AURC minus the AURC of the oracle ranking (every correct prediction above every error) "
        "for the same errors; exact on the n samples (metrics.optimal=empirical), or the paper's closed form.",
        latex=r"\mathrm{AURC} - \mathrm{AURC}(\kappa^*)",
    ),
    MetricSpec(
        "accuracy",
        PROTOCOL,
        True,
        (0.0, 1.0),
        description="Accuracy at full coverage (every test sample accepted): 1 minus the full-coverage risk.",
        latex=r"1 - E_n / n",
    ),
    MetricSpec(
        SERIES,
        PROTOCOL,
        False,
        (0.0, 1.0),
        description="The risk-coverage curve: selective risk at each distinct confidence threshold, step = number of "
        "accepted test samples k_j (coverage k_j / num_test).",
        series=True,
    ),
    coverage_spec(),
]
