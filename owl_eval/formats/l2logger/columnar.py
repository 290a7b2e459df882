"""Column-wise reading of ``data-log.tsv`` bodies with ``pyarrow.csv`` (one parse for the whole log).

The bodies of every file (header removed, one trailing newline each) are parsed as one tab-separated
text, every column as text: pyarrow splits fields and decodes quoting exactly as Python's ``csv`` module
and pandas' C parser do (``"x""y"`` is ``x"y``, a quoted field may hold a tab), checks UTF-8, and rejects a
row with the wrong number of fields. Numbers are then converted column-wise (``pyarrow.compute.cast``
accepts a subset of what ``float``/``int`` accept, with the same correctly rounded values), block-level
text columns are checked through their run heads, and every check of :mod:`.fields` applies, naming the
file, line and column of the first bad row.

:func:`split_columns` declines (returns None) whenever rows cannot be mapped one-to-one to file lines
(a blank line, a newline inside quotes, a row with a wrong field count, a byte that is not UTF-8, a
lone ``\\r``): the caller then reads those files through the ``csv`` module, which names the bad line.
When a value does not convert column-wise (spaces around a number, ``1_000``, a missing-value token
with spaces), that column alone goes through the per-value parsers of :mod:`.fields`, which accept or
name it exactly as the row-by-row reading does.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from owl_eval.formats.l2logger.fields import (
    _NA_TOKENS,
    _looks_numeric,
    _parse_floats,
    _parse_ints,
    check_finite,
    decode_runs,
)

_NA_VALUES = pa.array(sorted(_NA_TOKENS), type=pa.string())
_NULL_TEXT = pa.scalar(None, type=pa.string())
_BLOCK_BYTES = 1 << 24  # pyarrow parses the text in blocks of this size (its block_size is a 32-bit int)


def split_columns(bodies: list[bytes], names: list[str]) -> tuple[dict[str, pa.Array], np.ndarray] | None:
    """``({column: text array}, rows per file)`` for the files' bodies (``\\n`` line ends, header removed),
    or None when a row cannot be mapped to its file line (see the module docstring)."""
    counts = np.array([b.count(b"\n") + (1 if b and not b.endswith(b"\n") else 0) for b in bodies], dtype=np.int64)
    nrows = int(counts.sum())
    if nrows == 0:
        return None
    text = b"".join(b if not b or b.endswith(b"\n") else b + b"\n" for b in bodies)
    try:
        table = pacsv.read_csv(
            pa.py_buffer(text),
            read_options=pacsv.ReadOptions(column_names=names, use_threads=False, block_size=_BLOCK_BYTES),
            parse_options=pacsv.ParseOptions(
                delimiter="\t", quote_char='"', double_quote=True, escape_char=False, ignore_empty_lines=True
            ),
            convert_options=pacsv.ConvertOptions(
                column_types=dict.fromkeys(names, pa.string()),
                strings_can_be_null=False,
                quoted_strings_can_be_null=False,
                check_utf8=True,
            ),
        )
    except pa.ArrowException:
        return None
    if table.num_rows != nrows:  # a blank line (skipped, as pandas does) or a quoted newline: rows != lines
        return None
    return {name: table.column(name).combine_chunks() for name in names}, counts


def runs(where, name: str, values: pa.Array, file_starts: np.ndarray) -> np.ndarray:
    """A block-level column decoded through its runs (a file start always starts a run)."""
    n = len(values)
    change = pc.not_equal(values.slice(1), values.slice(0, n - 1)).to_numpy(zero_copy_only=False)
    starts = np.union1d(np.flatnonzero(change) + 1, file_starts).astype(np.int64)
    heads = values.take(pa.array(starts)).to_pylist()
    return decode_runs(where, name, starts, heads, n)


def ints(where, name: str, values: pa.Array) -> np.ndarray:
    try:
        return pc.cast(values, pa.int64()).to_numpy(zero_copy_only=False)
    except pa.ArrowException:  # spaces, '+5', or the bad row to name
        return _parse_ints(where, name, values.to_pylist(), unquote=False)


def floats(where, name: str, values: pa.Array, strict: bool) -> np.ndarray:
    """float64 (pandas' missing-value tokens are NaN); a free-text column that is not ``strict`` comes back
    as an object array of ``str``, as :func:`.fields._parse_floats` does."""
    try:  # all numbers ('nan' too): one cast
        out = pc.cast(values, pa.float64()).to_numpy(zero_copy_only=False)
    except pa.ArrowException:
        missing = pc.is_in(values, value_set=_NA_VALUES)
        try:
            out = pc.cast(pc.if_else(missing, _NULL_TEXT, values), pa.float64()).to_numpy(zero_copy_only=False)
        except pa.ArrowException:
            return _parse_floats(where, name, values.to_pylist(), strict, unquote=False)
    check_finite(where, name, out, lambda i: values[i].as_py())
    return out


def strings(values: pa.Array) -> np.ndarray:
    return values.to_numpy(zero_copy_only=False).astype(object, copy=False)


def looks_numeric(values: pa.Array) -> bool:
    return _looks_numeric(values.slice(0, 50).to_pylist())
