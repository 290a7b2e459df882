"""Strict reading of comma-separated files, with errors that name the file, line and column.

Two readers, both real CSV parsers (RFC 4180 quoting: a quoted field may hold commas, doubled quotes and
line breaks; a UTF-8 byte-order mark, CRLF or CR line ends and blank lines, trailing or not, are accepted):

* :func:`read_rows`: every field as a string (the standard library's :mod:`csv`), for small files and
  files whose columns are not all numbers (ground truth, headers, labels);
* :func:`read_numeric_rows`: one string column (sample ids) then numbers, parsed column-wise by
  ``pyarrow.csv`` (hundreds of score columns per row, thousands of rows); on anything it does not accept
  it falls back to :func:`read_rows` and :func:`numeric`, which either read the file or name the culprit;
* :func:`float_rows`: a file of numbers only, column-wise by ``pyarrow.csv``, or None (the caller falls back).

A table read as text is at most :data:`MAX_TEXT_BYTES` (1 GiB) as one fixed-width array (every cell as wide as
the longest field: one 100,000-character field in a 2 MB file of a million cells would need 400 GB), and at most
:data:`MAX_COLUMNS` (100,000) fields wide, checked on its first line before any parser
sees the file (:func:`check_width`): a 4 MB file of a million columns costs a column-wise parser minutes and
gigabytes, so it is one error naming the file and the count instead.

Row numbers in messages are 1-based physical lines of the file as an editor shows them (a header, blank
lines and the line breaks inside quoted fields counted; a row that spans lines is named by its first), so
a user can go straight to the line.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from owl_eval.errors import SourceFormatError
from owl_eval.safe_paths import decode_utf8, read_text

MAX_COLUMNS = 100_000  # the widest table read; results files have hundreds of columns, data sets thousands
MAX_TEXT_BYTES = 1 << 30  # the most a table of text fields may take as one fixed-width array (see read_rows)


def check_width(
    path,
    data: bytes | str,
    *,
    delimiter: str = ",",
    quote_char: str = '"',
    error: Callable[[str], Exception] = SourceFormatError,
) -> None:
    """Refuse a table whose first line holds more than :data:`MAX_COLUMNS` fields, before it is parsed: one
    ``error`` naming the file and the count. The delimiters of the first line are counted (an upper bound);
    only a line over the limit that holds a quote is parsed to count its fields exactly."""
    if isinstance(data, bytes):
        end = data.find(b"\n")
        data = (data if end < 0 else data[:end]).decode("utf-8", "replace")  # counting only: the reader decodes
    end = data.find("\n")
    first = data if end < 0 else data[:end]
    count = first.count(delimiter) + 1
    if count > MAX_COLUMNS and quote_char in first:
        count = len(next(csv.reader([first], delimiter=delimiter, quotechar=quote_char), []))
    if count <= MAX_COLUMNS:
        return
    raise error(
        f"{path}: the first row holds {count} fields, more than the {MAX_COLUMNS} columns a table may have; "
        "expected a table with one column per value (is the file transposed, or not a table?)"
    )


@dataclass
class Table:
    """``fields[rows, width]`` strings; ``line_numbers[rows]`` the 1-based line of each row in the file."""

    header: list[str] | None
    fields: np.ndarray
    line_numbers: np.ndarray


def records(path: Path, text: str, quote_char: str = '"'):
    """``(first line, fields)`` of every record of ``text`` (a BOM dropped), blank lines skipped; a quote that
    is not closed, or a character after a closing quote, is one error naming the line."""
    reader = csv.reader(io.StringIO(text.removeprefix("\ufeff"), newline=""), strict=True, quotechar=quote_char)
    q = quote_char
    line = 0
    while True:
        start = line + 1
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            if "end of data" in str(exc):
                raise SourceFormatError(
                    f"{path}, row {start}: a field quoted with {q} on this row is not closed before the end of the "
                    f"file (expected a closing {q}; a {q} inside a quoted field is written twice: {q}{q})"
                ) from None
            if "expected after" in str(exc):
                raise SourceFormatError(
                    f"{path}, row {start}: expected a ',' or the end of the line after a closing {q} ({exc}); "
                    f"quote the whole field and write a {q} inside it twice"
                ) from None
            hint = f" (a {q} that opens a quoted field and is never closed?)" if "field limit" in str(exc) else ""
            raise SourceFormatError(f"{path}, row {start}: not readable as CSV: {exc}{hint}") from None
        line = reader.line_num
        if any(f.strip() for f in row):
            yield start, row


def read_rows(
    path: Path,
    *,
    skip_header: bool,
    min_width: int = 1,
    text: str | None = None,
    quote_char: str = '"',
    quote_key: str | None = None,
) -> Table:
    """A :class:`Table` of a comma-separated file, every field a string (stripped of surrounding spaces
    where it is compared or parsed, not here).

    ``text``: the file's content when the caller already read it (the link-free reading of a user folder,
    :func:`owl_eval.safe_paths.read_text`); otherwise the file the user named is read here (a link given as
    the path itself is followed, as the user chose it; non-UTF-8 text is one error naming file and line).
    Every row must have the same number of fields; blank lines are ignored. A ragged row or a broken quote is
    one clear error naming the file and the line. ``quote_char`` quotes fields (sail-on-client's files use ``|``);
    ``quote_key``, the setting that chooses it, is named when a ragged row holds the other usual quote.
    """
    if text is None:
        path = Path(path)
        if not path.is_file():
            raise SourceFormatError(f"{path}: file not found")
        text = read_text(path.resolve(), what="file")
    check_width(path, text.removeprefix("\ufeff").lstrip("\r\n"), quote_char=quote_char)
    rows = records(path, text, quote_char)
    header = None
    if skip_header:
        first = next(rows, None)
        if first is None:
            raise SourceFormatError(f"{path}: empty file, expected a header row")
        header = [h.strip() for h in first[1]]
    lines, fields = [], []
    width = len(header) if header is not None else None
    expected_from = "the header" if header is not None else None
    for line, row in rows:
        if width is None:
            width, expected_from = len(row), f"row {line}"
        if len(row) != width:
            other = '"' if quote_char != '"' else "|"
            hint = (
                f" (the row holds {other}, which is not the quote character here ({quote_char}): if it quotes fields, "
                f"set {quote_key}={other!r})"
                if quote_key and any(other in f for f in row)
                else ""
            )
            raise SourceFormatError(
                f"{path}, row {line}: expected {width} comma-separated fields (as {expected_from}), got {len(row)}"
                + hint
            )
        lines.append(line)
        fields.append(row)
    width = width if width is not None else min_width
    if width < min_width:
        first = lines[0] if lines else (2 if header is not None else 1)
        raise SourceFormatError(f"{path}, row {first}: expected {min_width} comma-separated fields, got {width}")
    _check_text_size(path, fields, lines)
    table = np.array(fields, dtype=str).reshape(len(fields), width) if fields else np.zeros((0, width), str)
    return Table(header=header, fields=table, line_numbers=np.array(lines, dtype=np.int64))


def _check_text_size(path: Path, fields: list[list[str]], lines: list[int]) -> None:
    """The fields become one fixed-width text array, every cell as wide as the longest field (4 bytes a
    character): one long field in a wide file would need terabytes. Over :data:`MAX_TEXT_BYTES` it is one error
    naming the row and column of the longest field and the bytes the table would need."""
    if not fields:
        return
    lengths = [max(map(len, row), default=0) for row in fields]
    longest = max(lengths)
    need = len(fields) * len(fields[0]) * longest * 4
    if need <= MAX_TEXT_BYTES:
        return
    i = lengths.index(longest)
    j = [len(f) for f in fields[i]].index(longest)
    raise SourceFormatError(
        f"{path}, row {lines[i]}, column {j + 1}: a field of {longest} characters; with {len(fields)} rows of "
        f"{len(fields[0])} fields the table would need {need} bytes as text (more than {MAX_TEXT_BYTES}); "
        "expected short fields (ids, numbers, names)"
    )


@dataclass
class NumericTable:
    """A headerless file of rows ``id,v_1,...,v_m``: ``ids[rows]`` (stripped strings) and ``values[rows, m]``.

    ``line_numbers`` (the 1-based line of each row) is worked out only when asked for, i.e. for a message.
    """

    path: Path
    ids: np.ndarray
    values: np.ndarray
    text: str | bytes = field(repr=False)
    quote_char: str = '"'
    _lines: np.ndarray | None = field(default=None, repr=False)

    @property
    def line_numbers(self) -> np.ndarray:
        if self._lines is None:
            text = self.text if isinstance(self.text, str) else self.text.decode("utf-8")
            self._lines = np.array([line for line, _ in records(self.path, text, self.quote_char)], dtype=np.int64)
        return self._lines


_NO_NULLS = dict(null_values=[], strings_can_be_null=False, quoted_strings_can_be_null=False)
# Larger blocks than pyarrow's 1 MB: a result file is a few MB of 400+ columns, where each block's per-column
# work costs more than the parallel split gains on a few cores.
_BLOCK_SIZE = 1 << 22


def _column_types(data: bytes, quote_char: str) -> dict:
    """``f0`` (the id) as text, and the value columns as float64 when the first line tells how many there are
    (no quote in it): type inference over 400+ columns is most of pyarrow's time. A column that is not a
    number still fails the fast read, and the row reader names it."""
    first = data[: data.find(b"\n")] if b"\n" in data else data
    if quote_char.encode() in first:
        return {"f0": pa.string()}
    return {"f0": pa.string(), **{f"f{j}": pa.float64() for j in range(1, first.count(b",") + 1)}}


def read_numeric_rows(
    path: Path,
    data: bytes,
    *,
    min_width: int,
    name: Callable[[int], str] = "v_{}".format,
    quote_char: str = '"',
    quote_key: str | None = None,
) -> NumericTable:
    """The rows ``id,v_1,...,v_m`` of ``data`` (the bytes of ``path``, read link-free by the caller).

    The fast path is ``pyarrow.csv`` (multi-threaded, column-wise); a file it cannot read as one string column
    then numbers (a ragged row, a field that is not a number, text that is not UTF-8, a whitespace-only line)
    is read again by :func:`read_rows` and :func:`numeric`, which accept what is right and name the line
    and column of what is not. NaN is left in ``values`` (the caller decides); ``name(j)`` is the name of
    value column ``j`` (0-based) in messages. Fewer than ``min_width`` fields is an error.
    """
    check_width(path, data.lstrip(b"\r\n"), quote_char=quote_char)
    values, ids = None, None
    if data and not data.isspace():
        try:
            table = pacsv.read_csv(
                pa.BufferReader(data),
                read_options=pacsv.ReadOptions(autogenerate_column_names=True, block_size=_BLOCK_SIZE),
                # without a quote in the file no field can hold a line break: the faster parallel split is safe
                parse_options=pacsv.ParseOptions(quote_char=quote_char, newlines_in_values=quote_char.encode() in data),
                convert_options=pacsv.ConvertOptions(column_types=_column_types(data, quote_char), **_NO_NULLS),
            )
        except (pa.ArrowInvalid, UnicodeDecodeError):
            table = None
        if (
            table is not None
            and table.num_columns >= min_width
            and all(pa.types.is_floating(t) or pa.types.is_integer(t) for t in table.schema.types[1:])
        ):
            values = np.empty((table.num_rows, table.num_columns - 1), np.float64)
            for j, column in enumerate(table.columns[1:]):
                values[:, j] = column.to_numpy()
            ids = np.char.strip(table.column(0).to_numpy(zero_copy_only=False).astype(str))
    if values is not None and ids is not None:  # set together
        return NumericTable(path=path, ids=ids, values=values, text=data, quote_char=quote_char)
    text = _decode(path, data)
    rows = read_rows(
        path, skip_header=False, min_width=min_width, text=text, quote_char=quote_char, quote_key=quote_key
    )
    width = rows.fields.shape[1]
    values = numeric(
        path,
        rows.fields,
        columns=list(range(1, width)),
        names=[name(j) for j in range(width - 1)],
        first_row_number=1,
        row_numbers=rows.line_numbers,
        allow_nan=True,
    )
    return NumericTable(
        path=path,
        ids=np.char.strip(rows.fields[:, 0]),
        values=values,
        text=text,
        quote_char=quote_char,
        _lines=rows.line_numbers,
    )


def float_rows(data: bytes, *, width: int, skip_rows: int = 0) -> np.ndarray | None:
    """``float64 [rows, width]`` of ``data`` (CSV bytes, ``skip_rows`` lines skipped first) read column-wise by
    ``pyarrow.csv``, without a Python object per value; None when pyarrow does not read every field of it as a
    number (a ragged or whitespace-only row, an empty field, ``1_0``): the caller then reads it with
    :func:`read_rows` and :func:`numeric`, which name what is wrong. Whatever both read, both read alike
    (correctly rounded); NaN and inf are left in the values (the caller decides). Wider than :data:`MAX_COLUMNS`:
    None, before pyarrow sees it (the row reader then names the file and the count)."""
    if width > MAX_COLUMNS:
        return None
    try:
        table = pacsv.read_csv(
            pa.BufferReader(data),
            read_options=pacsv.ReadOptions(autogenerate_column_names=True, skip_rows=skip_rows, block_size=_BLOCK_SIZE),
            convert_options=pacsv.ConvertOptions(
                column_types={f"f{j}": pa.float64() for j in range(width)}, **_NO_NULLS
            ),
        )
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return None
    if table.num_columns != width or not all(pa.types.is_float64(t) for t in table.schema.types):
        return None
    values = np.empty((table.num_rows, width), np.float64)
    for j, column in enumerate(table.columns):
        values[:, j] = column.to_numpy()
    return values


def _decode(path: Path, data: bytes) -> str:
    return decode_utf8(path, data, error=SourceFormatError)


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
