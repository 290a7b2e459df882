"""Names read from a user's file (class names, above all): text in the encoding the format says, each name once.

Two classes of one name are ambiguous (a label or a metric key would point at either), so they are one error naming
the name and both its positions. An ``.npz`` string array of bytes (dtype ``S``) is UTF-8 text; bytes that are not
(``0xff``) are one error naming the file and the array, never the codec's ``'ascii' codec can't decode byte``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np


def distinct_names(
    names: Iterable[str], *, where: str, what: str = "class name", error: Callable[[str], Exception] = ValueError
) -> None:
    """Refuse a name given twice in ``names``: one ``error`` naming ``where``, the name and both 0-based positions."""
    first: dict[str, int] = {}
    for position, name in enumerate(names):
        if name in first:
            raise error(
                f"{where}: {what} {name!r} appears twice (positions {first[name]} and {position}); "
                f"expected distinct {what}s"
            )
        first[name] = position


def text_names(
    array: np.ndarray, *, where: str, what: str = "class name", error: Callable[[str], Exception] = ValueError
) -> tuple[str, ...]:
    """A ``[C]`` string array (dtype ``U``, or ``S`` bytes decoded as UTF-8) as names; bytes that are not UTF-8, or
    text a UTF-8 file cannot hold (a lone surrogate), are one ``error`` naming ``where`` and the position."""
    out = []
    for position, value in enumerate(np.asarray(array).reshape(-1).tolist()):
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise error(
                    f"{where}: {what} at position {position} is not UTF-8 text (byte {value[exc.start]:#04x} at "
                    f"offset {exc.start} of {value[:40]!r}); expected text names"
                ) from None
        value = str(value)
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise error(f"{where}: {what} at position {position} ({value!r}) is not valid text") from None
        out.append(value)
    return tuple(out)
