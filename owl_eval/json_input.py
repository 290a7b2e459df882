"""JSON from a user's file, parsed with one clear error whatever is wrong with it."""

from __future__ import annotations

import json
from typing import Any


def parse_json(text: str, *, where: str, error: type[ValueError] = ValueError, expect_object: str | None = None) -> Any:
    """``json.loads(text)``; invalid JSON (with its line and column), JSON nested too deeply to read
    (RecursionError), an integer of more than 4,300 digits, or - with ``expect_object`` (what the object
    holds, e.g. ``"test settings"``) - a value that is not an object, is one ``error`` naming ``where``."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(f"{where}, line {exc.lineno}, column {exc.colno}: not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise error(f"{where}: JSON nested too deeply to read") from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise error(f"{where}: not valid JSON ({exc})") from None
    if expect_object is not None and not isinstance(value, dict):
        raise error(f"{where}: expected a JSON object {{...}} of {expect_object}, got a JSON {json_type(value)}")
    return value


def json_type(value: Any) -> str:
    """A parsed value's type as a user reads it in a message (``object``, ``list``, ``string`` ...)."""
    names = {dict: "object", list: "list", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)
