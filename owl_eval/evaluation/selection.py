"""Selecting which metrics a run reports (``metrics.names`` in config).

A listed name keeps the metric of that name and every key made from it (``baseline.top1``, ``m2_cdt_pct@0.3``,
``task/<task>/saturation``; the series ``top1_batch`` is its own name): :func:`select` compares each listed name
with the reported name of every result key and of its :func:`selection_base`, so no key is read back from text.

:func:`check_names` validates the selection against the protocol's declarations alone, so it runs before any run
(or result) exists: a listed name must be the reported name of a declared metric, as it is or with the qualifiers
the protocol's descriptor says its keys carry (``key_qualifiers``), a template's name for a whole K, or a timing
(``time/<phase>``). The listed text is compared with those renderings; where a part is open (a task's name, a K,
a phase) it is compared with the text around it (:func:`owl_eval.metrics.keys.rendered_around`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from owl_eval.errors import ConfigError
from owl_eval.evaluation.registry import declared_key, specs, templates
from owl_eval.metrics.keys import QUALIFIERS, MetricKey, rendered_around
from owl_eval.metrics.results import MetricResults
from owl_eval.protocols import get_protocol

KEY = "metrics.names"


def selection_base(key: MetricKey) -> MetricKey:
    """The key a listed name keeps ``key`` by: without its agent, task, threshold and task axis
    (``baseline.m2_cdt_pct@0.3`` -> ``m2_cdt_pct``, ``by_task/forgetting`` -> ``forgetting``); a per-batch or
    per-threshold series keeps its axis (``baseline.top1_batch`` -> ``top1_batch``), a timing stays whole."""
    return key.with_fields(agent="", task=None, threshold=None, axis=None if key.axis == "task" else key.axis)


def _variants(protocol: str) -> list[dict]:
    """The fields the protocol's qualifiers give a declared name, alone or after the agent's: [{}] first."""
    chosen = [QUALIFIERS[q] for q in get_protocol(protocol).key_qualifiers]
    agents = [q for q in chosen if "agent" in q]
    others = [q for q in chosen if "agent" not in q]
    return [{}, *others, *agents, *({**a, **o} for a in agents for o in others)]


@functools.cache
def _listable(protocol: str) -> tuple[frozenset[str], tuple[tuple[str, str, str], ...]]:
    """What a ``metrics.names`` entry of ``protocol`` may be: reported names (exact), and (before, after, open part)
    of the names with an open part."""
    exact: set[str] = set()
    around: set[tuple[str, str, str]] = {(*rendered_around("name", "", timing=True), "name")}
    bases = [declared_key(s) for s in specs(protocol).values()]
    for fields in _variants(protocol):
        axis = fields.get("axis")
        for key in bases:
            if axis is not None and key.threshold is not None:
                continue  # a point of a threshold sweep has no series axis
            if "task" in fields:
                qualified = {f: v for f, v in key.fields().items() if f != "name"} | fields
                around.add((*rendered_around("task", key.name, **qualified), "task"))
            else:
                exact.add(key.with_fields(**fields))
        for template in templates(protocol):
            if "task" not in fields:
                around.add((*rendered_around("k", template, **fields), "k"))
    return frozenset(exact), tuple(sorted(around))


def _fills(part: str, text: str) -> bool:
    """Whether ``text`` can stand in the open part: a task's name (no '/'), a whole K >= 1, a phase (anything)."""
    if not text:
        return False
    if part == "k":
        return text.isascii() and text.isdigit() and text[0] != "0"
    return "/" not in text if part == "task" else True


def declares(protocol: str, name: str) -> bool:
    """Whether ``name`` (a string a user wrote) is the reported name of a metric ``protocol`` declares (see the module
    docstring)."""
    exact, around = _listable(protocol)
    if name in exact:
        return True
    return any(
        len(name) > len(before) + len(after)
        and name.startswith(before)
        and name.endswith(after)
        and _fills(part, name[len(before) : len(name) - len(after)])
        for before, after, part in around
    )


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
    unknown = [n for n in names if not declares(protocol, n)]
    if unknown:
        valid = sorted({str(selection_base(declared_key(s))) for s in declared.values()})
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
    keep = lambda key: key in wanted or selection_base(key) in wanted  # noqa: E731  (a key equals its reported name)
    return MetricResults(
        values={k: v for k, v in results.values.items() if keep(k)},
        na={k: v for k, v in results.na.items() if keep(k)},
        series={k: v for k, v in results.series.items() if keep(k)},
    )
