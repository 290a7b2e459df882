"""Typed metric settings: the ``metrics`` config node of each protocol as a checked dataclass.

Each protocol's node is a frozen :class:`MetricOptions` dataclass in the protocol's ``options.py`` (its
descriptor's ``options``); every default is written once, there. Hydra gets it from its ConfigStore as group
``metrics``, option ``<protocol>`` (``MetricOptions.config_node``, stored by
:func:`owl_eval.paths.register_configs` before any composition): ``_target_`` the class, then each field with its
default. The runner builds the typed options from the composed node with Hydra's ``instantiate``; the class checks
every field on construction (``checked(default, check)``, the checks of ``owl_eval.typed``), however it is built.
:meth:`MetricOptions.parse` rejects an unknown key (``metrics.treshold``, with the closest valid key), a value of
the wrong type (``threshold=high``, ``kde=maybe``, ``chunk_size=2.5``) or out of range, each as one
:class:`~owl_eval.errors.ConfigError` naming ``metrics.<key>``, before any run exists; what OmegaConf itself refuses
in the node (a key it does not have, a key deleted) is worded the same way
(:func:`owl_eval.typed.config_node_error`). Settings that depend on the data (``k_values`` <= the number of
predictions, ``tnr_pr_positive`` among the class names, ``perf_measure`` among the log's columns) are checked by
:meth:`MetricOptions.check_against` with what the protocol (live runs) or the record (sources) knows.

A ``null`` is accepted only where it means something (``names``, ``window_length``, ``data_range``); any
other ``null`` is an error, never a silent fall-back to a function default.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from owl_eval.errors import ConfigError
from owl_eval.typed import ConfigNode, as_choice, as_float, as_int, check_keys


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
    """Base of the per-protocol settings; ``protocol`` is the name the ``names`` are looked up under.

    Every field is checked and typed on construction (its ``checked(default, check)``): Hydra's ``instantiate``
    of the ``metrics`` node, :meth:`parse` and ``Cls(...)`` all give checked options or one ConfigError naming
    ``metrics.<key>``. ``Cls.config_node`` is the schema of the node in Hydra's ConfigStore
    (:class:`owl_eval.typed.ConfigNode`: ``_target_`` the class, then every field with its default)."""

    protocol = ""
    config_node = ConfigNode(target=True)
    if TYPE_CHECKING:  # a field of each protocol's class (its last): the selection, ``metrics.names``

        @property
        def names(self) -> list[str] | None: ...

    def __post_init__(self) -> None:
        _check_fields(self)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        """A protocol's own ``__post_init__`` (cross-field checks) runs after every field is checked and typed,
        whether or not it calls ``super().__post_init__()``."""
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("__post_init__")
        if own is not None and not getattr(own, "_after_field_checks", False):

            @functools.wraps(own)
            def post_init(self) -> None:
                _check_fields(self)
                own(self)

            post_init._after_field_checks = True  # type: ignore[attr-defined]
            cls.__post_init__ = post_init  # type: ignore[method-assign]

    @classmethod
    def parse(cls, settings: Mapping[str, Any] | None, where: str = "metrics"):
        """The node checked and typed; keys absent from ``settings`` take the defaults (the dataclass's).

        A composed config node (a ``DictConfig``) is built by Hydra's ``instantiate`` (its interpolations
        resolved by OmegaConf); a plain mapping (the Python API, a record's settings) by the class itself."""
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
        keys = [k for k in settings if k != "_target_"]
        check_keys(dict.fromkeys(keys), [f.name for f in dataclasses.fields(cls)], where)
        from omegaconf import DictConfig

        try:
            if isinstance(settings, DictConfig):
                return _instantiated(cls, settings)
            return cls(**{k: settings[k] for k in keys})
        except ConfigError as exc:
            if where == "metrics":
                raise
            raise ConfigError(f"{where}{str(exc).removeprefix('metrics')}") from None

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


def _check_fields(options: MetricOptions) -> None:
    """Each field of ``options`` checked (its ``checked(default, check)``), the frozen instance given the typed value."""
    from omegaconf import OmegaConf

    for f in dataclasses.fields(options):
        check = f.metadata.get("check")
        if check is not None:
            value = getattr(options, f.name)
            if OmegaConf.is_config(value):  # instantiate(cfg.metrics) without _convert_: a ListConfig, ...
                value = OmegaConf.to_container(value, resolve=True)
            object.__setattr__(options, f.name, check(value, f"metrics.{f.name}"))


def _instantiated(cls: type[MetricOptions], node: Any) -> MetricOptions:
    """``cls`` built by Hydra's ``instantiate`` from the config ``node`` (``_target_`` set to ``cls`` when the node
    has none: ``+metrics.threshold=0.7`` of a source); the ConfigError of a check, not Hydra's wrapper."""
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    try:
        return instantiate(node, _target_=cls.target(), _recursive_=False, _convert_="all")
    except InstantiationException as exc:
        if isinstance(exc.__cause__, ConfigError):
            raise exc.__cause__ from None
        raise


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
