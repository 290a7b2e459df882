"""A metric's values over detection thresholds as one table (logged with ``TrackedRun.log_tables``), instead of
one MLflow key per threshold (``m2_cdt_pct@0.3``) and a series whose "step" is the threshold x 1000."""

from __future__ import annotations

import numpy as np

from owl_eval.metrics.keys import MetricKey


class ThresholdSweeps:
    """Collects a metric's values over detection thresholds (keys with a ``threshold``: scalars and N/As; keys with
    ``axis="threshold"``: series with step = threshold x 1000) into one table per metric, grouped by the key's
    fields: columns threshold, value, na_reason."""

    def __init__(self):
        self._points: dict[MetricKey, dict[float, tuple[float | None, str]]] = {}

    def add_point(self, key: MetricKey, value: float | None, reason: str = "") -> bool:
        if key.threshold is None:
            return False
        swept = key.with_fields(threshold=None)
        self._points.setdefault(swept, {})[key.threshold] = (value, reason)  # a point beats the series' copy
        return True

    def add_series(self, key: MetricKey, series) -> bool:
        if key.axis != "threshold":
            return False
        points = self._points.setdefault(key.with_fields(axis=None), {})
        for step, value in zip(series.steps.tolist(), series.values.tolist()):
            finite = bool(np.isfinite(value))
            points.setdefault(round(step / 1000, 6), (value if finite else None, "" if finite else "not a number"))
        return True

    def tables(self) -> dict[MetricKey, dict[str, list]]:
        """The key of each sweep (its series over thresholds, ``axis="threshold"``; its MLflow table is
        ``tracking.mlflow_key``'s) -> columns (``mlflow.log_table`` data), thresholds ascending."""
        out: dict[MetricKey, dict[str, list]] = {}
        for swept, points in self._points.items():
            thresholds = sorted(points)
            out[swept.with_fields(axis="threshold")] = {
                "threshold": thresholds,
                "value": [points[t][0] for t in thresholds],
                "na_reason": [points[t][1] for t in thresholds],
            }
        return out
