"""Typed metric settings: the ``metrics`` config node of each protocol as a checked dataclass.

Each protocol's node (``owl_eval/conf/metrics/<protocol>.yaml``, ``_target_: owl_eval.evaluation.options.<Class>``)
is a frozen dataclass whose defaults are the YAML's values: this module is the one place that knows the keys; every field says how its value is checked (``owl_eval.typed``). :func:`parse` rejects an unknown key
(``metrics.treshold``, with the closest valid key), a value of the wrong type (``threshold=high``,
``kde=maybe``, ``chunk_size=2.5``) or out of range, each as one :class:`~owl_eval.errors.ConfigError` naming
``metrics.<key>``, before any run exists. Settings that depend on the data (``k_values`` <= the number of
predictions, ``tnr_pr_positive`` among the class names, ``perf_measure`` among the log's columns) are
checked by :func:`check_against` with what the protocol (live runs) or the record (sources) knows.

A ``null`` is accepted only where it means something (``names``, ``window_length``, ``data_range``); any
other ``null`` is an error, never a silent fall-back to a function default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from owl_eval.errors import ConfigError
from owl_eval.typed import as_bool, as_choice, as_float, as_int, as_int_list, as_str, check_keys


def _checked(default: Any, check) -> Any:
    """A dataclass field with its default and its check ``check(value, key) -> typed value``."""
    if isinstance(default, list):  # a mutable default: a fresh copy per instance
        return field(default_factory=lambda: list(default), metadata={"check": check})
    return field(default=default, metadata={"check": check})


def _choice(*choices: str):
    return lambda value, key: as_choice(value, key, choices)


def _unit_interval(value, key):
    return as_float(value, key, minimum=0.0, maximum=1.0)


def _positive_int(value, key):
    return as_int(value, key, minimum=1)


def _non_negative(value, key):
    return as_float(value, key, minimum=0.0)


def _names(protocol: str):
    """``null`` (every metric) or a non-empty list of distinct metric names ``protocol`` declares."""

    def check(value, key):
        from owl_eval.evaluation.selection import check_names

        names = check_names(protocol, value)
        twice = [n for i, n in enumerate(names or []) if n in names[:i]]
        if twice:
            raise ConfigError(f"{key}: {twice[0]!r} is listed twice")
        return names

    return check


@dataclass(frozen=True)
class MetricOptions:
    """Base of the per-protocol settings; ``protocol`` is the name the ``names`` are looked up under."""

    protocol = ""

    @classmethod
    def parse(cls, settings: Mapping[str, Any] | None, where: str = "metrics"):
        """The node checked and typed; keys absent from ``settings`` take the defaults (the YAML's values)."""
        if settings is None:
            settings = {}
        if not isinstance(settings, Mapping):
            raise ConfigError(
                f"{where}: expected a mapping of metric settings (metrics={cls.protocol}), got {settings!r}"
            )
        target = settings.get("_target_")
        if target is not None and target != cls.target():
            raise ConfigError(
                f"{where}._target_: expected {cls.target()} for the {cls.protocol} metrics, got {target!r}"
            )
        settings = {k: v for k, v in settings.items() if k != "_target_"}
        fields = {f.name: f for f in dataclasses.fields(cls)}
        check_keys(settings, list(fields), where)
        values = {name: fields[name].metadata["check"](value, f"{where}.{name}") for name, value in settings.items()}
        return cls(**values)

    @classmethod
    def target(cls) -> str:
        """The ``_target_`` of the protocol's metrics node."""
        return f"{cls.__module__}.{cls.__qualname__}"

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def settings(self) -> dict[str, Any]:
        """The options without the selection (``names``): the keyword arguments of the metric functions."""
        return {k: v for k, v in self.as_dict().items() if k != "names"}


@dataclass(frozen=True)
class OndMetricOptions(MetricOptions):
    """``owl_eval/conf/metrics/ond.yaml``: SAIL-ON program metrics (METRICS.md section 1)."""

    protocol = "ond"
    threshold: float = _checked(0.5, _unit_interval)
    asymptotic_width: int = _checked(100, _positive_int)
    nrp_window: str = _checked("post", _choice("post", "asymptotic"))
    threshold_grid: bool = _checked(True, as_bool)
    names: list[str] | None = _checked(None, _names("ond"))


@dataclass(frozen=True)
class ContinualMetricOptions(MetricOptions):
    """``owl_eval/conf/metrics/continual.yaml``: only the selection (the continual metrics have no settings)."""

    protocol = "continual"
    names: list[str] | None = _checked(None, _names("continual"))


def _k_values(value, key):
    ks = as_int_list(value, key, minimum=1)
    twice = [k for i, k in enumerate(ks) if k in ks[:i]]
    if twice:  # the same K twice would add its metric's sums twice under one name
        raise ConfigError(f"{key}: {twice[0]} is listed twice")
    return ks


@dataclass(frozen=True)
class TrajectoryMetricOptions(MetricOptions):
    """``owl_eval/conf/metrics/trajectory.yaml``: General-Framework's metric table (METRICS.md section 3)."""

    protocol = "trajectory"
    k_values: list[int] = _checked([20], _k_values)
    miss_threshold: float = _checked(2.0, _non_negative)
    collision_radius: float = _checked(0.2, _non_negative)
    step_count: str = _checked("agent", _choice("agent", "sample"))
    kde: bool = _checked(True, as_bool)
    chunk_size: int = _checked(256, _positive_int)
    class_ece_bins: int = _checked(10, _positive_int)
    auc_score: str = _checked("raw", _choice("raw", "general_framework"))
    tnr_pr_positive: str = _checked("straight", as_str)
    names: list[str] | None = _checked(None, _names("trajectory"))


def _window_length(value, key):
    return None if value is None else as_int(value, key, minimum=1)


def _data_range(value, key):
    """``null`` or ``{task: {min: number, max: number}}`` with min < max."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or not value:
        raise ConfigError(f"{key}: expected null or a mapping {{task: {{min: ..., max: ...}}}}, got {value!r}")
    out = {}
    for task, bounds in value.items():
        where = f"{key}.{task}"
        if not isinstance(bounds, Mapping):
            raise ConfigError(f"{where}: expected {{min: ..., max: ...}}, got {bounds!r}")
        check_keys(bounds, ["min", "max"], where)
        if "min" not in bounds or "max" not in bounds:
            raise ConfigError(f"{where}: expected both min and max, got {dict(bounds)!r}")
        low, high = as_float(bounds["min"], f"{where}.min"), as_float(bounds["max"], f"{where}.max")
        if not low < high:
            raise ConfigError(f"{where}: expected min < max, got min={low:g}, max={high:g}")
        out[str(task)] = {"min": low, "max": high}
    return out


@dataclass(frozen=True)
class LifelongRLMetricOptions(MetricOptions):
    """``owl_eval/conf/metrics/lifelong_rl.yaml``: l2metrics 3.1 settings (METRICS.md section 4)."""

    protocol = "lifelong_rl"
    perf_measure: str = _checked("reward", as_str)
    preset: str = _checked("l2metrics", _choice("l2metrics"))
    smoothing: str = _checked("flat", _choice("flat", "hanning", "hamming", "bartlett", "blackman", "none"))
    smoothing_fraction: float = _checked(0.2, _unit_interval)
    window_length: int | None = _checked(None, _window_length)
    max_window: int = _checked(100, _positive_int)
    smooth_eval: bool = _checked(False, as_bool)
    normalization: str = _checked("task", _choice("task", "run", "none"))
    data_range: dict | None = _checked(None, _data_range)
    clamp_outliers: bool = _checked(False, as_bool)
    aggregation: str = _checked("mean", _choice("mean", "median"))
    learn_threshold: float = _checked(0.9, lambda v, k: as_float(v, k, minimum=0.0, maximum=1.0, open_minimum=True))
    variant_mode: str = _checked("aware", _choice("aware", "agnostic"))
    names: list[str] | None = _checked(None, _names("lifelong_rl"))


OPTIONS: dict[str, type[MetricOptions]] = {
    "ond": OndMetricOptions,
    "continual": ContinualMetricOptions,
    "trajectory": TrajectoryMetricOptions,
    "lifelong_rl": LifelongRLMetricOptions,
}


def parse(protocol: str, settings: Mapping[str, Any] | None, where: str = "metrics") -> MetricOptions:
    """The ``metrics`` node of ``protocol`` checked and typed (see the module docstring)."""
    return OPTIONS[protocol].parse(settings, where)


# ------------------------------------------------------------------------------- data-dependent checks


def check_against(
    options: MetricOptions,
    *,
    num_preds: int | None = None,
    class_names=None,
    columns=None,
    where: str = "metrics",
    preds_from: str = "protocol.num_preds",
) -> None:
    """The settings that depend on the data: ``num_preds`` predictions per agent (trajectory ``k_values``),
    the behaviour ``class_names`` (``tnr_pr_positive``), the log's performance ``columns`` (``perf_measure``).
    ``None`` = not known yet (nothing checked)."""
    if isinstance(options, TrajectoryMetricOptions):
        if num_preds is not None:
            too_many = [k for k in options.k_values if k > num_preds]
            if too_many:
                raise ConfigError(
                    f"{where}.k_values: K={too_many[0]} exceeds the {num_preds} predictions per agent "
                    f"({preds_from}); expected values in 1..{num_preds}, e.g. {where}.k_values=[{num_preds}]"
                )
        names = [str(c) for c in class_names] if class_names is not None and len(class_names) else None
        if names is not None and options.tnr_pr_positive not in names:
            raise ConfigError(
                f"{where}.tnr_pr_positive: expected one of the classes {names}, got {options.tnr_pr_positive!r}"
            )
    if isinstance(options, LifelongRLMetricOptions) and columns is not None:
        valid = sorted(str(c) for c in columns)
        if options.perf_measure not in valid:
            raise ConfigError(
                f"{where}.perf_measure: expected a performance column of the log {valid}, got {options.perf_measure!r}"
            )


def record_context(record: Any) -> dict[str, Any]:
    """What a record (a source's or a saved run's) tells about the data, for :func:`check_against`. Not its
    class names: a file's own classes may lack the default ``tnr_pr_positive`` (TNR-PR is then N/A with
    the reason), while a live run's classes are fixed and a wrong name there is a typo."""
    if record is None:
        return {}
    context: dict[str, Any] = {}
    num_preds = getattr(record, "num_preds", None)
    pred = getattr(record, "path_pred", None)
    if num_preds is None and pred is not None and getattr(pred, "ndim", 0) == 5:
        num_preds = pred.shape[1]
    if num_preds is not None:
        context["num_preds"] = int(num_preds)
    log = getattr(record, "log", None)
    if log is not None and isinstance(getattr(log, "columns", None), Mapping):
        context["columns"] = tuple(log.columns)  # what l2metrics' reader accepts as perf_measure
    return context


def build(
    protocol: str, settings: Mapping[str, Any] | None, *, record: Any = None, where: str = "metrics", **context
) -> MetricOptions:
    """The typed ``metrics`` node of ``protocol``, checked against ``context`` (what a live protocol knows:
    ``num_preds``, ``class_names``, ``columns``) and what ``record`` tells (a source)."""
    options = parse(protocol, settings, where)
    given = {k: v for k, v in context.items() if v is not None}
    known = record_context(record) | given
    if "num_preds" in known and "num_preds" not in given:
        known["preds_from"] = "in the data"
    check_against(options, where=where, **known)
    return options
