"""Typed metric settings: the ``metrics`` config node of each protocol as a checked dataclass.

Each protocol's node (``metrics/<protocol>.yaml`` in the protocol's config folder, ``_target_`` its class, a
:class:`MetricOptions` in the protocol's ``options.py``) is a frozen dataclass whose defaults are the YAML's values: this module is the one place that knows the keys; every field says how its value is checked (``owl_eval.typed``). :func:`parse` rejects an unknown key
(``metrics.treshold``, with the closest valid key), a value of the wrong type (``threshold=high``,
``kde=maybe``, ``chunk_size=2.5``) or out of range, each as one :class:`~owl_eval.errors.ConfigError` naming
``metrics.<key>``, before any run exists. Settings that depend on the data (``k_values`` <= the number of
predictions, ``tnr_pr_positive`` among the class names, ``perf_measure`` among the log's columns) are
checked by :meth:`MetricOptions.check_against` with what the protocol (live runs) or the record (sources) knows.

A ``null`` is accepted only where it means something (``names``, ``window_length``, ``data_range``); any
other ``null`` is an error, never a silent fall-back to a function default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from owl_eval.errors import ConfigError
from owl_eval.typed import as_choice, as_float, as_int, check_keys


def checked(default: Any, check) -> Any:
    """A dataclass field with its default and its check ``check(value, key) -> typed value``."""
    if isinstance(default, list):  # a mutable default: a fresh copy per instance
        return field(default_factory=lambda: list(default), metadata={"check": check})
    return field(default=default, metadata={"check": check})


def choice(*choices: str):
    return lambda value, key: as_choice(value, key, choices)


def unit_interval(value, key):
    return as_float(value, key, minimum=0.0, maximum=1.0)


def positive_int(value, key):
    return as_int(value, key, minimum=1)


def non_negative(value, key):
    return as_float(value, key, minimum=0.0)


def metric_names(protocol: str):
    """``null`` (every metric) or a non-empty list of distinct metric names ``protocol`` declares."""

    def check(value, key):
        from owl_eval.evaluation.selection import check_names

        names = check_names(protocol, value)
        listed = names or []
        twice = [n for i, n in enumerate(listed) if n in listed[:i]]
        if twice:
            raise ConfigError(f"{key}: {twice[0]!r} is listed twice")
        return names

    return check


@dataclass(frozen=True)
class MetricOptions:
    """Base of the per-protocol settings; ``protocol`` is the name the ``names`` are looked up under."""

    protocol = ""
    if TYPE_CHECKING:  # a field of each protocol's class (its last): the selection, ``metrics.names``

        @property
        def names(self) -> list[str] | None: ...

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

    def check_against(self, *, where: str = "metrics", **known: Any) -> None:
        """The settings that depend on the data, against what is ``known`` of it (``num_preds``,
        ``class_names``, ``columns``, ``preds_from``; a key absent = not known yet, nothing checked)."""

    @classmethod
    def record_context(cls, record: Any) -> dict[str, Any]:
        """What a record (a source's or a saved run's) tells about the data, for :meth:`check_against`."""
        return {}


def options_class(protocol: str) -> type[MetricOptions]:
    """The typed ``metrics`` node of ``protocol`` (its descriptor's ``options``)."""
    from owl_eval.protocols import get_protocol

    return get_protocol(protocol).options_class()


def parse(protocol: str, settings: Mapping[str, Any] | None, where: str = "metrics") -> MetricOptions:
    """The ``metrics`` node of ``protocol`` checked and typed (see the module docstring)."""
    return options_class(protocol).parse(settings, where)


def build(
    protocol: str, settings: Mapping[str, Any] | None, *, record: Any = None, where: str = "metrics", **context
) -> MetricOptions:
    """The typed ``metrics`` node of ``protocol``, checked against ``context`` (what a live protocol knows:
    ``num_preds``, ``class_names``, ``columns``) and what ``record`` tells (a source)."""
    options = parse(protocol, settings, where)
    given = {k: v for k, v in context.items() if v is not None}
    known = options.record_context(record) | given
    if "num_preds" in known and "num_preds" not in given:
        known["preds_from"] = "in the data"
    options.check_against(where=where, **known)
    return options
