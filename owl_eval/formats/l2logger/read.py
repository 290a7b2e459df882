"""Reading the l2logger 1.1 log layout (what l2metrics 3.1 reads), as columnar numpy arrays.

Layout (l2logger ``DataLogger``)::

    <base>/<scenario>-<timestamp>/logger_info.json     {"metrics_columns": [...], "log_format_version": "1.1"}
    <base>/<scenario>-<timestamp>/scenario_info.json
    <base>/<scenario>-<timestamp>/<worker_id>/<block_num>-<block_type>/data-log.tsv

``data-log.tsv``: tab separated, quote char ``"``, header row, the nine standard columns in l2logger order
then the extra columns sorted by name. Readers find files by a recursive search; directory names carry no
meaning on read.

Parsing is column-wise: the bodies of all files are parsed as one text by ``pyarrow.csv``
(:mod:`.columnar`), numbers are converted per column, and block-level string columns are run-length
encoded (their values change only at block boundaries) so that only run heads are decoded, validated
and lower-cased. Files whose rows do not map one-to-one to lines (a blank line, a newline inside quotes,
a malformed row) are read by the ``csv`` module instead, which names the bad line.

The folder is user data: it is listed without following links (a link or a link loop is one error, see
:mod:`owl_eval.safe_paths`), every folder, worker and task name must be a safe name (they become artifact
paths and metric keys), and every malformed value is one :class:`L2LogError` naming the file, line and
column. The log remembers exactly which files it parsed (``EpisodeLog.files``): only those are ever copied.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from owl_eval.formats.csv_table import MAX_COLUMNS
from owl_eval.formats.l2logger import columnar
from owl_eval.formats.l2logger.fields import (  # noqa: F401
    _ALLOWED,
    L2LogError,
    _looks_numeric,
    _parse_floats,
    _parse_ints,
    _parse_runs,
    _parse_strings,
    _read_file_csv,
    _split_fields,
    _unquote,
    _Where,
)
from owl_eval.json_input import parse_json
from owl_eval.safe_paths import check_name, decode_utf8, list_tree, read_bytes, read_text

STANDARD_COLUMNS = (
    "block_num",
    "exp_num",
    "worker_id",
    "block_type",
    "block_subtype",
    "task_name",
    "task_params",
    "exp_status",
    "timestamp",
)
INT_COLUMNS = ("block_num", "exp_num")
STRING_COLUMNS = STANDARD_COLUMNS[2:]
# Columns whose values change only at block boundaries: run-length encoded on read.
_RUN_COLUMNS = ("block_num", "worker_id", "block_type", "block_subtype", "task_name", "task_params", "exp_status")
_REQUIRED = ("block_num", "exp_num", "worker_id", "block_type", "task_name", "task_params", "exp_status", "timestamp")
LOG_FORMAT_VERSION = "1.1"
TIMESTAMP_FORMAT = "%Y%m%dT%H%M%S.%f"
DATA_FILE = "data-log.tsv"
INFO_FILES = ("logger_info.json", "scenario_info.json")


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
    # Every file the reader parsed (info JSONs and data files, under ``source``): what a record copies.
    files: tuple = field(default=(), repr=False, compare=False)

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
    def from_columns(
        cls,
        *,
        block_num,
        exp_num=None,
        block_type,
        task_name,
        task_params="{}",
        worker_id="worker-default",
        block_subtype="wake",
        exp_status="complete",
        timestamp=None,
        metrics_columns=None,
        scenario_info=None,
        **metric_columns,
    ) -> EpisodeLog:
        """Build a log from arrays, filling l2logger's defaults for the columns not given (scalars broadcast)."""
        block_num = np.asarray(block_num, dtype=np.int64)
        n = len(block_num)
        exp_num = np.arange(n, dtype=np.int64) if exp_num is None else exp_num
        if timestamp is None:
            timestamp = [f"19700101T000000.{i % 1000000:06d}" for i in range(n)]
        cols = {"block_num": block_num, "exp_num": exp_num}
        for name, value in (
            ("worker_id", worker_id),
            ("block_type", block_type),
            ("block_subtype", block_subtype),
            ("task_name", task_name),
            ("task_params", task_params),
            ("exp_status", exp_status),
            ("timestamp", timestamp),
        ):
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

    def take(self, index) -> EpisodeLog:
        """Rows selected by a boolean mask or an index array (a new log sharing nothing with this one)."""
        origin = None
        if self.origin is not None:
            origin = (self.origin[0], self.origin[1][index], self.origin[2][index])
        return EpisodeLog(
            {k: v[index] for k, v in self.columns.items()},
            self.metrics_columns,
            dict(self.logger_info),
            dict(self.scenario_info),
            self.source,
            origin,
            self.files,
        )

    def where(self, i: int) -> str:
        """Human-readable location of row ``i`` ("file line N" when read from disk, else "row i")."""
        if self.origin is None:
            return f"row {i}"
        files, fidx, line = self.origin
        return f"{files[fidx[i]]} line {line[i]}"


