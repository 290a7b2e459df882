"""JSON from a user's file, parsed with one clear error whatever is wrong with it."""

from __future__ import annotations

import json
import re
from typing import Any


def parse_json(text: str, *, where: str, error: type[ValueError] = ValueError, expect_object: str | None = None) -> Any:
    """``json.loads(text)``; invalid JSON (with its line and column), an object with a key given twice (JSON
    keeps the last silently), JSON nested too deeply to read (RecursionError), an integer of more than 4,300
    digits, or - with ``expect_object`` (what the object holds, e.g. ``"test settings"``) - a value that is not an
    object, is one ``error`` naming ``where``."""
    try:
        value = json.loads(text, object_pairs_hook=refuse_repeated_keys)
    except RepeatedKey as exc:
        raise error(f"{where}{_line_of(text, exc.key)}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise error(f"{where}, line {exc.lineno}, column {exc.colno}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise error(f"{where}: JSON nested too deeply to read") from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise error(f"{where}: not valid JSON ({exc})") from None
    if expect_object is not None and not isinstance(value, dict):
        raise error(f"{where}: expected a JSON object {{...}} of {expect_object}, got a JSON {json_type(value)}")
    return value


class RepeatedKey(ValueError):
    """A JSON object names one key twice; ``key`` is that key."""

    def __init__(self, key: str, values: tuple[Any, Any]) -> None:
        super().__init__(
            f"the key {key!r} is given twice in one object ({_short(values[0])} and {_short(values[1])}); "
            "give each key once"
        )
        self.key = key


def refuse_repeated_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook`` of :func:`parse_json` (and of any ``json.loads`` of a user's text): the object as a
    dict, unless a key is given twice (:class:`RepeatedKey`; JSON's own rule keeps the last one silently)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise RepeatedKey(key, (out[key], value))
        out[key] = value
    return out


def _short(value: Any) -> str:
    """A value as a message quotes it, cut to 40 characters."""
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _line_of(text: str, key: str) -> str:
    """``, line N`` of the second place ``key`` is written as an object key in ``text`` when it is written as a key
    exactly twice (found textually, so cheap); empty when that cannot say which place it is."""
    places = [m.start() for m in re.finditer(re.escape(json.dumps(key)) + r"\s*:", text)]
    return f", line {text.count(chr(10), 0, places[1]) + 1}" if len(places) == 2 else ""


def json_type(value: Any) -> str:
    """A parsed value's type as a user reads it in a message (``object``, ``list``, ``string`` ...)."""
    names = {dict: "object", list: "list", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)
