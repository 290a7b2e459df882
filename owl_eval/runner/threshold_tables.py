"""A metric's values over detection thresholds as one table (logged with ``TrackedRun.log_tables``), instead of
one MLflow key per threshold (``m2_cdt_pct@0.3``) and a series whose "step" is the threshold x 1000."""

from __future__ import annotations

import numpy as np

from owl_eval.evaluation.registry import (
    THRESHOLD_SERIES_SUFFIX,
    threshold_point,
    threshold_table_name,
)


class ThresholdSweeps:
    """Collects a metric's values over detection thresholds (``name@t`` scalars and N/As, ``name_vs_threshold``
    series with step = threshold x 1000) into one table per metric: columns threshold, value, na_reason."""

    def __init__(self):
        self._points: dict[str, dict[float, tuple[float | None, str]]] = {}

    def add_point(self, name: str, value: float | None, reason: str = "") -> bool:
        found = threshold_point(name)
        if found is None:
            return False
        base, threshold = found
        self._points.setdefault(base, {})[threshold] = (value, reason)  # a point beats the series' copy
        return True

    def add_series(self, name: str, series) -> bool:
        if not name.endswith(THRESHOLD_SERIES_SUFFIX):
            return False
        points = self._points.setdefault(name[: -len(THRESHOLD_SERIES_SUFFIX)], {})
        for step, value in zip(series.steps.tolist(), series.values.tolist()):
            finite = bool(np.isfinite(value))
            points.setdefault(round(step / 1000, 6), (value if finite else None, "" if finite else "not a number"))
        return True

    def tables(self) -> dict[str, dict[str, list]]:
        """``threshold/<name>`` -> columns (``mlflow.log_table`` data), thresholds ascending."""
        out: dict[str, dict[str, list]] = {}
        for base, points in self._points.items():
            thresholds = sorted(points)
            out[threshold_table_name(base)] = {
                "threshold": thresholds,
                "value": [points[t][0] for t in thresholds],
                "na_reason": [points[t][1] for t in thresholds],
            }
        return out
