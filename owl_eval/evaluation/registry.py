"""Every declared metric, by protocol, and the exact way back from a reported name or an MLflow key.

A metric module declares its names in a ``SPECS`` list; a protocol's descriptor (:mod:`owl_eval.protocols`)
names those modules, its key prefixes and series. A protocol reports those names and names made from
them; each form below maps to exactly one declaration (``spec_for``), and so does its MLflow key
(``spec_for_key``; :func:`metric_key` turns ``@`` into ``_at_``)::

    top1, fpr_at_95tpr                      the declaration of that name
    m2_cdt_pct@0.3                          declared per threshold of the grid (owl_eval.protocols.ond.metrics.SPECS)
    baseline.top1                           ond: the baseline agent's own value
    top1_batch, m2_cdt_pct_vs_threshold     ond: per-batch and per-threshold series of top1, m2_cdt_pct
    by_task/forgetting, task/3/accuracy     continual: series over tasks, per-task accuracy
    task/<task>/saturation                  lifelong_rl: per-task values
    min_ade_5_marginal                      trajectory: ``*_{k}_*`` names for every K of ``k_values``
    time/total_s, ste/reused, num_scenes    timings (every protocol), and the counts a descriptor says are ``reported``

Nothing else resolves: an unknown name is None, never a neighbour's declaration.

MLflow keys (:func:`logged_key`): the headline metrics of the protocol's descriptor under their plain names, the baseline
agent's under ``baseline/<name>``, timings under ``time/``, everything else under ``detail/<name>``; threshold
sweeps (``name@t``, ``name_vs_threshold``) are logged tables ``threshold/<name>`` (columns threshold, value),
never metric steps. ``spec_for_key`` resolves every one of these forms (and the older unprefixed keys).
"""

from __future__ import annotations

import functools
import importlib
import math
import re

from owl_eval.metrics.results import MetricSpec
from owl_eval.protocols import get_protocol

_INF = math.inf

# owl_eval.runner.tracking logs a series under ``<name>_by_step`` when a scalar already holds ``<name>``.
SERIES_KEY_SUFFIX = "_by_step"
DETAIL_PREFIX = "detail/"
BASELINE_PREFIX = "baseline/"
THRESHOLD_PREFIX = "threshold/"
THRESHOLD_SERIES_SUFFIX = "_vs_threshold"
# N/A reasons of values fixed by construction (metrics.ond: unknown_score_*_pre, M5/M6 of the baseline itself, detection
# under the given condition): not measurements, so not logged as metrics or tags (metrics_na.json keeps them).
_BY_DESIGN = ("by construction", "detection is not measured")


def headline_rank(protocol: str, name: str) -> int | None:
    """The position of ``name`` (a reported name, no prefix) in the headline of the protocol's descriptor, or None."""
    for i, declared in enumerate(get_protocol(protocol).headline):
        if declared == name:
            return i
        if "{k}" in declared:
            head, tail = declared.split("{k}", 1)
            middle = name[len(head) : len(name) - len(tail)] if name.startswith(head) and name.endswith(tail) else ""
            if middle.isdigit() and len(name) > len(head) + len(tail):
                return i
    return None


def is_headline(protocol: str, name: str) -> bool:
    return headline_rank(protocol, name) is not None


def constant_by_design(reason: str) -> bool:
    """Whether an N/A reason says the value is fixed by construction (not a measurement)."""
    return any(marker in reason for marker in _BY_DESIGN)


def threshold_point(name: str) -> tuple[str, float] | None:
    """``m2_cdt_pct@0.3`` -> ("m2_cdt_pct", 0.3); ``baseline.x@0.5`` -> ("baseline.x", 0.5); else None."""
    head, sep, tail = name.rpartition("@")
    if not sep or not head:
        return None
    try:
        return head, float(tail)
    except ValueError:
        return None


def logged_key(protocol: str, name: str) -> str:
    """The MLflow key a reported scalar or series is logged under (see the module docstring):
    ``top1`` -> ``top1``, ``top1_pre`` -> ``detail/top1_pre``, ``baseline.top1`` -> ``baseline/top1``,
    ``task/3/accuracy`` -> ``detail/task/3/accuracy``, ``time/total_s`` unchanged."""
    if name.startswith(TIME_PREFIX):
        return metric_key(name)
    if name.startswith("baseline."):
        return BASELINE_PREFIX + metric_key(name[len("baseline.") :])
    if is_headline(protocol, name):
        return metric_key(name)
    return DETAIL_PREFIX + metric_key(name)


def threshold_table_name(name: str) -> str:
    """The logged table of a threshold sweep of ``name`` (``unknown_score_f1_post`` or ``baseline.unknown_score_f1_post``):
    ``threshold/unknown_score_f1_post``, ``threshold/baseline/unknown_score_f1_post``."""
    if name.startswith("baseline."):
        return THRESHOLD_PREFIX + BASELINE_PREFIX + metric_key(name[len("baseline.") :])
    return THRESHOLD_PREFIX + metric_key(name)


# ``time/<anything>``: wall-clock seconds of a phase of the job, for every protocol.
TIME_PREFIX = "time/"


def _time_spec(protocol: str) -> MetricSpec:
    return MetricSpec("time", protocol, None, (0.0, _INF), description="wall-clock seconds of one phase of the job")


def _check_protocol(protocol: str) -> None:
    get_protocol(protocol)  # an unknown name is one error listing the installed protocols


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
    """The metric declarations of one protocol by name, templates left out (see :func:`_templates`)."""
    return {s.name: s for s in _declared(protocol) if not s.is_template}


