"""Tables: a ``.parquet`` or ``.csv`` file, read with pyarrow.

The label column is ``label_column`` if given, else ``labels`` (default ``y``; ``label`` when there is no ``y``).
A split column (``split_column``, or a column named ``split``) gives the splits. Every other column is a feature
and must hold numbers: the features are ``[N, F]``, float32 when every feature column is float32 (uint8 when every
one is uint8), float64 otherwise.

A table wider than :data:`~owl_eval.formats.csv_table.MAX_COLUMNS` (100,000) columns is refused before it is
parsed (a CSV's first line, a parquet file's schema), naming the file and the count.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from owl_eval.datasets.base import DataSet, Digest, fail, make_dataset, text
from owl_eval.errors import ConfigError
from owl_eval.formats.csv_table import MAX_COLUMNS, check_width


def _duplicates(names: list[str], where: str) -> None:
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise fail(f"{where}: column {dup[0]!r} appears twice; expected distinct column names")


def _first_line(path: Path) -> bytes:
    """The file's first line (a UTF-8 byte-order mark and leading blank lines dropped), read in blocks up to its
    end only: the width check needs no more of the file."""
    blocks: list[bytes] = []
    with open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            if not blocks:
                block = block.removeprefix(b"\xef\xbb\xbf").lstrip(b"\r\n")
                if not block:
                    continue
            end = block.find(b"\n")
            blocks.append(block if end < 0 else block[:end])
            if end >= 0:
                break
    return b"".join(blocks)


def _read(path: Path, fmt: str) -> pa.Table:
    try:
        if fmt == "parquet":
            schema = pq.read_schema(path)
            if len(schema.names) > MAX_COLUMNS:
                raise fail(
                    f"{path}: {len(schema.names)} columns, more than the {MAX_COLUMNS} a table may have; "
                    "expected one column per feature (is the table transposed?)"
                )
            _duplicates(list(schema.names), str(path))
            return pq.ParquetFile(path).read()
        check_width(path, _first_line(path), error=fail)  # before pyarrow's per-column work on each column
        table = pacsv.read_csv(path)
    except ConfigError:
        raise
    except (pa.ArrowException, OSError, ValueError):
        raise fail(
            f"{path}: not a readable {fmt} table (damaged, truncated or malformed); expected a {fmt} file"
        ) from None
    _duplicates(table.column_names, str(path))
    return table


def _label_name(names: list[str], labels: str, label_column: str | None, where: str) -> str:
    if label_column is not None:
        wanted = label_column
    elif labels in names:
        wanted = labels
    elif labels == "y" and "label" in names:
        wanted = "label"
    else:
        wanted = labels
    if wanted not in names:
        raise fail(f"{where}: label column {wanted!r} not found; the columns are {names[:30]}")
    return wanted


def table_columns_to_features(table: pa.Table, columns: list[str], where: str) -> np.ndarray:
    """Numeric columns as one ``[N, F]`` array (float32 if all are float32, uint8 if all uint8, else float64)."""
    if not columns:
        raise fail(f"{where}: no feature columns; expected numeric columns beside the labels")
    arrays = []
    for name in columns:
        col = table.column(name)
        if not (pa.types.is_integer(col.type) or pa.types.is_floating(col.type) or pa.types.is_boolean(col.type)):
            raise fail(f"{where}: column {name!r} has type {col.type}; expected numbers in feature columns")
        if col.null_count:
            raise fail(f"{where}: column {name!r} has {col.null_count} missing values; expected a value in every row")
        arrays.append(col.to_numpy())
    dtypes = {a.dtype for a in arrays}
    dtype = dtypes.pop() if len(dtypes) == 1 and dtypes <= {np.dtype(np.float32), np.dtype(np.uint8)} else None
    out = np.empty((table.num_rows, len(arrays)), dtype=dtype or np.float64)
    for j, a in enumerate(arrays):
        out[:, j] = a
    return out


def label_values(column: pa.ChunkedArray, name: str, where: str) -> np.ndarray:
    if column.null_count:
        raise fail(f"{where}: label column {name!r} has {column.null_count} missing values; expected a label per row")
    if pa.types.is_integer(column.type):
        return column.to_numpy()
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        return np.array(column.to_pylist(), dtype=str)
    if pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type):
        return np.array([text(v, where=f"{where}: column {name!r}") for v in column.to_pylist()], dtype=str)
    raise fail(f"{where}: label column {name!r} has type {column.type}; expected integer class ids or class names")


def split_table(
    table: pa.Table, *, where: str, labels: str, label_column: str | None, split_column: str | None, exclude=()
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Features and labels by split of a table whose columns are scalar features, labels and maybe a split."""
    names = [n for n in table.column_names if n not in exclude]
    label = _label_name(names, labels, label_column, where)
    if table.num_rows == 0:
        raise fail(f"{where}: the data set holds no samples (no rows); expected at least one")
    if split_column is not None and split_column not in names:
        raise fail(f"{where}: split column {split_column!r} not found; the columns are {names[:30]}")
    split = split_column or ("split" if "split" in names and label != "split" else None)
    features = table_columns_to_features(table, [n for n in names if n not in (label, split)], where)
    y = label_values(table.column(label), label, where)
    if split is None:
        return {"all": features}, {"all": y}
    values = table.column(split)
    if values.null_count:
        raise fail(f"{where}: split column {split!r} has {values.null_count} missing values; expected a split per row")
    which = np.array([text(v, where=f"{where}: split column {split!r}") for v in values.to_pylist()], dtype=str)
    order = list(dict.fromkeys(which.tolist()))
    feats, labs = {}, {}
    for s in order:
        rows = np.flatnonzero(which == s)
        feats[s], labs[s] = features[rows], y[rows]
    return feats, labs


def read_table(path: Path, *, fmt: str, labels: str, label_column: str | None, split_column: str | None) -> DataSet:
    """A ``.parquet`` or ``.csv`` table as a :class:`DataSet`."""
    digest = Digest(path)
    digest.add(path)
    table = _read(path, fmt)
    feats, labs = split_table(
        table, where=str(path), labels=labels, label_column=label_column, split_column=split_column
    )
    return make_dataset(path=path, fmt=fmt, features=feats, labels=labs, digest=digest)
