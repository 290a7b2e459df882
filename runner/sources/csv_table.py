"""Fast, strict reading of small numeric CSV files, with errors that name the file, row and column."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from runner.sources import SourceFormatError


def read_rows(path: Path, *, skip_header: bool) -> tuple[list[str] | None, list[list[str]]]:
    """Split a CSV file into rows of fields (no quoting in these formats); blank lines are ignored."""
    if not path.is_file():
        raise SourceFormatError(f"{path}: file not found")
    lines = path.read_text().splitlines()
    header = None
    start = 0
    if skip_header:
        if not lines:
            raise SourceFormatError(f"{path}: empty file, expected a header row")
        header = [h.strip() for h in lines[0].split(",")]
        start = 1
    rows = [line.split(",") for line in lines[start:] if line.strip()]
    return header, rows


def numeric_columns(path: Path, rows: list[list[str]], *, columns: list[int], names: list[str],
                    first_row_number: int, width: int | None = None, allow_nan: bool = False) -> np.ndarray:
    """``float64 [n_rows, len(columns)]``; a short/long row, a non-number or NaN is one clear error."""
    lengths = np.fromiter((len(r) for r in rows), dtype=np.int64, count=len(rows))
    need = max(columns) + 1 if width is None else width
    bad = np.flatnonzero(lengths < need) if width is None else np.flatnonzero(lengths != width)
    if bad.size:
        i = int(bad[0])
        raise SourceFormatError(f"{path}, row {first_row_number + i}: expected {'at least ' if width is None else ''}{need} "
                                f"comma-separated fields, got {lengths[i]}")
    try:
        table = np.array([[r[c] for c in columns] for r in rows], dtype=np.float64).reshape(len(rows), len(columns))
    except ValueError:
        for i, r in enumerate(rows):
            for c, name in zip(columns, names):
                try:
                    float(r[c])
                except ValueError:
                    raise SourceFormatError(f"{path}, row {first_row_number + i}, column {name!r}: "
                                            f"expected a number, got {r[c].strip()!r}") from None
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
