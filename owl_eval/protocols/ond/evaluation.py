"""OND scoring: SAIL-ON program metrics of the agent (with the baseline for M3-M6), the baseline's own
metrics under ``baseline.``, and the values the OND figures draw (METRICS.md section 1)."""

from __future__ import annotations

from typing import Any

import numpy as np

from owl_eval.evaluation.base import Evaluation, Scored
from owl_eval.metrics.keys import MetricKey
from owl_eval.metrics.results import MetricResults
from owl_eval.protocols.ond.metrics import (
    DETECTION_THRESHOLD_GRID,
    detection_vs_threshold,
    program_metrics,
    versus_baseline,
)
from owl_eval.protocols.ond.metrics.open_set import binary_curve_counts
from owl_eval.protocols.ond.options import OndMetricOptions

TIMELINE_TRIALS = 6  # trials drawn in the detection timeline


class OndEvaluation(Evaluation[OndMetricOptions]):
    name = "ond"

    def score(self, record, options: OndMetricOptions, *, figures: bool = True) -> Scored:
        results = score_ond(record, options)
        if not figures:
            return Scored(results)
        data: dict[str, Any] = {
            "threshold": options.threshold,
            "timeline": [
                {
                    "trial_id": t.trial_id,
                    "p_world_changed": t.p_world_changed,
                    "p_unknown": t.p_class[:, 0],
                    "red_light": t.red_light,
                }
                for t in record.trials[:TIMELINE_TRIALS]
            ],
            "detection_vs_threshold": detection_vs_threshold(record.trials, DETECTION_THRESHOLD_GRID),
            "roc": [],
        }
        for label, trials, key in (
            ("agent", record.trials, "auroc_novel"),
            ("baseline", record.baseline_trials, MetricKey("auroc_novel", agent="baseline")),
        ):
            points = roc_points(trials) if trials else None
            if points is not None:
                data["roc"].append({"label": label, "fpr": points[0], "tpr": points[1], "auroc_key": key})
        return Scored(results, data)

    def figures(self, scored: Scored, options: OndMetricOptions) -> dict:
        from owl_eval.protocols.ond.figures import ond_figures

        return ond_figures(scored.figure_data, scored.results)


def score_ond(record, options: OndMetricOptions) -> MetricResults:
    settings = {k: v for k, v in options.settings().items() if v is not None}
    results = program_metrics(record.trials, record.baseline_trials, condition=record.condition, **settings)
    if record.baseline_trials:
        base = program_metrics(record.baseline_trials, None, condition=record.condition, **settings)
        versus = versus_baseline()  # a metric against the baseline, of the baseline itself: meaningless
        own = lambda key: key.name not in versus  # noqa: E731
        results.update(
            MetricResults(
                values={k: v for k, v in base.values.items() if own(k)},
                series=base.series,
                na={k: v for k, v in base.na.items() if own(k)},
            ),
            agent="baseline",
        )
    return results


def roc_points(trials) -> tuple[np.ndarray, np.ndarray] | None:
    """(FPR, TPR) of ``p_class[:, 0]`` for novel samples, pooled over every sample of every trial (the
    samples ``auroc_novel`` is computed on), from (0, 0) to (1, 1); None without both novel and known."""
    novel = np.concatenate([t.gt_novel for t in trials]).astype(bool)
    score = np.concatenate([t.p_class[:, 0] for t in trials]).astype(np.float64)
    if novel.all() or not novel.any():
        return None
    tp, fp = binary_curve_counts(novel, score)[:2]
    return np.concatenate(([0.0], fp / fp[-1])), np.concatenate(([0.0], tp / tp[-1]))