# --------------------------------------------------------------------------------------------- reading


def read_log(
    log_dir, *, perf_measure: str | None = "reward", raw: bool = False, columns: list[str] | None = None
) -> EpisodeLog:
    """Read every ``data-log.tsv`` under ``log_dir`` into one :class:`EpisodeLog`.

    Mirrors ``l2logger.util.read_log_data`` + ``validate_log`` and l2metrics' ``MetricsReport`` filtering:
    rows sorted by (exp_num, block_num) (stable), task names lower-cased, ``block_subtype`` defaults to
    ``wake``; unless ``raw``, only ``exp_status == complete`` rows are kept and rows whose ``perf_measure``
    is NaN are dropped. ``columns`` limits the non-standard columns parsed (default: all).
    ``logger_info.json`` and ``scenario_info.json`` are read when present.
    Stricter than l2logger where its leniency corrupts metrics: an infinite number, a duplicated
    ``exp_num``, an unsafe task/worker/folder name or a symbolic link is an error. Raises
    :class:`L2LogError` (or ``owl_eval.errors.UnsafePathError`` for names and links) naming file, line, column.
    """
    root, info, files = _find_files(log_dir)
    logger_info = _read_json(info.get("logger_info.json"))
    scenario_info = _read_json(info.get("scenario_info.json"))
    metrics_columns = _metrics_columns(logger_info, info.get("logger_info.json"))
    wanted = None if columns is None else set(columns) | ({perf_measure} if perf_measure else set())
    numeric = set(metrics_columns or ()) | ({perf_measure} if perf_measure else set())
    columns, fidx, line = _read_files(files, metrics_columns, numeric, wanted)
    names = list(columns)
    if metrics_columns is not None and wanted is not None:
        metrics_columns = [m for m in metrics_columns if m in columns]
    if metrics_columns is None:  # no logger_info.json: every extra float column counts as a metric
        metrics_columns = [c for c in names if c not in STANDARD_COLUMNS and columns[c].dtype.kind == "f"]
    log = EpisodeLog(
        columns,
        tuple(metrics_columns),
        logger_info,
        scenario_info,
        str(root),
        (tuple(map(str, files)), fidx, line),
        tuple(info.values()) + tuple(files),
    )
    e, b = log["exp_num"], log["block_num"]
    if np.any((e[1:] < e[:-1]) | ((e[1:] == e[:-1]) & (b[1:] < b[:-1]))):
        log = log.take(np.lexsort((b, e)))  # l2logger.util.read_log_data: sort by exp_num, block_num
    _validate_order(log)
    if raw:
        return log
    keep = log["exp_status"] == "complete"
    if perf_measure is not None:
        if perf_measure not in log.columns:
            raise L2LogError(
                f"{root}: performance column {perf_measure!r} not in the log's columns {sorted(log.columns)}"
            )
        keep &= ~np.isnan(log[perf_measure].astype(np.float64))
    return log if keep.all() else log.take(keep)


