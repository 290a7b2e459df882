"""Reading and writing the l2logger 1.1 log layout (what l2metrics 3.1 reads), as columnar numpy arrays.

Layout (l2logger ``DataLogger``)::

    <base>/<scenario>-<timestamp>/logger_info.json     {"metrics_columns": [...], "log_format_version": "1.1"}
    <base>/<scenario>-<timestamp>/scenario_info.json
    <base>/<scenario>-<timestamp>/<worker_id>/<block_num>-<block_type>/data-log.tsv

``data-log.tsv``: tab separated, quote char ``"``, header row, the nine standard columns in l2logger order
then the extra columns sorted by name. Readers find files by a recursive search; directory names carry no
meaning on read.

Parsing is vectorised: a file is split once into fields, string columns are run-length encoded (their
values change only at block boundaries) so that only run heads are decoded, validated and lower-cased.
"""
from __future__ import annotations

import csv
import io
import os
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from metrics.validation import MetricInputError

STANDARD_COLUMNS = (
    "block_num", "exp_num", "worker_id", "block_type", "block_subtype",
    "task_name", "task_params", "exp_status", "timestamp",
)
INT_COLUMNS = ("block_num", "exp_num")
STRING_COLUMNS = STANDARD_COLUMNS[2:]
# Columns whose values change only at block boundaries: run-length encoded on read.
_RUN_COLUMNS = ("block_num", "worker_id", "block_type", "block_subtype", "task_name", "task_params", "exp_status")
_REQUIRED = ("block_num", "exp_num", "worker_id", "block_type", "task_name", "task_params", "exp_status", "timestamp")
LOG_FORMAT_VERSION = "1.1"
TIMESTAMP_FORMAT = "%Y%m%dT%H%M%S.%f"
_WORKER_RE = re.compile(r"[0-9a-zA-Z_\-.]+")
_ALLOWED = {
    "block_type": ("train", "test"),
    "block_subtype": ("wake", "sleep"),
    "exp_status": ("complete", "incomplete"),
}
# pandas.read_csv's default missing-value tokens (what l2metrics sees as NaN).
_NA_TOKENS = frozenset({
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
    "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null",
})


class L2LogError(MetricInputError):
    """A log that cannot be read or written: names the file, row (1-based line) and column."""


