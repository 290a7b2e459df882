"""Field-level parsing of l2logger ``data-log.tsv`` text: split rows into columns, decode and check each
column, vectorised (block-level string columns are checked through their run heads only).

Every malformed value is one :class:`L2LogError` naming the file, line and column (``where(i, column)``).
"""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np

from owl_eval.errors import MetricInputError
from owl_eval.json_input import RepeatedKey, refuse_repeated_keys
from owl_eval.safe_paths import SAFE_NAME, check_name

_ALLOWED = {
    "block_type": ("train", "test"),
    "block_subtype": ("wake", "sleep"),
    "exp_status": ("complete", "incomplete"),
}
# pandas.read_csv's default missing-value tokens (what l2metrics sees as NaN).
_NA_TOKENS = frozenset(
    {
        "",
        "#N/A",
        "#N/A N/A",
        "#NA",
        "-1.#IND",
        "-1.#QNAN",
        "-NaN",
        "-nan",
        "1.#IND",
        "1.#QNAN",
        "<NA>",
        "N/A",
        "NA",
        "NULL",
        "NaN",
        "None",
        "n/a",
        "nan",
        "null",
    }
)


class L2LogError(MetricInputError):
    """A log that cannot be read or written: names the file, row (1-based line) and column."""


def _split_fields(body: str, names: list[str], nrows: int) -> dict[str, list[str]] | None:
    """Columns of a body of ``nrows`` plain rows (no quoted tab or newline), or None when any row does
    not have exactly ``len(names)`` fields (the csv path then names the row).

    Every newline becomes "newline, tab", so each row's last field ends with the newline: the split is
    right exactly when the last-field positions hold all ``nrows`` newlines (a row with a missing field and
    another with an extra one cannot balance out unnoticed)."""
    ncol = len(names)
    fields = body.replace("\n", "\n\t").split("\t")
    fields.pop()  # the empty string after the last newline
    if len(fields) != nrows * ncol:
        return None
    ends = "".join(fields[ncol - 1 :: ncol])
    if ends.count("\n") != nrows:
        return None
    raw = {name: fields[j::ncol] for j, name in enumerate(names[:-1])}
    raw[names[-1]] = ends.split("\n")[:-1]
    return raw


class _Where:
    def __init__(self, files, fidx, line):
        self.files, self.fidx, self.line = files, fidx, line

    def __call__(self, i: int, column: str) -> str:
        return f"{self.files[self.fidx[i]]} line {self.line[i]}, column {column}"


def _read_file_csv(path, body, names):
    ncol = len(names)
    rows, lines = [], []
    reader = csv.reader(io.StringIO(body), delimiter="\t", quotechar='"')
    last = 1
    try:
        for row in reader:
            lineno = last + 1
            last = 1 + reader.line_num
            if not row:  # pandas skips blank lines
                continue
            if len(row) != ncol:
                raise L2LogError(f"{path} line {lineno}: expected {ncol} tab-separated fields, got {len(row)}")
            rows.append(row)
            lines.append(lineno)
    except csv.Error as exc:  # e.g. a field larger than the csv module's limit
        raise L2LogError(f"{path} line {last + 1}: cannot be split into fields ({exc})") from None
    cols = list(zip(*rows)) if rows else [()] * ncol
    return {n: list(c) for n, c in zip(names, cols)}, np.asarray(lines, dtype=np.int64)


def _unquote(s: str) -> str:
    return s[1:-1].replace('""', '"') if len(s) >= 2 and s[0] == '"' and s[-1] == '"' else s


def _run_starts(values: list, bounds: list[int]) -> np.ndarray:
    """Indices where ``values`` changes; file boundaries ``bounds`` always start a run.

    An l2logger file holds one block, so its block-level columns are nearly always constant: a
    ``list.count`` per file settles that without building per-row arrays.
    """
    if values and values.count(values[0]) == len(values):  # constant over every file (worker, status, ...)
        return np.zeros(1, dtype=np.int64)
    out = []
    for a, b in zip(bounds[:-1], bounds[1:]):
        if a == b:
            continue
        seg = values[a:b]
        out.append(a)
        if seg.count(seg[0]) != b - a:
            arr = np.empty(b - a, dtype=object)
            arr[:] = seg
            out.extend((np.flatnonzero(arr[1:] != arr[:-1]) + 1 + a).tolist())
    return np.asarray(out, dtype=np.int64)


def _parse_runs(where, name, values, bounds):
    """Decode a block-constant column through its run heads only (values change at block boundaries)."""
    starts = _run_starts(values, bounds)
    raw_heads = [values[i] for i in starts.tolist()]
    decoded = {h: _unquote(h) for h in dict.fromkeys(raw_heads)}
    return decode_runs(where, name, starts, [decoded[h] for h in raw_heads], len(values))


