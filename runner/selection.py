"""Selecting which metrics a run reports (``metrics.names`` in config)."""
from __future__ import annotations

from collections.abc import Sequence

from metrics.registry import base_name, specs
from metrics.results import MetricResults


def select(results: MetricResults, protocol: str, names: Sequence[str] | None) -> MetricResults:
    """Keep only the listed metrics (and their baseline/threshold/per-task variants); None keeps all.

    An unknown name is an error that lists the valid names of the protocol.
    """
    if names is None:
        return results
    valid = set(specs(protocol)) | {base_name(k) for k in (*results.values, *results.na, *results.series)}
    unknown = [n for n in names if n not in valid]
    if unknown:
        raise ValueError(f"metrics.names: unknown metric(s) {unknown} for protocol {protocol!r}; valid names: {sorted(valid)}")
    wanted = set(names)
    keep = lambda key: base_name(key) in wanted  # noqa: E731
    return MetricResults(
        values={k: v for k, v in results.values.items() if keep(k)},
        na={k: v for k, v in results.na.items() if keep(k)},
        series={k: v for k, v in results.series.items() if keep(k)},
    )