@dataclass
class EpisodeLog:
    """One row per episode, one numpy array per column (l2logger's ``data-log.tsv`` columns).

    ``block_num``/``exp_num`` are int64, string columns are object arrays of ``str`` (``task_params`` holds
    JSON text), metric columns are float64. ``metrics_columns`` names the performance columns (from
    ``logger_info.json``).
    """

    columns: dict[str, np.ndarray]
    metrics_columns: tuple[str, ...] = ("reward",)
    logger_info: dict = field(default_factory=dict)
    scenario_info: dict = field(default_factory=dict)
    source: str | None = None
    # (file paths, file index per row, 1-based line per row): lets errors name the file and row.
    origin: tuple | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        self.metrics_columns = tuple(self.metrics_columns)
        cols = {}
        n = None
        for name, values in self.columns.items():
            if name in INT_COLUMNS:
                arr = np.asarray(values, dtype=np.int64)
            elif name in STRING_COLUMNS:
                arr = _as_str_array(values)
            elif name in self.metrics_columns:
                arr = np.asarray(values, dtype=np.float64)
            else:
                arr = np.asarray(values)
                if arr.dtype.kind in "US":
                    arr = _as_str_array(values)
            if arr.ndim != 1:
                raise L2LogError(f"column {name!r}: expected a 1-D array, got shape {arr.shape}")
            if n is None:
                n = len(arr)
            elif len(arr) != n:
                raise L2LogError(f"column {name!r}: length {len(arr)} differs from the other columns ({n})")
            cols[name] = arr
        n = n or 0
        if "block_subtype" not in cols:  # l2metrics' default for logs that predate block_subtype
            cols["block_subtype"] = np.full(n, "wake", dtype=object)
        missing = [c for c in _REQUIRED + self.metrics_columns if c not in cols]
        if missing:
            raise L2LogError(f"EpisodeLog is missing column(s) {missing}; has {sorted(cols)}")
        self.columns = cols

    @classmethod
    def from_columns(cls, *, block_num, exp_num=None, block_type, task_name, task_params="{}",
                     worker_id="worker-default", block_subtype="wake", exp_status="complete",
                     timestamp=None, metrics_columns=None, scenario_info=None, **metric_columns) -> "EpisodeLog":
        """Build a log from arrays, filling l2logger's defaults for the columns not given (scalars broadcast)."""
        block_num = np.asarray(block_num, dtype=np.int64)
        n = len(block_num)
        exp_num = np.arange(n, dtype=np.int64) if exp_num is None else exp_num
        if timestamp is None:
            timestamp = [f"19700101T000000.{i % 1000000:06d}" for i in range(n)]
        cols = {"block_num": block_num, "exp_num": exp_num}
        for name, value in (("worker_id", worker_id), ("block_type", block_type), ("block_subtype", block_subtype),
                            ("task_name", task_name), ("task_params", task_params), ("exp_status", exp_status),
                            ("timestamp", timestamp)):
            if isinstance(value, dict):
                value = json.dumps(value)
            cols[name] = np.full(n, value, dtype=object) if isinstance(value, str) else value
        for name in sorted(metric_columns):
            cols[name] = metric_columns[name]
        mc = tuple(metrics_columns) if metrics_columns is not None else tuple(sorted(metric_columns)) or ("reward",)
        return cls(cols, metrics_columns=mc, scenario_info=dict(scenario_info or {}))

    def __len__(self) -> int:
        return len(self.columns["exp_num"])

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    @property
    def extra_columns(self) -> list[str]:
        """Non-standard columns in l2logger's file order (sorted by name)."""
        return sorted(c for c in self.columns if c not in STANDARD_COLUMNS)

    def take(self, index) -> "EpisodeLog":
        """Rows selected by a boolean mask or an index array (a new log sharing nothing with this one)."""
        origin = None
        if self.origin is not None:
            origin = (self.origin[0], self.origin[1][index], self.origin[2][index])
        return EpisodeLog({k: v[index] for k, v in self.columns.items()}, self.metrics_columns,
                          dict(self.logger_info), dict(self.scenario_info), self.source, origin)

    def where(self, i: int) -> str:
        """Human-readable location of row ``i`` ("file line N" when read from disk, else "row i")."""
        if self.origin is None:
            return f"row {i}"
        files, fidx, line = self.origin
        return f"{files[fidx[i]]} line {line[i]}"


# --------------------------------------------------------------------------------------------- reading

def read_log(log_dir, *, perf_measure: str | None = "reward", raw: bool = False,
             columns: list[str] | None = None) -> EpisodeLog:
    """Read every ``data-log.tsv`` under ``log_dir`` into one :class:`EpisodeLog`.

    Mirrors ``l2logger.util.read_log_data`` + ``validate_log`` and l2metrics' ``MetricsReport`` filtering:
    rows sorted by (exp_num, block_num) (stable), task names lower-cased, ``block_subtype`` defaults to
    ``wake``; unless ``raw``, only ``exp_status == complete`` rows are kept and rows whose ``perf_measure``
    is NaN are dropped. ``columns`` limits the non-standard columns parsed (default: all). ``logger_info.json`` and ``scenario_info.json`` are read when present.
    Raises :class:`L2LogError` naming file, line and column for malformed input.
    """
    root = Path(log_dir)
    if not root.is_dir():
        raise L2LogError(f"log directory not found: {root}")
    logger_info = _read_json(root / "logger_info.json")
    scenario_info = _read_json(root / "scenario_info.json")
    # natural order (worker, then block number): l2logger layouts then come out already sorted by exp_num
    files = sorted((os.path.join(d, "data-log.tsv") for d, _, names in os.walk(root) if "data-log.tsv" in names),
                   key=_natural_key)
    if not files:
        raise L2LogError(f"no data-log.tsv found under {root}")
    metrics_columns = logger_info.get("metrics_columns")
    wanted = None if columns is None else set(columns) | ({perf_measure} if perf_measure else set())
    columns, fidx, line = _read_files(files, metrics_columns, wanted)
    names = list(columns)
    if metrics_columns is not None and wanted is not None:
        metrics_columns = [m for m in metrics_columns if m in columns]
    if metrics_columns is None:  # no logger_info.json: every extra float column counts as a metric
        metrics_columns = [c for c in names if c not in STANDARD_COLUMNS and columns[c].dtype.kind == "f"]
    log = EpisodeLog(columns, tuple(metrics_columns), logger_info, scenario_info, str(root),
                     (tuple(files), fidx, line))
    e, b = log["exp_num"], log["block_num"]
    if np.any((e[1:] < e[:-1]) | ((e[1:] == e[:-1]) & (b[1:] < b[:-1]))):
        log = log.take(np.lexsort((b, e)))  # l2logger.util.read_log_data: sort by exp_num, block_num
    _validate_order(log)
    if raw:
        return log
    keep = log["exp_status"] == "complete"
    if perf_measure is not None:
        if perf_measure not in log.columns:
            raise L2LogError(f"{root}: performance column {perf_measure!r} not in the log's columns {sorted(log.columns)}")
        keep &= ~np.isnan(log[perf_measure].astype(np.float64))
    return log if keep.all() else log.take(keep)