def decode_runs(where, name, starts: np.ndarray, heads: list[str], n: int) -> np.ndarray:
    """The ``n`` values of a run-length encoded column from its runs (``starts``, field text ``heads``,
    already unquoted), each distinct head checked once; a bad one is an error naming its first row."""
    lengths = np.diff(np.append(starts, n))
    if name == "block_num":
        out = np.empty(len(heads), dtype=np.int64)
        for k, h in enumerate(heads):  # one per block, not per row
            try:
                out[k] = int(h)
            except (ValueError, OverflowError):
                raise L2LogError(
                    f"{where(starts[k], name)}: expected a non-negative integer below 2**63, got {h[:40]!r}"
                ) from None
        return np.repeat(out, lengths)
    if name == "task_name":
        lowered = {h: h.lower() for h in dict.fromkeys(heads)}
        heads = [lowered[h] for h in heads]
    allowed = _ALLOWED.get(name)
    for h in dict.fromkeys(heads):  # each distinct value once
        problem = None
        if allowed is not None and h not in allowed:
            problem = f"expected one of {list(allowed)}, got {h[:80]!r}"
        elif name in ("worker_id", "task_name"):  # metric keys, artifact and folder names
            if not SAFE_NAME.match(h) or ".." in h:  # check_name's rule; the location is built only here
                check_name(h, what=name.replace("_", " "), where=where(starts[heads.index(h)], name))
        elif name == "task_params" and h != "":
            try:
                json.loads(h, object_pairs_hook=refuse_repeated_keys)
            except RepeatedKey as exc:
                problem = f"task_params: {exc}, got {h[:80]!r}"
            except RecursionError:
                problem = "task_params JSON is nested too deeply to read"
            except ValueError as exc:  # JSONDecodeError, or an integer of more than 4300 digits
                problem = f"task_params must be valid JSON ({exc}), got {h[:80]!r}"
        if problem:
            raise L2LogError(f"{where(starts[heads.index(h)], name)}: {problem}")
    return np.repeat(np.array(heads + [None], dtype=object)[:-1], lengths)


def _parse_ints(where, name, values, unquote=True):
    try:
        return np.fromiter(map(int, values), dtype=np.int64, count=len(values))
    except (ValueError, OverflowError):
        pass
    out = np.empty(len(values), dtype=np.int64)
    for i, v in enumerate(values):  # quoted numbers, or finding the bad row to name it
        try:
            out[i] = int(_unquote(v) if unquote else v)
        except (ValueError, OverflowError):
            raise L2LogError(f"{where(i, name)}: expected a non-negative integer below 2**63, got {v[:40]!r}") from None
    return out


def _parse_floats(where, name, values, strict, unquote=True):
    try:
        out = np.fromiter(map(float, values), dtype=np.float64, count=len(values))
    except ValueError:
        out = _parse_floats_slowly(where, name, values, strict, unquote)
        if out.dtype == object:
            return out
    check_finite(where, name, out, values.__getitem__)
    return out


def check_finite(where, name, out: np.ndarray, text) -> None:
    """inf, -inf, 1e400: one such value wrecks a task's every metric; ``text(i)`` is row i's field text."""
    infinite = np.flatnonzero(np.isinf(out))
    if infinite.size:
        i = int(infinite[0])
        raise L2LogError(
            f"{where(i, name)}: expected a finite number (empty or NaN for a missing value), got {text(i)[:40]!r}"
        )


def _parse_floats_slowly(where, name, values, strict, unquote=True):
    out = np.empty(len(values), dtype=np.float64)
    for i, v in enumerate(values):  # pandas' missing-value tokens, quoted numbers, or the bad row
        v = _unquote(v) if unquote else v
        if v.strip() in _NA_TOKENS:
            out[i] = math.nan
            continue
        try:
            out[i] = float(v)
        except ValueError:
            if strict:
                raise L2LogError(f"{where(i, name)}: expected a number, got {v[:40]!r}") from None
            return _parse_strings(values) if unquote else _object_array(values)  # a free-text extra column
    return out


def _parse_strings(values):
    arr = _object_array(values)
    if '"' in "".join(values):
        arr[:] = [_unquote(v) for v in values]
    return arr


def _object_array(values) -> np.ndarray:
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr


def _looks_numeric(values) -> bool:
    try:
        for v in values[:50]:
            if v.strip() not in _NA_TOKENS:
                float(v)
        return True
    except ValueError:
        return False
