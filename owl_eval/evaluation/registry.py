"""Every declared metric, by protocol, and the declaration behind a :class:`~owl_eval.metrics.keys.MetricKey`.

A metric module declares its names in a ``SPECS`` list; a protocol's descriptor (:mod:`owl_eval.protocols`)
names those modules, its headline and the names it reports besides them (``reported``). A protocol reports
:class:`~owl_eval.metrics.keys.MetricKey` values: a declared name and its qualifiers, as fields. The declaration
of a key is found from its fields alone (:func:`spec_for`), never from text::

    MetricKey("top1")                           the declaration of top1
    MetricKey("m2_cdt_pct", threshold=0.3)      the declaration of that point (OND declares each point of its grid)
    MetricKey("top1", agent="baseline")         top1's: the baseline agent's value of the same metric
    MetricKey("top1", axis="batch")             top1's, as a series over mini-batches (over thresholds, tasks alike)
    MetricKey("accuracy", task="3")             accuracy's, on task 3
    MetricKey("min_ade_{k}_marginal", k=5)      the template's, for K = 5 (:meth:`MetricSpec.for_k`)
    MetricKey("total_s", timing=True)           a timing: seconds, no better direction (every protocol)

A key whose name the protocol does not declare has no declaration (None), never a neighbour's.

The MLflow key of a metric key is made in one function, ``owl_eval.tracking.keys.mlflow_key`` (the headline
under plain keys, the rest ``detail/``, ``baseline/``, ``time/``, threshold sweeps as tables ``threshold/``); a
run's ``metric_keys.json`` maps each of its MLflow keys back to these fields and declarations, so nothing reads
an MLflow key's text either.
"""

from __future__ import annotations

import functools
import importlib
import math

from owl_eval.metrics.keys import MetricKey
from owl_eval.metrics.results import MetricSpec
from owl_eval.protocols import get_protocol

_INF = math.inf

# N/A reasons of values fixed by construction (metrics.ond: unknown_score_*_pre, M5/M6 of the baseline itself, detection
# under the given condition): not measurements, so not logged as metrics or tags (metrics_na.json keeps them).
_BY_DESIGN = ("by construction", "detection is not measured")


def headline_rank(protocol: str, key: MetricKey | str) -> int | None:
    """The position of ``key``'s name in the headline of the protocol's descriptor when ``key`` is the metric itself
    (no agent, task, threshold, series axis; a template's K is the template's), else None."""
    headline = get_protocol(protocol).headline
    key = MetricKey.of(key)
    return headline.index(key.name) if key.plain and key.name in headline else None


def is_headline(protocol: str, key: MetricKey | str) -> bool:
    return headline_rank(protocol, key) is not None


def constant_by_design(reason: str) -> bool:
    """Whether an N/A reason says the value is fixed by construction (not a measurement)."""
    return any(marker in reason for marker in _BY_DESIGN)


def _time_spec(protocol: str) -> MetricSpec:
    return MetricSpec("time", protocol, None, (0.0, _INF), description="wall-clock seconds of one phase of the job")


@functools.cache
def _declared(protocol: str) -> tuple[MetricSpec, ...]:
    """Every declaration of one protocol: its metric modules' ``SPECS`` and the names its descriptor says are
    ``reported``, templates (``{k}`` in the name) included."""
    descriptor = get_protocol(protocol)
    out: list[MetricSpec] = []
    for module_name in descriptor.metric_modules:
        out += getattr(importlib.import_module(module_name), "SPECS", [])
    return (*out, *descriptor.reported)


@functools.cache
def specs(protocol: str) -> dict[str, MetricSpec]:
    """The metric declarations of one protocol by name, templates left out (see :func:`templates`)."""
    return {s.name: s for s in _declared(protocol) if not s.is_template}


@functools.cache
def templates(protocol: str) -> dict[str, MetricSpec]:
    """The templated declarations of one protocol by template name (``min_ade_{k}_marginal``)."""
    return {s.name: s for s in _declared(protocol) if s.is_template}


def forget() -> None:
    """Drop the cached declarations: for code that registers (or removes) a metric after they were first read, e.g.
    a test adding one inside ``MetricSet.scoped()``."""
    for cached in (_declared, specs, templates):
        cached.cache_clear()


def declared_key(spec: MetricSpec) -> MetricKey:
    """The key a declaration declares: its name (a declared point of a threshold sweep is a key with its threshold)."""
    return spec.name if isinstance(spec.name, MetricKey) else MetricKey(spec.name)


def spec_for(protocol: str, key: MetricKey | str) -> MetricSpec | None:
    """The declaration behind ``key`` (see the module docstring), or None when the protocol declares no such name.

    Found by fields: a timing is a timing; a template's K is the template's declaration for that K; anything else is
    the declaration named like the key without its agent, task and series axis (its threshold kept: a point of a
    sweep is declared as itself)."""
    get_protocol(protocol)  # an unknown protocol is one error listing the installed ones
    key = MetricKey.of(key)  # a plain name is its key; qualified text is refused, never parsed
    if key.timing:
        return _time_spec(protocol)
    if key.k is not None:
        template = templates(protocol).get(key.name)
        return None if template is None else template.for_k(key.k)
    return specs(protocol).get(MetricKey(key.name, threshold=key.threshold))


def is_series(protocol: str, key: MetricKey | str) -> bool:
    """Whether ``key`` holds one value per step (a series axis, or a name declared as a series): its latest value
    is not a summary of the run."""
    key = MetricKey.of(key)
    spec = spec_for(protocol, key)
    return key.axis is not None or (spec is not None and spec.series)
