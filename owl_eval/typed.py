"""Typed config values: each check names the key and what was expected, so a typo or a ``2.5`` where an
integer belongs is one clear :class:`~owl_eval.errors.ConfigError` before any run exists.

YAML and the command line hand values over as int, float, bool or str; these functions accept exactly the
values a careful user would mean (``3``, ``3.0`` and ``"3"`` are the integer 3; ``2.5``, ``true`` and
``"abc"`` are not) and reject the rest.
"""

from __future__ import annotations

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
        raise ConfigError(f"{where}.{unknown[0]}: unknown key{hint}; valid keys: {', '.join(valid)}")


def _check_range(number: int, key: str, minimum: int | None, maximum: int | None) -> None:
    if minimum is not None and number < minimum:
        raise ConfigError(f"{key}: expected an integer >= {minimum}, got {number}")
    if maximum is not None and number > maximum:
        raise ConfigError(f"{key}: expected an integer <= {maximum}, got {number}")
