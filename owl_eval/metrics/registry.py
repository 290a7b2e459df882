"""Every declared metric, by protocol, and the exact way back from a reported name or an MLflow key.

A metric module declares its names in a ``SPECS`` list. A protocol reports those names and names made from
them; each form below maps to exactly one declaration (``spec_for``), and so does its MLflow key
(``spec_for_key``; :func:`metric_key` turns ``@`` into ``_at_``)::

    top1, fpr_at_95tpr                      the declaration of that name
    m2_cdt_pct@0.3                          declared per threshold of the grid (owl_eval.metrics.ond.SPECS)
    baseline.top1                           ond: the baseline agent's own value
    top1_batch, m2_cdt_pct_vs_threshold     ond: per-batch and per-threshold series of top1, m2_cdt_pct
    by_task/forgetting, task/3/accuracy     continual: series over tasks, per-task accuracy
    task/<task>/saturation                  lifelong_rl: per-task values
    min_ade_5_marginal                      trajectory: ``*_{k}_*`` names for every K of ``k_values``
    time/total_s, ste/reused, num_scenes    what the runner adds (timings, counts): :data:`RUNNER_SPECS`

Nothing else resolves: an unknown name is None, never a neighbour's declaration.

MLflow keys (:func:`logged_key`): the protocol's :data:`HEADLINE` metrics under their plain names, the baseline
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

PROTOCOL_MODULES = {
    "ond": ("owl_eval.metrics.ond",),
    "continual": ("owl_eval.metrics.continual",),
    "trajectory": ("owl_eval.metrics.trajectory",),
    "lifelong_rl": ("owl_eval.metrics.lifelong_rl",),
}

_INF = math.inf
_ANY_TASK = re.compile(r"^task/[^/]+/")  # task/<task>/<metric>: the task part is data, never looked at

# Prefixes a protocol puts before a declared name (a pattern matches a task of any name).
PREFIXES: dict[str, tuple] = {
    "ond": ("baseline.",),
    "continual": ("by_task/", _ANY_TASK),
    "trajectory": (),
    "lifelong_rl": (_ANY_TASK,),
}
# Series suffixes: ``<name><suffix>`` is a series of the declared ``<name>``.
SERIES_SUFFIXES: dict[str, tuple[str, ...]] = {"ond": ("_batch", "_vs_threshold")}
# owl_eval.runner.tracking logs a series under ``<name>_by_step`` when a scalar already holds ``<name>``.
SERIES_KEY_SUFFIX = "_by_step"


def _count(name: str, protocol: str, description: str) -> MetricSpec:
    return MetricSpec(name, protocol, None, (0.0, _INF), description=description)


# Names the runner (not a metric module) reports: counts and timings. They have no better direction, so a
# comparison never calls one of them "best".
RUNNER_SPECS: dict[str, list[MetricSpec]] = {
    "ond": [],
    "continual": [
        _count("tasks_completed", "continual", "tasks learned and evaluated before the run ended"),
        MetricSpec(
            "accuracy",
            "continual",
            True,
            (0.0, 1.0),
            description="task/<i>/accuracy: accuracy on task i after each update (column i of A), a series",
        ),
    ],
    "trajectory": [
        _count("num_scenes", "trajectory", "scenes scored"),
        _count("num_agents", "trajectory", "agents with at least one valid future step"),
        _count("num_classified_agents", "trajectory", "agents with a behaviour class (AUC, ECE, TNR-PR)"),
    ],
    "lifelong_rl": [
        *(
            _count(f"ste/{s}", "lifelong_rl", f"tasks whose single-task-expert log was {s}")
            for s in ("reused", "computed", "missing")
        ),
        _count("episodes", "lifelong_rl", "episodes in the log"),
        MetricSpec(
            "reward", "lifelong_rl", True, description="reward per episode (the log's perf_measure column), a series"
        ),
        MetricSpec(
            "reward_processed",
            "lifelong_rl",
            True,
            description="reward per episode after smoothing and normalisation, a series",
        ),
    ],
}
# What users of each field look at first (SAIL-ON program metrics, Renate/Avalanche continual summaries,
# trajectory-forecasting leaderboards, l2metrics' lifetime summary): logged under plain MLflow keys and printed
# at the end of a run, in this order. ``{k}`` matches every K of the trajectory ``k_values``.
HEADLINE: dict[str, tuple[str, ...]] = {
    "ond": (
        "top1",
        "top3",
        "m1_mean_fn_cdt",
        "m2_cdt_pct",
        "m21_fp_pct",
        "m3_nrp_top1",
        "m4_nrp_top1",
        "m5_opti_top1",
        "m6_apti_top1",
        "auroc_novel",
        "oscr",
    ),
    "continual": ("average_accuracy", "micro_average_accuracy", "forgetting", "backward_transfer", "forward_transfer"),
    "trajectory": (
        "ade_marginal",
        "fde_marginal",
        "min_ade_{k}_marginal",
        "min_fde_{k}_marginal",
        "miss_rate_marginal",
        "kde_nll_marginal",
        "kde_ece_marginal",
        "collision_rate_marginal",
    ),
    "lifelong_rl": (
        "perf_recovery",
        "perf_maintenance_mrlep",
        "forward_transfer_ratio",
        "backward_transfer_ratio",
        "ste_rel_perf",
        "sample_efficiency",
    ),
}
DETAIL_PREFIX = "detail/"
BASELINE_PREFIX = "baseline/"
THRESHOLD_PREFIX = "threshold/"
THRESHOLD_SERIES_SUFFIX = "_vs_threshold"
# N/A reasons of values fixed by construction (metrics.ond: unknown_score_*_pre, M5/M6 of the baseline itself, detection
# under the given condition): not measurements, so not logged as metrics or tags (metrics_na.json keeps them).
_BY_DESIGN = ("by construction", "detection is not measured")


def headline_rank(protocol: str, name: str) -> int | None:
    """The position of ``name`` (a reported name, no prefix) in the protocol's :data:`HEADLINE`, or None."""
    _check_protocol(protocol)
    for i, declared in enumerate(HEADLINE[protocol]):
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
    if protocol not in PROTOCOL_MODULES:
        raise KeyError(f"unknown protocol {protocol!r}; known protocols: {sorted(PROTOCOL_MODULES)}")