def _find_files(log_dir) -> tuple[Path, dict[str, Path], list[Path]]:
    """(resolved root, info files present, data files in natural order), listed without following links."""
    listing, folders = list_tree(log_dir, what="l2logger log folder")  # a missing folder, a link, a FIFO: one error
    root = Path(log_dir).expanduser().resolve()
    for folder in folders:
        if folder.rsplit("/", 1)[-1] == DATA_FILE:  # a search for files would skip it silently
            raise L2LogError(
                f"{root / folder}: is a directory; expected the tab-separated log file "
                f"<worker>/<block>-<type>/{DATA_FILE}"
            )
    data = {rel: path for rel, path in listing.items() if rel.rsplit("/", 1)[-1] == DATA_FILE}
    if not data:
        empty = " (the folder is empty)" if not listing else ""
        raise L2LogError(f"no {DATA_FILE} found under {root}{empty}; expected <worker>/<block>-<type>/{DATA_FILE}")
    first_file: dict[str, Path] = {}  # folder name -> the first data file under it
    for rel, path in data.items():  # folder names become artifact paths when the log is saved
        for part in rel.split("/")[:-1]:
            first_file.setdefault(part, path)
    for part, path in first_file.items():
        check_name(part, what="folder name", where=str(path))
    # natural order (worker, then block number): l2logger layouts then come out already sorted by exp_num
    files = [data[rel] for rel in sorted(data, key=_natural_key)]
    return root, {name: listing[name] for name in INFO_FILES if name in listing}, files


def _natural_key(path: str):
    return [int(t) if t.isdigit() else t for t in _DIGITS.split(path)]


_DIGITS = re.compile(r"(\d+)")


def _read_json(path: Path | None) -> dict:
    """A JSON object from an info file ({} when absent); anything else is one error naming the file."""
    if path is None:
        return {}
    text = read_text(path, what="l2logger info file").removeprefix("\ufeff")
    return parse_json(text, where=str(path), error=L2LogError, expect_object="l2logger settings")


def _metrics_columns(logger_info: dict, path: Path | None) -> list[str] | None:
    columns = logger_info.get("metrics_columns")
    if columns is None:
        return None
    if not isinstance(columns, list) or not all(isinstance(c, str) and c for c in columns):
        raise L2LogError(f"{path}: metrics_columns: expected a list of column names, got {str(columns)[:80]!r}")
    return columns


def _read_data(path: Path) -> tuple[str, bytes]:
    """(header text, body bytes) of one data file: BOM dropped, line ends ``\n``, the body ends in one."""
    data = read_bytes(path, what="l2logger data file").removeprefix(b"\xef\xbb\xbf")
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    end = data.find(b"\n")
    head, body = (data, b"") if end < 0 else (data[:end], data[end + 1 :])
    try:
        header = head.decode("utf-8")
    except UnicodeDecodeError:
        decode_utf8(path, data)  # raises, naming line 1
    if body and not body.endswith(b"\n"):
        body += b"\n"
    return header, body


def _read_files(files, metrics_columns, numeric, wanted=None):
    """Parse all data-log.tsv files as one column-wise text (:mod:`.columnar`); the csv module reads them
    when rows do not map one-to-one to lines (blank lines, quoted newlines, malformed rows) and names the
    bad line.

    ``numeric``: columns that must hold numbers (the metric columns and the performance column)."""
    loaded = [_read_data(p) for p in files]
    header = loaded[0][0]
    if header.count("\t") >= MAX_COLUMNS:  # before a column-wise parse costs minutes and gigabytes
        raise L2LogError(
            f"{files[0]} line 1: {header.count(chr(9)) + 1} columns, more than the {MAX_COLUMNS} a log may have; "
            "expected the l2logger columns and the metric columns"
        )
    names = [_unquote(h) for h in header.split("\t")]
    shown = names[:30]  # a message quotes the header, not a megabyte of it
    missing = [c for c in _REQUIRED if c not in names]
    if missing:
        raise L2LogError(f"{files[0]} line 1: missing column(s) {missing}; header has {shown}")
    if len(set(names)) != len(names):
        raise L2LogError(f"{files[0]} line 1: duplicate column names in header {shown}")
    missing = [c for c in metrics_columns or () if c not in names]
    if missing:
        raise L2LogError(
            f"{files[0]} line 1: missing column(s) {missing[:30]} that logger_info.json lists in "
            f"metrics_columns; header has {shown}"
        )
    for p, (h, _) in zip(files, loaded):
        if h != header:
            other = [_unquote(x) for x in h.split("\t")][:30]
            raise L2LogError(f"{p} line 1: columns {other} differ from {files[0]}'s {shown}")
    bodies = [b for _, b in loaded]
    split = columnar.split_columns(bodies, names)
    if split is None:
        return _read_bodies_as_text(files, loaded, names, metrics_columns, numeric, wanted)
    arrays, counts = split
    fidx, line = _row_positions(counts)
    where = _Where(files, fidx, line)
    file_starts = (np.cumsum(counts) - counts)[counts > 0]
    cols = {}
    for name in names:
        if wanted is not None and name not in STANDARD_COLUMNS and name not in wanted:
            continue
        values = arrays[name]
        if name in _RUN_COLUMNS:
            cols[name] = columnar.runs(where, name, values, file_starts)
        elif name == "exp_num":
            cols[name] = columnar.ints(where, name, values)
        elif name == "timestamp" or (
            name not in STANDARD_COLUMNS
            and name not in numeric
            and metrics_columns is not None
            and not columnar.looks_numeric(values)
        ):
            cols[name] = columnar.strings(values)
        else:
            cols[name] = columnar.floats(where, name, values, strict=name in numeric)
    return cols, fidx, line