@functools.cache
def _templates(protocol: str) -> tuple[tuple[re.Pattern, MetricSpec], ...]:
    """Templated names (``min_ade_{k}_marginal``) as patterns that match every whole K."""
    out = []
    for spec in _declared(protocol):
        if spec.is_template:
            head, tail = (re.escape(part) for part in spec.name.split("{k}", 1))
            out.append((re.compile(f"^{head}([1-9][0-9]*){tail}$"), spec))
    return tuple(out)


@functools.cache
def _by_key(protocol: str) -> dict[str, MetricSpec]:
    """Declarations by MLflow key; two declared names with one key would make the way back ambiguous."""

    out: dict[str, MetricSpec] = {}
    for name, spec in specs(protocol).items():
        key = metric_key(name)
        if key in out and out[key] is not spec:
            raise ValueError(
                f"metrics of protocol {protocol!r}: {out[key].name!r} and {name!r} share the MLflow key {key!r}"
            )
        out[key] = spec
    return out


def _core(protocol: str, key: str) -> tuple[MetricSpec, bool] | None:
    """The declaration of an un-prefixed key (exact, a per-K name, or a series of a declared name) and
    whether the key is a series."""
    table = _by_key(protocol)
    if key in table:
        spec = table[key]
        return spec, spec.series
    for pattern, template in _templates(protocol):
        match = pattern.match(key)
        if match:
            return template.for_k(int(match.group(1))), template.series
    for suffix in get_protocol(protocol).series_suffixes:
        if key.endswith(suffix) and key[: -len(suffix)] in table:
            return table[key[: -len(suffix)]], True
    return None


def _resolve(protocol: str, key: str) -> tuple[MetricSpec, bool] | None:
    _check_protocol(protocol)
    if key.startswith(TIME_PREFIX) and len(key) > len(TIME_PREFIX):
        return _time_spec(protocol), False
    if key.startswith(THRESHOLD_PREFIX):  # a logged threshold table: a series over thresholds
        found = _resolve(protocol, key[len(THRESHOLD_PREFIX) :])
        return None if found is None else (found[0], True)
    if key.startswith(DETAIL_PREFIX):
        rest = key[len(DETAIL_PREFIX) :]
        return None if rest.startswith((DETAIL_PREFIX, BASELINE_PREFIX)) else _resolve(protocol, rest)
    if key.startswith(BASELINE_PREFIX):
        key = "baseline." + key[len(BASELINE_PREFIX) :]
    found = _core(protocol, key)
    if found is not None:
        return found
    if key.endswith(SERIES_KEY_SUFFIX):  # a series renamed beside a scalar of the same name
        found = _core(protocol, key[: -len(SERIES_KEY_SUFFIX)])
        if found is not None:
            return found[0], True
    descriptor = get_protocol(protocol)
    for prefix in descriptor.key_prefixes:
        if isinstance(prefix, str):
            rest = key[len(prefix) :] if key.startswith(prefix) else None
        else:
            match = prefix.match(key)
            rest = key[match.end() :] if match else None
        found = _core(protocol, rest) if rest else None
        if found is not None:
            return found[0], found[1] or prefix in descriptor.series_prefixes
    return None


def spec_for_key(protocol: str, key: str) -> MetricSpec | None:
    """The declaration behind an MLflow metric key or logged table (``top1``, ``detail/fpr_at_95tpr``,
    ``baseline/top1``, ``threshold/m2_cdt_pct``, ``detail/task/cartpole_default/saturation``; the older
    ``m2_cdt_pct_at_0.3`` and ``baseline.top1`` too), or None when the protocol declares no such name."""
    found = _resolve(protocol, key)
    return None if found is None else found[0]


def is_series_key(protocol: str, key: str) -> bool:
    """Whether the MLflow key holds a per-step series (``top1_batch``, ``by_task/forgetting``,
    ``displacement_by_step_marginal``): its latest value is not a summary of the run."""
    found = _resolve(protocol, key)
    return found is not None and found[1]


def spec_for(protocol: str, name: str) -> MetricSpec | None:
    """The declaration behind a reported name (see the module docstring), or None.

    Resolved through the name's MLflow key, so a name and its key always find the same declaration.
    """

    return spec_for_key(protocol, metric_key(name))


def base_name(name: str, protocol: str) -> str:
    """The name a ``metrics.names`` selection matches: without the ``baseline.`` prefix, the protocol's key
    prefix (``task/<task>/``, ``by_task/``) and the ``@threshold`` suffix (``baseline.m2_cdt_pct@0.3`` ->
    ``m2_cdt_pct``)."""
    name = name[len("baseline.") :] if name.startswith("baseline.") else name
    for prefix in get_protocol(protocol).key_prefixes:
        if isinstance(prefix, str):
            if name.startswith(prefix):
                name = name[len(prefix) :]
                break
        elif prefix.match(name):
            name = prefix.sub("", name, count=1)
            break
    return name.split("@", 1)[0]


_INVALID_KEY_CHARS = re.compile(r"[^0-9A-Za-z_\-. /]")


def metric_key(name: str) -> str:
    """MLflow accepts only letters, digits, ``_ - . / space`` in keys: ``m2@0.3`` becomes ``m2_at_0.3``."""
    return _INVALID_KEY_CHARS.sub("_", name.replace("@", "_at_"))