@functools.cache
def specs(protocol: str) -> dict[str, MetricSpec]:
    """The metric declarations of one protocol, by name (the metric modules' ``SPECS`` and :data:`RUNNER_SPECS`)."""
    _check_protocol(protocol)
    out: dict[str, MetricSpec] = {}
    for module_name in PROTOCOL_MODULES[protocol]:
        module = importlib.import_module(module_name)
        out.update({s.name: s for s in getattr(module, "SPECS", [])})
    out.update({s.name: s for s in RUNNER_SPECS[protocol]})
    return out


@functools.cache
def _templates(protocol: str) -> tuple[tuple[re.Pattern, MetricSpec], ...]:
    """Per-K names (``min_ade_{k}_marginal``) of the protocol's table registry as patterns, for every K."""
    out = []
    for module_name in PROTOCOL_MODULES[protocol]:
        for entry in getattr(importlib.import_module(module_name), "REGISTRY", []):
            if getattr(entry, "per_k", False):
                name = entry.spec.name
                head, tail = (re.escape(part) for part in name.split("{k}", 1))
                out.append((re.compile(f"^{head}([1-9][0-9]*){tail}$"), entry.spec))
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


# Declared names that are series (one value per step), besides the series suffixes and prefixes above.
SERIES_NAMES: dict[str, frozenset[str]] = {
    "ond": frozenset(),
    "continual": frozenset({"accuracy"}),
    "trajectory": frozenset(),
    "lifelong_rl": frozenset({"reward", "reward_processed"}),
}


@functools.cache
def _table_series(protocol: str) -> frozenset[str]:
    """Names the protocol's table registry computes as series (``kind="series"``)."""
    out = set()
    for module_name in PROTOCOL_MODULES[protocol]:
        for entry in getattr(importlib.import_module(module_name), "REGISTRY", []):
            if getattr(entry, "kind", "scalar") == "series":
                out.add(entry.spec.name)
    return frozenset(out)


def _core(protocol: str, key: str) -> tuple[MetricSpec, bool] | None:
    """The declaration of an un-prefixed key (exact, a per-K name, or a series of a declared name) and
    whether the key is a series."""
    table = _by_key(protocol)
    if key in table:
        spec = table[key]
        return spec, spec.name in SERIES_NAMES[protocol] or spec.name in _table_series(protocol)
    for pattern, template in _templates(protocol):
        match = pattern.match(key)
        if match:
            k = match.group(1)
            spec = MetricSpec(
                template.name.format(k=k),
                template.protocol,
                template.higher_is_better,
                template.bounds,
                template.log_scale,
                template.description.replace("K ", f"{k} "),
                (template.latex or "").replace("{k}", k) or None,
                template.combine,
            )
            return spec, template.name in _table_series(protocol)
    for suffix in SERIES_SUFFIXES.get(protocol, ()):
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
    for prefix in PREFIXES[protocol]:
        if isinstance(prefix, str):
            rest = key[len(prefix) :] if key.startswith(prefix) else None
        else:
            match = prefix.match(key)
            rest = key[match.end() :] if match else None
        found = _core(protocol, rest) if rest else None
        if found is not None:
            return found[0], found[1] or prefix == "by_task/"
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


def base_name(name: str) -> str:
    """The name a ``metrics.names`` selection matches: without the ``baseline.`` and ``task/<task>/`` or
    ``by_task/`` prefix and the ``@threshold`` suffix (``baseline.m2_cdt_pct@0.3`` -> ``m2_cdt_pct``)."""
    name = name[len("baseline.") :] if name.startswith("baseline.") else name
    name = name[len("by_task/") :] if name.startswith("by_task/") else _ANY_TASK.sub("", name, count=1)
    return name.split("@", 1)[0]


_INVALID_KEY_CHARS = re.compile(r"[^0-9A-Za-z_\-. /]")


def metric_key(name: str) -> str:
    """MLflow accepts only letters, digits, ``_ - . / space`` in keys: ``m2@0.3`` becomes ``m2_at_0.3``."""
    return _INVALID_KEY_CHARS.sub("_", name.replace("@", "_at_"))
