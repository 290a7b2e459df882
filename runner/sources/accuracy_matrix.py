"""Continual-learning accuracy matrices: Renate's results dict (JSON) or a CSV matrix.

JSON (Renate, FORMATS.md): ``{"accuracy": [[A_00, ..., A_0T-1], ...], "accuracy_init": [[b_0, ..., b_T-1]],
"num_instances": [n_0, ...]}``; ``num_instances`` may instead come from ``source.num_instances``; other keys
(Renate's other metrics) are ignored.

CSV: a ``T x T`` matrix, row ``j`` = accuracies on every task after learning task ``j``. An optional header
row (detected when its first field is not a number) and an optional first column named ``after_task``
(the layout owl-eval writes in ``accuracy_matrix.csv``; its values must be ``0..T-1`` in order). The init
accuracies ``b`` and test sizes ``n`` come from config (``source.init_accuracy``, ``source.num_instances``),
never from extra rows, so a CSV holds exactly one thing: the matrix.

Without ``b`` the forward-transfer metrics, without ``n`` the micro average are N/A with the reason.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from metrics.continual import continual_metrics
from metrics.results import MetricResults, Series
from runner.protocols.continual import SERIES_PREFIX, ContinualProtocol, evaluate_continual_record
from runner.protocols.continual_record import RENATE_FILE, ContinualRecord
from runner.sources import SourceData, SourceFormatError
from runner.sources.csv_table import numeric, read_table

LABEL_COLUMN = "after_task"


class AccuracyMatrixSource:
    def __init__(self, path: str, format: str = "auto", init_accuracy: list | None = None,
                 num_instances: list | None = None, scenario: str = "class_incremental", domain: str = ""):
        self.path = Path(str(path)).expanduser()
        self.format = format
        self.init_accuracy, self.num_instances = init_accuracy, num_instances
        self.scenario, self.domain = scenario, str(domain or "")

    def load(self) -> SourceData:
        if not str(self.path) or str(self.path) == "???":
            raise SourceFormatError("source.path: expected a Renate results JSON or an accuracy-matrix CSV")
        if not self.path.is_file():
            raise SourceFormatError(f"{self.path}: file not found")
        kind = self.format if self.format != "auto" else {".json": "json", ".csv": "csv"}.get(self.path.suffix.lower())
        if kind not in ("json", "csv"):
            raise SourceFormatError(f"{self.path}: cannot tell the format from the suffix; set source.format=json or csv")
        A, b, n = self._read_json() if kind == "json" else self._read_csv()
        T = A.shape[0]
        b = self._merge(b, self.init_accuracy, "accuracy_init", "source.init_accuracy", T, whole=False)
        n = self._merge(n, self.num_instances, "num_instances", "source.num_instances", T, whole=True)
        record = ContinualRecord(scenario=self.scenario, accuracy=A,
                                 init_accuracy=np.full(T, np.nan) if b is None else b,
                                 num_instances=np.zeros(T, np.int64) if n is None else n.astype(np.int64),
                                 task_classes=tuple(() for _ in range(T)), domain=self.domain)
        return SourceData(protocol=GivenMatrixProtocol(self.scenario, has_init=b is not None, has_sizes=n is not None),
                          record=record, tags={"source": "accuracy_matrix", "format": kind, "tasks": str(T),
                                               "file": self.path.name})

    # -- JSON ----------------------------------------------------------------------------------------
    def _read_json(self):
        try:
            results = json.loads(self.path.read_text())
        except json.JSONDecodeError as exc:
            raise SourceFormatError(f"{self.path}: not valid JSON ({exc})") from None
        if not isinstance(results, dict) or "accuracy" not in results:
            got = sorted(results) if isinstance(results, dict) else type(results).__name__
            raise SourceFormatError(f"{self.path}: expected Renate's results dict with key 'accuracy', got {got}")
        A = self._matrix(results["accuracy"], "'accuracy'")
        b = None
        if "accuracy_init" in results:
            init = results["accuracy_init"]
            if not (isinstance(init, list) and len(init) == 1 and isinstance(init[0], list)):
                raise SourceFormatError(f"{self.path}, key 'accuracy_init': expected one row [[b_0, ..., b_T-1]]")
            b = self._vector(init[0], "'accuracy_init' row 0", A.shape[0], whole=False)
        n = None
        if "num_instances" in results:
            n = self._vector(results["num_instances"], "'num_instances'", A.shape[0], whole=True)
        return A, b, n

    def _matrix(self, rows, what: str) -> np.ndarray:
        if not isinstance(rows, list) or not rows or not all(isinstance(r, list) for r in rows):
            raise SourceFormatError(f"{self.path}, key {what}: expected a non-empty list of rows (lists of accuracies)")
        T = len(rows)
        for j, row in enumerate(rows):
            if len(row) != T:
                raise SourceFormatError(f"{self.path}, key {what}, row {j}: expected {T} accuracies (a T x T matrix "
                                        f"with T = {T} rows), got {len(row)}")
        for j, row in enumerate(rows):
            self._vector(row, f"{what} row {j}", T, whole=False)
        return np.array(rows, dtype=np.float64)

    def _vector(self, values, what: str, T: int, *, whole: bool, where: Path | str | None = None) -> np.ndarray:
        where = self.path if where is None else where
        if not isinstance(values, (list, tuple)) or len(values) != T:
            got = len(values) if isinstance(values, (list, tuple)) else type(values).__name__
            raise SourceFormatError(f"{where}, {what}: expected {T} values (one per task), got {got}")
        out = np.empty(T)
        for i, v in enumerate(values):
            if v is None or isinstance(v, (bool, str)) or not isinstance(v, (int, float)):
                raise SourceFormatError(f"{where}, {what}, task {i}: expected a number, got {v!r}")
            v = float(v)
            if np.isnan(v):
                raise SourceFormatError(f"{where}, {what}, task {i}: NaN where a value is required")
            if whole and (v != round(v) or v < 1):
                raise SourceFormatError(f"{where}, {what}, task {i}: expected a positive whole test size, got {v!r}")
            if not whole and not 0.0 <= v <= 1.0:
                raise SourceFormatError(f"{where}, {what}, task {i}: accuracy must lie in [0, 1], got {v!r}")
            out[i] = v
        return out

    # -- CSV -----------------------------------------------------------------------------------------
    def _read_csv(self):
        first = next((line for line in self.path.read_text().splitlines() if line.strip()), "")
        head = first.split(",")[0].strip()
        has_header = bool(first) and not _is_number(head)
        header, fields = read_table(self.path, skip_header=has_header)
        first_row = 2 if has_header else 1
        if not len(fields):
            raise SourceFormatError(f"{self.path}: no matrix rows")
        labelled = header is not None and header[0] == LABEL_COLUMN
        width = fields.shape[1] - labelled
        T = fields.shape[0]
        if width != T:
            raise SourceFormatError(f"{self.path}: expected a square T x T matrix ({T} rows, so {T} task columns"
                                    f"{' after ' + LABEL_COLUMN if labelled else ''}), got {width} columns: "
                                    f"{'a missing' if width < T else 'an extra'} column or row")
        names = header[labelled:] if header else [f"task_{i}" for i in range(T)]
        if labelled:
            labels = numeric(self.path, fields, columns=[0], names=[LABEL_COLUMN], first_row_number=first_row)[:, 0]
            wrong = np.flatnonzero(labels != np.arange(T))
            if wrong.size:
                raise SourceFormatError(f"{self.path}, row {first_row + int(wrong[0])}, column {LABEL_COLUMN!r}: "
                                        f"expected {int(wrong[0])} (rows in task order), got {fields[wrong[0], 0].strip()}")
        A = numeric(self.path, fields, columns=list(range(labelled, labelled + T)), names=names, first_row_number=first_row)
        outside = (A < 0) | (A > 1)
        if outside.any():
            j, i = (int(x) for x in np.argwhere(outside)[0])
            raise SourceFormatError(f"{self.path}, row {first_row + j}, column {names[i]!r}: accuracy must lie in [0, 1], "
                                    f"got {A[j, i]!r}")
        return A, None, None

    def _merge(self, from_file, from_config, file_key, config_key, T, *, whole):
        """One value per task from the file or the config; both given: they must agree."""
        given = None if from_config is None else self._vector(list(from_config), config_key, T, whole=whole, where="config")
        if from_file is not None and given is not None and not np.allclose(from_file, given, rtol=0, atol=1e-12):
            raise SourceFormatError(f"{self.path}: {file_key} in the file {from_file.tolist()} differs from "
                                    f"{config_key} {given.tolist()}; give one")
        return from_file if from_file is not None else given


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


class GivenMatrixProtocol(ContinualProtocol):
    """The continual protocol's metrics and figures for a matrix produced elsewhere, where ``b`` and ``n``
    may be unknown (the record then holds NaN / 0 placeholders and those metrics are N/A)."""

    def __init__(self, scenario: str = "class_incremental", *, has_init: bool = True, has_sizes: bool = True):
        super().__init__(scenario)
        self.has_init, self.has_sizes = has_init, has_sizes

    def save_record(self, record: ContinualRecord, directory) -> None:
        record.save(directory)
        if not (self.has_init and self.has_sizes):  # Renate's dict without the placeholders of unknown values
            results = record.renate_results()
            if not self.has_init:
                del results["accuracy_init"]
            if not self.has_sizes:
                del results["num_instances"]
            (Path(directory) / RENATE_FILE).write_text(json.dumps(results))

    def evaluate(self, record: ContinualRecord, settings) -> MetricResults:
        if self.has_init and self.has_sizes:
            return evaluate_continual_record(record)
        A = np.asarray(record.accuracy, dtype=np.float64)
        k = record.num_completed
        out = MetricResults()
        out.set("tasks_completed", k)
        metrics = continual_metrics(A[:k, :k], init_accuracy=record.init_accuracy[:k] if self.has_init else None,
                                    num_instances=record.num_instances[:k] if self.has_sizes else None)
        out.update(MetricResults(values=metrics.values, na=metrics.na))
        for name, series in metrics.series.items():
            out.series[SERIES_PREFIX + name] = series
        for i in range(record.num_tasks):
            out.series[f"task/{i}/accuracy"] = Series(np.arange(k), A[:, i])
        return out
