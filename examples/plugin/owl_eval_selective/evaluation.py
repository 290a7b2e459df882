"""Selective scoring: every metric registered in :data:`~owl_eval_selective.specs.SELECTIVE` (AURC, E-AURC, the
selective risk at each configured coverage, the accuracy and the risk-coverage curve; declared and computed in
:mod:`owl_eval_selective.metrics`) of a record. A live run's record and a saved one (``owl-eval-evaluate
+source=record``) are scored alike."""

from __future__ import annotations

import numpy as np

from owl_eval.evaluation.base import Evaluation, Scored
from owl_eval.metrics.results import MetricResults, Series
from owl_eval_selective.metrics import risk_coverage_curve
from owl_eval_selective.options import SelectiveMetricOptions
from owl_eval_selective.specs import SELECTIVE, coverage_name


class SelectiveEvaluation(Evaluation):
    name = "selective"

    def score(self, record, options: SelectiveMetricOptions | None = None, *, figures: bool = True) -> Scored:
        options = options if options is not None else SelectiveMetricOptions()
        y_true, y_pred, confidence = record.y_true, record.y_pred, record.confidence
        n = int(len(y_true))
        out = MetricResults()
        out.set("num_test", n)
        inputs = {"y_true": y_true, "y_pred": y_pred, "confidence": confidence, "options": options}
        for _, values, _ in SELECTIVE.compute(inputs):
            for name, value in values.items():
                if isinstance(value, Series):
                    out.series[name] = value
                else:
                    out.set(name, value)
        if not figures:
            return Scored(out)
        coverage, risk, _ = risk_coverage_curve(y_true, y_pred, confidence, ties=options.ties)
        errors = int(np.sum(np.asarray(y_pred) != np.asarray(y_true)))
        k = np.arange(1, n + 1)
        return Scored(
            out,
            {
                "coverage": coverage,
                "risk": risk,
                "oracle_coverage": k / n,
                "oracle_risk": np.maximum(k - (n - errors), 0) / k,  # every correct sample ranked above every error
                "marked": {coverage_name(c): float(c) for c in options.coverages},
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
