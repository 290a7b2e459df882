"""Fast, strict reading of small numeric CSV files, with errors that name the file, row and column.

Row numbers in messages are 1-based lines of the file as an editor shows them (a skipped header and blank
lines counted), so a user can go straight to the line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from owl_eval.errors import SourceFormatError
from owl_eval.safe_paths import read_text


@dataclass
class Table:
    """``fields[rows, width]`` strings; ``line_numbers[rows]`` the 1-based line of each row in the file."""

    header: list[str] | None
    fields: np.ndarray
    line_numbers: np.ndarray


def read_rows(path: Path, *, skip_header: bool, min_width: int = 1, text: str | None = None) -> Table:
    """A :class:`Table` of a comma-separated file without quoting (the formats read here have none).

    ``text``: the file's content when the caller already read it (the link-free reading of a user folder,
    :func:`owl_eval.safe_paths.read_text`); otherwise the file the user named is read here (a link given as
    the path itself is followed, as the user chose it; non-UTF-8 text is one error naming file and line).
    Every row must have the same number of fields; blank lines are ignored; a leading byte-order mark is
    dropped. A ragged row is one clear error naming the file and the row.
    """
    if text is None:
        path = Path(path)
        if not path.is_file():
            raise SourceFormatError(f"{path}: file not found")
        text = read_text(path.resolve(), what="file")
    lines = text.removeprefix("\ufeff").splitlines()
    header = None
    first_row = 1
    if skip_header:
        if not lines:
            raise SourceFormatError(f"{path}: empty file, expected a header row")
        header = [h.strip() for h in lines[0].split(",")]
        lines, first_row = lines[1:], 2
    keep = np.array([i for i, line in enumerate(lines) if line.strip()], dtype=np.int64)
    lines = [lines[i] for i in keep]
    commas = np.fromiter((line.count(",") for line in lines), dtype=np.int64, count=len(lines))
    width = int(commas[0]) + 1 if len(lines) else (len(header) if header else min_width)
    bad = np.flatnonzero(commas != width - 1)
    if bad.size or width < min_width:
        i = int(bad[0]) if bad.size else 0
        got = int(commas[i]) + 1 if len(lines) else 0
        expected = max(width, min_width) if not bad.size else width
        raise SourceFormatError(
            f"{path}, row {first_row + int(keep[i])}: expected {expected} comma-separated fields, got {got}"
        )
    fields = (
        np.array(",".join(lines).split(","), dtype=str).reshape(len(lines), width)
        if lines
        else np.zeros((0, width), str)
    )
    return Table(header=header, fields=fields, line_numbers=first_row + keep)


def read_table(path: Path, *, skip_header: bool, min_width: int = 1) -> tuple[list[str] | None, np.ndarray]:
    """``(header, fields)``: fields a ``[rows, width]`` array of strings (see :func:`read_rows`)."""
    table = read_rows(path, skip_header=skip_header, min_width=min_width)
    return table.header, table.fields


def numeric(
    path: Path,
    fields: np.ndarray,
    *,
    columns: list[int],
    names: list[str],
    first_row_number: int,
    allow_nan: bool = False,
    row_numbers: np.ndarray | None = None,
) -> np.ndarray:
    """``float64 [rows, len(columns)]`` of the given columns; a non-number or NaN is one clear error.

    Row ``i`` is called ``row_numbers[i]`` in messages when given (a :class:`Table`'s ``line_numbers``),
    else ``first_row_number + i``.
    """

    def row(i: int) -> int:
        return int(row_numbers[i]) if row_numbers is not None else first_row_number + i

    chosen = fields[:, columns]
    try:
        table = np.char.strip(chosen).astype(np.float64)
    except ValueError:  # find the culprit (slow path, only on bad input) or parse what numpy refused
        table = np.empty(chosen.shape, np.float64)
        for j, name in enumerate(names):
            for i, text in enumerate(chosen[:, j]):
                try:
                    table[i, j] = float(text)
                except ValueError:
                    raise SourceFormatError(
                        f"{path}, row {row(i)}, column {name!r}: expected a number, got {text.strip()[:40]!r}"
                    ) from None
    if not allow_nan and np.isnan(table).any():
        i, j = np.argwhere(np.isnan(table))[0]
        raise SourceFormatError(f"{path}, row {row(int(i))}, column {names[int(j)]!r}: NaN where a value is required")
    return table


def column_index(path: Path, header: list[str] | None, role: str, spec: int | str) -> int:
    """Resolve a column given by name (header) or 0-based position."""
    if isinstance(spec, int):
        return spec
    if header is None or spec not in header:
        raise SourceFormatError(f"{path}: missing column {spec!r} (role {role!r}); header has {header}")
    return header.index(spec)
