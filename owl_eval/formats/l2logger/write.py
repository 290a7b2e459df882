"""Writing the l2logger 1.1 layout: a whole :class:`EpisodeLog` at once, or episode by episode.

What is written must read back (:func:`owl_eval.formats.l2logger.read.read_log`): worker ids, task names and the scenario
folder name are safe names (worker ids and the scenario name become folders), metric values are finite
(NaN marks a missing value), and each ``exp_num`` is logged once.
"""

from __future__ import annotations

import json
import math
import time
from datetime import datetime
from pathlib import Path
from typing import TextIO

import numpy as np

from owl_eval.formats.l2logger.read import (
    _ALLOWED,
    LOG_FORMAT_VERSION,
    STANDARD_COLUMNS,
    TIMESTAMP_FORMAT,
    EpisodeLog,
    L2LogError,
)
from owl_eval.safe_paths import check_name

# --------------------------------------------------------------------------------------------- writing


def _scenario_dirname(scenario_name: str, stamp: float | None) -> str:
    # l2logger: "<scenario basename without extension>-<time.time() with '.' replaced by '-'>"
    stamp = time.time() if stamp is None else stamp
    name = f"{Path(str(scenario_name)).name.split('.')[0]}-{str(stamp).replace('.', '-')}"
    return check_name(name, what="scenario folder name", where=f"l2logger scenario {str(scenario_name)[:80]!r}")


def _check_log(log: EpisodeLog) -> None:
    """The names that become folders or metric keys are safe; numbers are finite (vectorised)."""
    for name, allowed in _ALLOWED.items():
        bad = sorted(set(log[name].tolist()) - set(allowed))
        if bad:
            raise L2LogError(f"column {name}: expected values in {list(allowed)}, got {bad[0]!r}")
    for name in ("worker_id", "task_name"):
        for value in set(log[name].tolist()):
            check_name(value, what=name.replace("_", " "), where=f"column {name} of the log to write")
    for name in log.extra_columns:
        values = log[name]
        if values.dtype.kind == "f" and np.isinf(values).any():
            i = int(np.flatnonzero(np.isinf(values))[0])
            raise L2LogError(
                f"column {name}, row {i} (exp_num {log['exp_num'][i]}): {values[i]} is not a finite "
                "number; use NaN for a missing value"
            )


def _write_info(scenario_dir: Path, metrics_columns, scenario_info) -> None:
    scenario_dir.mkdir(parents=True, exist_ok=True)
    info = {"metrics_columns": list(metrics_columns), "log_format_version": LOG_FORMAT_VERSION}
    (scenario_dir / "logger_info.json").write_text(json.dumps(info, indent=2))
    (scenario_dir / "scenario_info.json").write_text(json.dumps(dict(scenario_info or {}), indent=2))


def _quote(s: str) -> str:
    # csv.QUOTE_MINIMAL as l2logger's csv.DictWriter does it
    if any(c in s for c in '\t"\n\r'):
        return '"' + s.replace('"', '""') + '"'
    return s


def _format_column(arr: np.ndarray) -> list[str]:
    if arr.dtype.kind in "iu":
        return list(map(str, arr.tolist()))
    if arr.dtype.kind == "f":
        return list(map(repr, arr.tolist()))  # shortest round-trip text ('nan', 'inf' for specials)
    out = list(map(str, arr.tolist()))
    if any(c in "".join(out) for c in '\t"\n\r'):
        out = [_quote(s) for s in out]
    return out


def write_log(
    log: EpisodeLog, base_dir, scenario_name: str, scenario_info: dict | None = None, *, stamp: float | None = None
) -> Path:
    """Write ``log`` in the exact l2logger 1.1 layout; returns the scenario directory.

    ``<base>/<scenario>-<stamp>/logger_info.json``, ``scenario_info.json`` and one
    ``<worker_id>/<block_num>-<block_type>/data-log.tsv`` per (worker, block, type), columns in l2logger
    order (standard columns, then the others sorted by name). Floats are written with ``repr`` so that
    :func:`read_log` gives back exactly the same numbers.
    """
    _check_log(log)
    scenario_dir = Path(base_dir) / _scenario_dirname(scenario_name, stamp)
    info = scenario_info if scenario_info is not None else log.scenario_info
    _write_info(scenario_dir, log.metrics_columns, info)
    n = len(log)
    if n == 0:
        return scenario_dir
    order = list(STANDARD_COLUMNS) + log.extra_columns
    text_cols = [_format_column(log[c]) for c in order]
    header = "\t".join(_quote(c) for c in order) + "\n"
    worker, bnum, btype = log["worker_id"], log["block_num"], log["block_type"]
    change = np.ones(n, dtype=bool)
    change[1:] = (worker[1:] != worker[:-1]) | (bnum[1:] != bnum[:-1]) | (btype[1:] != btype[:-1])
    starts = np.flatnonzero(change).tolist() + [n]
    rows = list(map("\t".join, zip(*text_cols)))
    written = set()
    for a, b in zip(starts[:-1], starts[1:]):
        d = scenario_dir / str(worker[a]) / f"{bnum[a]}-{btype[a]}"
        d.mkdir(parents=True, exist_ok=True)
        path = d / "data-log.tsv"
        with open(path, "a" if path in written else "w", encoding="utf-8", newline="") as fh:
            if path not in written:
                fh.write(header)
            fh.write("\n".join(rows[a:b]) + "\n")
        written.add(path)
    return scenario_dir


