"""Fast, strict reading of small numeric CSV files, with errors that name the file, row and column."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from runner.sources import SourceFormatError


def read_table(path: Path, *, skip_header: bool, min_width: int = 1) -> tuple[list[str] | None, np.ndarray]:
    """``(header, fields)``: fields a ``[rows, width]`` array of strings (no quoting in these formats).

    Every row must have the same number of fields; blank lines are ignored. A ragged row is one clear
    error naming the file and the 1-based row number in the file.
    """
    if not path.is_file():
        raise SourceFormatError(f"{path}: file not found")
    lines = path.read_text().splitlines()
    header = None
    first_row = 1
    if skip_header:
        if not lines:
            raise SourceFormatError(f"{path}: empty file, expected a header row")
        header = [h.strip() for h in lines[0].split(",")]
        lines, first_row = lines[1:], 2
    keep = [i for i, line in enumerate(lines) if line.strip()]
    lines = [lines[i] for i in keep]
    commas = np.fromiter((line.count(",") for line in lines), dtype=np.int64, count=len(lines))
    width = int(commas[0]) + 1 if len(lines) else (len(header) if header else min_width)
    bad = np.flatnonzero(commas != width - 1)
    if bad.size or width < min_width:
        i = int(bad[0]) if bad.size else 0
        got = int(commas[i]) + 1 if len(lines) else 0
        expected = max(width, min_width) if not bad.size else width
        raise SourceFormatError(f"{path}, row {first_row + keep[i]}: expected {expected} comma-separated fields, got {got}")
    fields = np.array(",".join(lines).split(","), dtype=str).reshape(len(lines), width) if lines else np.zeros((0, width), str)
    return header, fields


def numeric(path: Path, fields: np.ndarray, *, columns: list[int], names: list[str], first_row_number: int,
            allow_nan: bool = False) -> np.ndarray:
    """``float64 [rows, len(columns)]`` of the given columns; a non-number or NaN is one clear error."""
    chosen = fields[:, columns]
    try:
        table = np.char.strip(chosen).astype(np.float64)
    except ValueError:
        for j, name in enumerate(names):
            for i, text in enumerate(chosen[:, j]):
                try:
                    float(text)
                except ValueError:
                    raise SourceFormatError(f"{path}, row {first_row_number + i}, column {name!r}: "
                                            f"expected a number, got {text.strip()!r}") from None
        raise
    if not allow_nan and np.isnan(table).any():
        i, j = np.argwhere(np.isnan(table))[0]
        raise SourceFormatError(f"{path}, row {first_row_number + int(i)}, column {names[int(j)]!r}: NaN where a value is required")
    return table


def column_index(path: Path, header: list[str] | None, role: str, spec: int | str) -> int:
    """Resolve a column given by name (header) or 0-based position."""
    if isinstance(spec, int):
        return spec
    if header is None or spec not in header:
        raise SourceFormatError(f"{path}: missing column {spec!r} (role {role!r}); header has {header}")
    return header.index(spec)