def _row_positions(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(file index, 1-based line) of every row, for files of ``counts`` body rows each (line 1 is the header)."""
    fidx = np.repeat(np.arange(len(counts), dtype=np.int32), counts)
    starts = np.cumsum(counts) - counts
    return fidx, np.arange(len(fidx), dtype=np.int64) - np.repeat(starts, counts) + 2


def _read_bodies_as_text(files, loaded, names, metrics_columns, numeric, wanted):
    """The row-wise reader: splits on tabs when every row is plain, else the csv module, which names the
    malformed line (a wrong field count, a quote that never closes, a byte that is not UTF-8)."""
    # decoded with the header line so that a bad byte's line and offset are those of the file
    texts = [decode_utf8(p, h.encode() + b"\n" + b).partition("\n")[2] for p, (h, b) in zip(files, loaded)]
    counts = np.array([b.count("\n") for b in texts], dtype=np.int64)
    nrows = int(counts.sum())
    raw = _split_fields("".join(texts), names, nrows)
    if raw is not None:
        fidx, line = _row_positions(counts)
    else:  # quoted tabs/newlines, blank lines or malformed rows: the csv module finds which
        raw = {n: [] for n in names}
        fl, ll = [], []
        for i, (p, b) in enumerate(zip(files, texts)):
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
        elif name == "timestamp" or (
            name not in STANDARD_COLUMNS
            and name not in numeric
            and metrics_columns is not None
            and not _looks_numeric(values)
        ):
            cols[name] = _parse_strings(values)
        else:
            cols[name] = _parse_floats(where, name, values, strict=name in numeric)
    return cols, fidx, line


def _validate_order(log: EpisodeLog) -> None:
    """l2logger.util.validate_log's numeric checks, and no episode twice, naming the file and row."""
    for name in ("block_num", "exp_num"):
        v = log[name]
        neg = np.flatnonzero(v < 0)
        if neg.size:
            raise L2LogError(f"{log.where(neg[0])}, column {name}: must be a non-negative integer, got {v[neg[0]]}")
    e = log["exp_num"]
    twice = np.flatnonzero(e[1:] == e[:-1])
    if twice.size:  # l2logger accepts it; every metric would then count the episode twice
        i = twice[0] + 1
        raise L2LogError(
            f"{log.where(i)}, column exp_num: episode {e[i]} is logged twice (also {log.where(i - 1)}); "
            "each exp_num must appear once"
        )
    dec = np.flatnonzero(log["block_num"][1:] < log["block_num"][:-1])
    if dec.size:
        i = dec[0] + 1
        raise L2LogError(
            f"{log.where(i)}, column block_num: block_num must be non-decreasing in exp_num order "
            f"(got {log['block_num'][i]} after {log['block_num'][i - 1]})"
        )


def _as_str_array(values) -> np.ndarray:
    if isinstance(values, np.ndarray) and values.dtype == object:
        return values
    arr = np.empty(len(values), dtype=object)
    arr[:] = [str(v) for v in (values.tolist() if isinstance(values, np.ndarray) else values)]
    return arr
