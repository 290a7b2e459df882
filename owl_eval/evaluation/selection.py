"""Selecting which metrics a run reports (``metrics.names`` in config).

A listed name keeps the metric of that name and every name made from it (``baseline.top1``, ``m2_cdt_pct@0.3``,
``task/<task>/saturation``, the series ``top1_batch`` is its own name). :func:`check_names` validates the
selection against the protocol's declarations alone, so it runs before any run (or result) exists.
"""

from __future__ import annotations

from collections.abc import Sequence

from owl_eval.errors import ConfigError
from owl_eval.evaluation.registry import base_name, spec_for, specs
from owl_eval.metrics.results import MetricResults

KEY = "metrics.names"


def check_names(protocol: str, names) -> list[str] | None:
    """``names`` as a list of declared metric names of ``protocol``, or None (= keep every metric).

    Anything else is one :class:`ConfigError` starting ``metrics.names:``: not a list (or null), an item that
    is not a string, an empty list, or a name the protocol does not declare (the message lists the valid
    names).
    """
    if names is None:
        return None
    if isinstance(names, (str, bytes)) or not isinstance(names, Sequence):
        raise ConfigError(f"{KEY}: expected a list of metric names or null, got {type(names).__name__} {names!r}")
    names = list(names)
    if not names:
        raise ConfigError(f"{KEY}: the list is empty, which would keep no metric; use null to keep every metric")
    for i, name in enumerate(names):
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{KEY}[{i}]: expected a metric name (a non-empty string), got {name!r}")
    try:
        declared = specs(protocol)
    except ConfigError as exc:
        raise ConfigError(f"{KEY}: {exc}") from None
    unknown = [n for n in names if spec_for(protocol, n) is None]
    if unknown:
        valid = sorted({base_name(n, protocol) for n in declared})
        raise ConfigError(f"{KEY}: unknown metric(s) {unknown} for protocol {protocol!r}; valid names: {valid}")
    return names


def select(results: MetricResults, protocol: str, names: Sequence[str] | None) -> MetricResults:
    """Keep only the listed metrics (and their baseline/threshold/per-task variants); None keeps all.

    ``names`` is checked by :func:`check_names` first (an unknown name lists the valid names).
    """
    names = check_names(protocol, names)
    if names is None:
        return results
    wanted = set(names)
    keep = lambda key: key in wanted or base_name(key, protocol) in wanted  # noqa: E731
    return MetricResults(
        values={k: v for k, v in results.values.items() if keep(k)},
        na={k: v for k, v in results.na.items() if keep(k)},
        series={k: v for k, v in results.series.items() if keep(k)},
    )
