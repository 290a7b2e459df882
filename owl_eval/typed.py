"""Typed config values: each check names the key and what was expected, so a typo or a ``2.5`` where an
integer belongs is one clear :class:`~owl_eval.errors.ConfigError` before any run exists.

YAML and the command line hand values over as int, float, bool or str; these functions accept exactly the
values a careful user would mean (``3``, ``3.0`` and ``"3"`` are the integer 3; ``2.5``, ``true`` and
``"abc"`` are not) and reject the rest.

:class:`ConfigNode` turns a dataclass of such checked fields into the schema Hydra's ConfigStore holds for its
config node (defaults written once, in the dataclass), and :func:`config_node_error` words what OmegaConf refuses
in such a node the way the checks do.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from owl_eval.errors import ConfigError

_TRUE, _FALSE = ("true", "yes", "on"), ("false", "no", "off")


def _show(value: Any) -> str:
    return f"{value!r} ({type(value).__name__})" if not isinstance(value, str) else repr(value)


def _plain(value: Any) -> Any:
    """numpy scalars (``np.int64(20)`` from a record) as the Python numbers they hold."""
    if isinstance(value, np.generic):
        return value.item()
    return value


def as_int(value: Any, key: str, *, minimum: int | None = None, maximum: int | None = None) -> int:
    """An integer (``3``, ``3.0``, ``"3"``); not a bool, not ``2.5``, within ``[minimum, maximum]``."""
    value = _plain(value)
    number: int | None = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer():
        number = int(value)
    elif isinstance(value, str):
        try:
            number = int(value.strip())
        except ValueError:
            number = None
    if number is None:
        raise ConfigError(f"{key}: expected an integer, got {_show(value)}")
    _check_range(number, key, minimum, maximum)
    return number


def as_float(
    value: Any,
    key: str,
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    open_minimum: bool = False,
    open_maximum: bool = False,
) -> float:
    """A finite real number within the bounds (closed unless ``open_*``); not a bool, not NaN or inf."""
    value = _plain(value)
    number: float | None = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is None:
        raise ConfigError(f"{key}: expected a number, got {_show(value)}")
    if not math.isfinite(number):
        raise ConfigError(f"{key}: expected a finite number, got {value!r}")
    if minimum is not None and (number < minimum or (open_minimum and number == minimum)):
        raise ConfigError(f"{key}: expected a number {'>' if open_minimum else '>='} {minimum:g}, got {value!r}")
    if maximum is not None and (number > maximum or (open_maximum and number == maximum)):
        raise ConfigError(f"{key}: expected a number {'<' if open_maximum else '<='} {maximum:g}, got {value!r}")
    return number


def as_bool(value: Any, key: str) -> bool:
    """``true``/``false`` (YAML booleans, or the strings true/false/yes/no/on/off); nothing else."""
    value = _plain(value)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise ConfigError(f"{key}: expected true or false, got {_show(value)}")


def as_choice(value: Any, key: str, choices: Iterable[str]) -> str:
    """One of ``choices`` (exact spelling)."""
    options = list(choices)
    if not isinstance(value, str) or value not in options:
        raise ConfigError(f"{key}: expected one of {options}, got {_show(value)}")
    return value


def as_str(value: Any, key: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        raise ConfigError(f"{key}: expected a non-empty string, got {_show(value)}")
    return value


def as_int_list(
    value: Any, key: str, *, minimum: int | None = None, maximum: int | None = None, allow_empty: bool = False
) -> list[int]:
    """A list of integers (a single integer is a one-element list)."""
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if not items and not allow_empty:
        raise ConfigError(f"{key}: expected a non-empty list of integers, got []")
    return [as_int(v, f"{key}[{i}]", minimum=minimum, maximum=maximum) for i, v in enumerate(items)]


def check_keys(node: Mapping[str, Any], known: Iterable[str], where: str) -> None:
    """Every key of ``node`` is known; an unknown one (a typo like ``treshold``) names the closest valid key."""
    import difflib

    valid = list(known)
    unknown = [k for k in node if k not in valid]
    if unknown:
        close = difflib.get_close_matches(str(unknown[0]), valid, n=1)
        hint = f" (did you mean {where}.{close[0]}?)" if close else ""
        raise ConfigError(f"{where}.{unknown[0]}: unknown key{hint}; valid keys: {', '.join(valid) or '(none)'}")


def _check_range(number: int, key: str, minimum: int | None, maximum: int | None) -> None:
    if minimum is not None and number < minimum:
        raise ConfigError(f"{key}: expected an integer >= {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise ConfigError(f"{key}: expected an integer <= {maximum}, got {number}")


# -- the schema of a typed node, for Hydra's ConfigStore ----------------------------------------------------


class ConfigNode:
    """A class attribute of a dataclass ``Cls``: ``Cls.config_node`` is the schema Hydra's ConfigStore holds for
    ``Cls``'s config node (``ConfigStore.store(group=..., name=..., node=Cls.config_node)``): ``_target_`` =
    ``Cls``'s path first (``target=True``, so Hydra's ``instantiate`` builds ``Cls`` from the node), then every field
    of ``Cls`` with its default, in ``Cls``'s order; each default is written once, in ``Cls``.

    - The node has exactly these keys: a key it lacks (``metrics.treshold=0.3``) is refused when the config is
      composed, worded by :func:`config_node_error` as ``Cls``'s own key check words it.
    - Its values are typed ``Any`` for OmegaConf: they are kept as given and typed by ``Cls``'s checks when the node
      is built. OmegaConf's own conversions would change what is accepted and what an error says (``kde=1``
      silently true, ``threshold=2`` reported as ``2.0``, ``chunk_size=64.0`` refused, ``k_values=5`` refused).
    - It is not frozen even when ``Cls`` is: a frozen dataclass makes a read-only node, so no override applies.

    Made once per class and named ``<Cls>.config_node`` in ``Cls``'s module, so that pickle finds it again (a
    launcher sends the configs, and the ConfigStore, to other processes)."""

    def __init__(self, *, target: bool = False):
        self.target = target
        self.made: dict[type, type] = {}
        self.name = "config_node"

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, instance: Any, owner: type) -> type:
        if owner not in self.made:
            self.made[owner] = self._schema(owner)
        return self.made[owner]

    def _schema(self, owner: type) -> type:
        fields: list[tuple[str, Any, Any]] = []
        if self.target:
            fields.append(("_target_", Any, dataclasses.field(default=f"{owner.__module__}.{owner.__qualname__}")))
        for f in dataclasses.fields(owner):
            if f.default_factory is not dataclasses.MISSING:
                fields.append((f.name, Any, dataclasses.field(default_factory=f.default_factory)))
            else:
                fields.append((f.name, Any, dataclasses.field(default=f.default)))
        schema = dataclasses.make_dataclass(owner.__name__, fields)
        schema.__module__, schema.__qualname__ = owner.__module__, f"{owner.__qualname__}.{self.name}"
        schema.__doc__ = f"The config node of {owner.__module__}.{owner.__qualname__} (owl_eval.typed.ConfigNode)."
        schema.__config_node_of__ = owner  # type: ignore[attr-defined]  # read by config_node_error
        return schema


def config_node_error(exc: BaseException) -> ConfigError | None:
    """The :class:`ConfigError` for what OmegaConf refused in a node made by :class:`ConfigNode`, found in
    ``exc``'s chain (Hydra wraps it: "Could not override 'metrics.treshold'", "Error merging override ..."), or
    None when ``exc`` is about something else.

    - a key the node lacks (``metrics.treshold=0.3``, ``metrics={treshold: 0.3}``, a YAML file merged onto the
      node): the message of :func:`check_keys`, with the closest valid key and the valid ones;
    - a key deleted (``~metrics.threshold``): the node's keys are fixed; the message gives the key's default.
    """
    from omegaconf.errors import OmegaConfBaseException

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        schema = getattr(current, "object_type", None) if isinstance(current, OmegaConfBaseException) else None
        full_key = str(getattr(current, "full_key", None) or "")
        if isinstance(schema, type) and hasattr(schema, "__config_node_of__") and full_key:
            where, _, key = full_key.rpartition(".")
            fields = {f.name: f for f in dataclasses.fields(schema)}
            valid = [name for name in fields if name != "_target_"]
            if key not in fields and where:
                try:
                    check_keys({key: None}, valid, where)
                except ConfigError as error:
                    return error
            if key in fields and "deletion" in str(getattr(current, "msg", current)):
                f = fields[key]
                default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
                shown = default if isinstance(default, str) else json.dumps(default, default=str)
                return ConfigError(
                    f"{full_key}: cannot be deleted (~{full_key}), the keys of {where or 'this node'} are fixed; "
                    f"its default is {shown} (set {full_key}=<value> to change it)"
                )
        current = current.__cause__ or current.__context__
    return None
