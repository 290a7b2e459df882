"""Selective scoring: AURC, E-AURC, the selective risk at each configured coverage, the accuracy and the
risk-coverage curve of a record (formulas: :mod:`owl_eval_selective.metrics`). A live run's record and a saved
one (``owl-eval-evaluate +source=record``) are scored alike."""

from __future__ import annotations

import numpy as np

from owl_eval.evaluation.base import Evaluation, Scored
from owl_eval.metrics.results import MetricResults, Series
from owl_eval_selective.metrics import aurc, excess_aurc, risk_at_coverages, risk_coverage_curve
from owl_eval_selective.options import SelectiveMetricOptions
from owl_eval_selective.specs import SERIES, coverage_name


class SelectiveEvaluation(Evaluation):
    name = "selective"

    def score(self, record, options: SelectiveMetricOptions | None = None, *, figures: bool = True) -> Scored:
        options = options if options is not None else SelectiveMetricOptions()
        y_true, y_pred, confidence = record.y_true, record.y_pred, record.confidence
        n = int(len(y_true))
        out = MetricResults()
        out.set("num_test", n)
        out.set("accuracy", float(np.mean(np.asarray(y_pred) == np.asarray(y_true))))
        out.set("aurc", aurc(y_true, y_pred, confidence, ties=options.ties, integration=options.integration))
        out.set(
            "excess_aurc",
            excess_aurc(
                y_true,
                y_pred,
                confidence,
                ties=options.ties,
                integration=options.integration,
                optimal=options.optimal,
            ),
        )
        risks = risk_at_coverages(y_true, y_pred, confidence, coverages=options.coverages, ties=options.ties)
        for coverage, risk in risks.items():
            out.set(coverage_name(coverage), risk)
        coverage, risk, _ = risk_coverage_curve(y_true, y_pred, confidence, ties=options.ties)
        accepted = np.rint(coverage * n).astype(np.int64)  # k_j: the curve's coverages are k_j / n
        out.series[SERIES] = Series(accepted, risk)
        if not figures:
            return Scored(out)
        errors = int(np.sum(np.asarray(y_pred) != np.asarray(y_true)))
        k = np.arange(1, n + 1)
        return Scored(
            out,
            {
                "coverage": coverage,
                "risk": risk,
                "oracle_coverage": k / n,
                "oracle_risk": np.maximum(k - (n - errors), 0) / k,  # every correct sample ranked above every error
                "marked": {coverage_name(c): c for c in risks},
                "title": f"Risk-coverage curve ({record.domain}, {n} test samples)"
                if record.domain
                else f"Risk-coverage curve ({n} test samples)",
            },
        )

    def figures(self, scored: Scored, options: SelectiveMetricOptions) -> dict:
        if not scored.figure_data:
            return {}
        from owl_eval_selective.figures import selective_figures

        return selective_figures(scored.figure_data, scored.results)