def _natural_key(path: str):
    return [int(t) if t.isdigit() else t for t in _DIGITS.split(path)]


_DIGITS = re.compile(r"(\d+)")


def _read_json(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise L2LogError(f"{path}: not valid JSON ({exc})") from None


def _read_text(path: Path):
    with open(path, encoding="utf-8", newline="") as fh:
        text = fh.read()
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    header, _, body = text.partition("\n")
    if body and not body.endswith("\n"):
        body += "\n"
    return header, body


def _read_files(files, metrics_columns, wanted=None):
    """Parse all data-log.tsv files; files with the same header are parsed as one text (no per-file cost)."""
    texts = [_read_text(p) for p in files]
    header = texts[0][0]
    names = [_unquote(h) for h in header.split("\t")]
    missing = [c for c in _REQUIRED if c not in names]
    if missing:
        raise L2LogError(f"{files[0]} line 1: missing column(s) {missing}; header has {names}")
    if len(set(names)) != len(names):
        raise L2LogError(f"{files[0]} line 1: duplicate column names in header {names}")
    for p, (h, _) in zip(files, texts):
        if h != header:
            other = [_unquote(x) for x in h.split("\t")]
            raise L2LogError(f"{p} line 1: columns {other} differ from {files[0]}'s {names}")
    ncol = len(names)
    counts = np.array([b.count("\n") for _, b in texts], dtype=np.int64)
    body = "".join(b for _, b in texts)
    fields = body.replace("\n", "\t").split("\t")
    fields.pop()
    if len(fields) == int(counts.sum()) * ncol:
        raw = {name: fields[j::ncol] for j, name in enumerate(names)}
        fidx = np.repeat(np.arange(len(files), dtype=np.int32), counts)
        starts = np.cumsum(counts) - counts
        line = np.arange(len(fidx), dtype=np.int64) - np.repeat(starts, counts) + 2
    else:  # quoted tabs/newlines, blank lines or malformed rows: the csv module finds which
        del fields
        raw = {n: [] for n in names}
        fl, ll = [], []
        for i, (p, (_, b)) in enumerate(zip(files, texts)):
            r, ln = _read_file_csv(p, b, names)
            for n in names:
                raw[n].extend(r[n])
            fl.append(np.full(len(ln), i, dtype=np.int32))
            ll.append(ln)
        fidx, line = np.concatenate(fl), np.concatenate(ll)
    where = _Where(files, fidx, line)
    bounds = np.concatenate(([0], np.cumsum(np.bincount(fidx, minlength=len(files))))).tolist()
    cols = {}
    for name in names:
        if wanted is not None and name not in STANDARD_COLUMNS and name not in wanted:
            continue
        values = raw[name]
        if name in _RUN_COLUMNS:
            cols[name] = _parse_runs(where, name, values, bounds)
        elif name == "exp_num":
            cols[name] = _parse_ints(where, name, values)
        elif name == "timestamp" or (name not in STANDARD_COLUMNS and metrics_columns is not None
                                     and name not in metrics_columns and not _looks_numeric(values)):
            cols[name] = _parse_strings(values)
        else:
            cols[name] = _parse_floats(where, name, values, strict=metrics_columns is not None
                                       and name in metrics_columns)
    return cols, fidx, line


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
    for row in reader:
        lineno = last + 1
        last = 1 + reader.line_num
        if not row:  # pandas skips blank lines
            continue
        if len(row) != ncol:
            raise L2LogError(f"{path} line {lineno}: expected {ncol} tab-separated fields, got {len(row)}")
        rows.append(row)
        lines.append(lineno)
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
    n = len(values)
    starts = _run_starts(values, bounds)
    raw_heads = [values[i] for i in starts.tolist()]
    decoded = {h: _unquote(h) for h in dict.fromkeys(raw_heads)}
    heads = [decoded[h] for h in raw_heads]
    lengths = np.diff(np.append(starts, n))
    if name == "block_num":
        out = np.empty(len(heads), dtype=np.int64)
        for k, h in enumerate(heads):
            try:
                out[k] = int(h)
            except ValueError:
                raise L2LogError(f"{where(starts[k], name)}: expected a non-negative integer, got {h!r}") from None
        return np.repeat(out, lengths)
    if name == "task_name":
        lowered = {h: h.lower() for h in dict.fromkeys(heads)}
        heads = [lowered[h] for h in heads]
    allowed = _ALLOWED.get(name)
    for k, h in enumerate(dict.fromkeys(heads)):  # each distinct value once
        problem = None
        if allowed is not None and h not in allowed:
            problem = f"expected one of {list(allowed)}, got {h!r}"
        elif name == "worker_id" and not _WORKER_RE.fullmatch(h):
            problem = f"worker_id may hold only letters, digits, '_', '-', '.', got {h!r}"
        elif name == "task_name" and h == "":
            problem = "empty task name"
        elif name == "task_params" and h != "":
            try:
                json.loads(h)
            except json.JSONDecodeError as exc:
                problem = f"task_params must be valid JSON ({exc}), got {h!r}"
        if problem:
            raise L2LogError(f"{where(starts[heads.index(h)], name)}: {problem}")
    return np.repeat(np.array(heads + [None], dtype=object)[:-1], lengths)


def _parse_ints(where, name, values):
    try:
        return np.fromiter(map(int, values), dtype=np.int64, count=len(values))
    except ValueError:
        for i, v in enumerate(values):
            try:
                int(_unquote(v))
            except ValueError:
                raise L2LogError(f"{where(i, name)}: expected a non-negative integer, got {v!r}") from None
        return np.fromiter((int(_unquote(v)) for v in values), dtype=np.int64, count=len(values))


def _parse_floats(where, name, values, strict):
    try:
        return np.fromiter(map(float, values), dtype=np.float64, count=len(values))
    except ValueError:
        pass
    out = np.empty(len(values), dtype=np.float64)
    for i, v in enumerate(values):
        v = _unquote(v)
        if v.strip() in _NA_TOKENS:
            out[i] = math.nan
            continue
        try:
            out[i] = float(v)
        except ValueError:
            if strict:
                raise L2LogError(f"{where(i, name)}: expected a number, got {v!r}") from None
            return _parse_strings(values)  # a free-text extra column
    return out


def _parse_strings(values):
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    if '"' in "".join(values):
        arr[:] = [_unquote(v) for v in values]
    return arr


def _looks_numeric(values) -> bool:
    try:
        for v in values[:50]:
            if v.strip() not in _NA_TOKENS:
                float(v)
        return True
    except ValueError:
        return False


def _validate_order(log: EpisodeLog) -> None:
    """l2logger.util.validate_log's numeric checks, naming the file and row of the first offence."""
    for name in ("block_num", "exp_num"):
        v = log[name]
        neg = np.flatnonzero(v < 0)
        if neg.size:
            raise L2LogError(f"{log.where(neg[0])}, column {name}: must be a non-negative integer, got {v[neg[0]]}")
    dec = np.flatnonzero(log["block_num"][1:] < log["block_num"][:-1])
    if dec.size:
        i = dec[0] + 1
        raise L2LogError(f"{log.where(i)}, column block_num: block_num must be non-decreasing in exp_num order "
                         f"(got {log['block_num'][i]} after {log['block_num'][i - 1]})")


def _as_str_array(values) -> np.ndarray:
    if isinstance(values, np.ndarray) and values.dtype == object:
        return values
    arr = np.empty(len(values), dtype=object)
    arr[:] = [str(v) for v in (values.tolist() if isinstance(values, np.ndarray) else values)]
    return arr


# Writing lives in metrics.l2_log_write; re-exported here so callers need one import.
from metrics.l2_log_write import L2Logger, write_log  # noqa: E402,F401