class L2Logger:
    """Episode-by-episode writer of the l2logger layout (a drop-in for ``l2logger.DataLogger``).

    Every :meth:`log_episode` appends one row and flushes it, so a crashed run loses nothing already
    logged; the open file changes when the (worker, block_num, block_type) directory changes.
    """

    def __init__(
        self,
        base_dir,
        scenario_name: str,
        metrics_columns=("reward",),
        scenario_info=None,
        *,
        stamp: float | None = None,
    ):
        if isinstance(metrics_columns, str) or not metrics_columns:
            raise L2LogError(f"metrics_columns: expected a non-empty list of column names, got {metrics_columns!r}")
        self.metrics_columns = tuple(metrics_columns)
        self.scenario_dir = Path(base_dir) / _scenario_dirname(scenario_name, stamp)
        _write_info(self.scenario_dir, self.metrics_columns, scenario_info)
        self._fields: list[str] | None = None
        self._fh: TextIO | None = None
        self._path: Path | None = None
        self._last_block: int | None = None
        self._last_exp: int | None = None

    def log_episode(
        self,
        *,
        block_num: int,
        exp_num: int,
        block_type: str,
        task_name: str,
        task_params=None,
        worker_id: str = "worker-default",
        block_subtype: str = "wake",
        exp_status: str = "complete",
        timestamp: str | None = None,
        **columns,
    ) -> None:
        """Append one episode row (l2logger's validation: types, allowed values, non-decreasing counters)."""
        params = task_params if task_params is not None else {}
        params = params if isinstance(params, str) else json.dumps(params)
        for name, value in (("block_num", block_num), ("exp_num", exp_num)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
                raise L2LogError(f"{name}: expected a non-negative integer, got {value!r}")
        if self._last_block is not None and block_num < self._last_block:
            raise L2LogError(f"block_num must be non-decreasing: got {block_num} after {self._last_block}")
        if self._last_exp is not None and exp_num <= self._last_exp:  # an episode logged twice counts twice
            raise L2LogError(f"exp_num must increase: got {exp_num} after {self._last_exp}")
        for name, value in (("block_type", block_type), ("block_subtype", block_subtype), ("exp_status", exp_status)):
            if value not in _ALLOWED[name]:
                raise L2LogError(f"{name}: expected one of {list(_ALLOWED[name])}, got {value!r}")
        where = f"episode {exp_num} (block {block_num})"
        check_name(worker_id, what="worker id", where=where)  # a folder of the layout
        check_name(task_name, what="task name", where=where)  # a metric key when read back
        missing = [m for m in self.metrics_columns if m not in columns]
        if missing:
            raise L2LogError(f"log_episode: metric column(s) {missing} missing")
        for name, value in columns.items():
            if isinstance(value, (float, np.floating)) and math.isinf(value):
                raise L2LogError(f"{where}: {name} is {value}, not a finite number; use NaN for a missing value")
        record = {
            "block_num": int(block_num),
            "exp_num": int(exp_num),
            "worker_id": worker_id,
            "block_type": block_type,
            "block_subtype": block_subtype,
            "task_name": task_name,
            "task_params": params,
            "exp_status": exp_status,
            "timestamp": timestamp or datetime.now().strftime(TIMESTAMP_FORMAT),
            **columns,
        }
        if self._fields is None:
            self._fields = list(STANDARD_COLUMNS) + sorted(columns)
        elif set(record) != set(self._fields):
            raise L2LogError(
                f"log_episode: columns {sorted(record)} differ from the first row's {sorted(self._fields)}"
            )
        path = self.scenario_dir / str(worker_id) / f"{block_num}-{block_type}" / "data-log.tsv"
        if path != self._path:
            self._open(path)
        assert self._fh is not None  # open on self._path
        values = [record[f] for f in self._fields]
        text = "\t".join(repr(float(v)) if isinstance(v, (float, np.floating)) else _quote(str(v)) for v in values)
        self._fh.write(text + "\n")
        self._fh.flush()
        self._last_block, self._last_exp = int(block_num), int(exp_num)

    def _open(self, path: Path) -> None:
        assert self._fields is not None  # set by the first log_episode
        if self._fh is not None:
            self._fh.close()
        path.parent.mkdir(parents=True, exist_ok=True)
        new = not path.exists()
        self._fh = open(path, "a", encoding="utf-8", newline="")
        if new:
            self._fh.write("\t".join(_quote(f) for f in self._fields) + "\n")
        self._path = path

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
            self._path = None

    def __enter__(self) -> L2Logger:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
