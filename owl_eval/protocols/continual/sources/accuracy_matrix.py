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

Bad input is one error naming the file and row / task (or the ``source.*`` key): text that is not UTF-8,
JSON that does not parse (or nests too deeply), a list where the results object belongs, accuracies that are
not numbers in [0, 1], test sizes that are not whole numbers in 1..2**53 (1e19 is not a count).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from owl_eval.errors import ConfigError
from owl_eval.formats.checksums import seal
from owl_eval.formats.csv_table import float_rows, numeric, read_rows
from owl_eval.json_input import json_type, parse_json
from owl_eval.protocols.continual.record import RENATE_FILE, SCENARIOS, ContinualRecord
from owl_eval.safe_paths import read_text
from owl_eval.sources import SourceData, SourceFormatError
from owl_eval.typed import as_choice, as_str

LABEL_COLUMN = "after_task"
FORMATS = ("auto", "json", "csv")
MAX_TEST_SIZE = 2**53  # every whole number up to here is exact in float64; beyond it is not a count


class AccuracyMatrixSource:
    """Options are kept as given and checked in :meth:`load` (owl_eval.typed), before any run exists."""

    def __init__(
        self,
        path: str,
        format: str = "auto",
        init_accuracy: list | None = None,
        num_instances: list | None = None,
        scenario: str = "class_incremental",
        domain: str = "",
    ):
        self.path: Any = path  # as given (any YAML value); a Path after _options()
        self.format = format
        self.init_accuracy, self.num_instances = init_accuracy, num_instances
        self.scenario, self.domain = scenario, domain

    def _options(self) -> None:
        if self.path is None or not str(self.path) or str(self.path) == "???":
            raise SourceFormatError("source.path: expected a Renate results JSON or an accuracy-matrix CSV")
        self.path = Path(as_str(self.path, "source.path")).expanduser()
        self.format = as_choice(self.format, "source.format", FORMATS)
        self.scenario = as_choice(self.scenario, "source.scenario", SCENARIOS)
        self.domain = as_str("" if self.domain is None else self.domain, "source.domain", allow_empty=True)
        for key in ("init_accuracy", "num_instances"):
            value = getattr(self, key)
            if value is not None and not isinstance(value, (list, tuple)):
                raise ConfigError(f"source.{key}: expected a list with one number per task, got {_show(value)}")

    def load(self) -> SourceData:
        self._options()
        kind = self.format if self.format != "auto" else {".json": "json", ".csv": "csv"}.get(self.path.suffix.lower())
        if kind not in ("json", "csv"):
            raise SourceFormatError(
                f"{self.path}: cannot tell the format from the suffix; set source.format=json or csv"
            )
        text = self._text()
        A, b, n = self._read_json(text) if kind == "json" else self._read_csv(text)
        T = A.shape[0]
        b = self._merge(b, self.init_accuracy, "accuracy_init", "source.init_accuracy", T, whole=False)
        n = self._merge(n, self.num_instances, "num_instances", "source.num_instances", T, whole=True)
        record = GivenMatrixRecord(
            scenario=self.scenario,
            accuracy=A,
            init_accuracy=np.full(T, np.nan) if b is None else b,
            num_instances=np.zeros(T, np.int64) if n is None else n.astype(np.int64),
            task_classes=tuple(() for _ in range(T)),
            domain=self.domain,
            has_init=b is not None,
            has_sizes=n is not None,
        )
        return SourceData(
            protocol="continual",
            record=record,
            tags={
                "scenario": self.scenario,
                "source": "accuracy_matrix",
                "format": kind,
                "tasks": str(T),
                "file": self.path.name,
            },
        )

    def _text(self) -> str:
        """The file the user named (a link given as the path is followed, as chosen), as UTF-8 text."""
        try:
            real = self.path.resolve()
        except (OSError, RuntimeError) as exc:  # RuntimeError: a link loop
            raise SourceFormatError(f"{self.path}: cannot be read ({exc})") from None
        if not real.exists():
            raise SourceFormatError(f"{self.path}: file not found")
        return read_text(real, what="accuracy-matrix file")

    # -- JSON ----------------------------------------------------------------------------------------
    def _read_json(self, text: str):
        results = parse_json(text, where=str(self.path), error=SourceFormatError)
        if not isinstance(results, dict) or "accuracy" not in results:
            got = f"keys {sorted(results)[:20]}" if isinstance(results, dict) else f"a JSON {json_type(results)}"
            raise SourceFormatError(
                f"{self.path}: expected Renate's results dict (a JSON object) with key 'accuracy', got {got}"
            )
        A = self._matrix(results["accuracy"], "'accuracy'")
        b = None
        if "accuracy_init" in results:
            init = results["accuracy_init"]
            if not (isinstance(init, list) and len(init) == 1 and isinstance(init[0], list)):
                raise SourceFormatError(
                    f"{self.path}, key 'accuracy_init': expected one row [[b_0, ..., b_T-1]], "
                    f"got a JSON {json_type(init)}"
                )
            b = self._vector(init[0], "key 'accuracy_init' row 0", A.shape[0], whole=False)
        n = None
        if "num_instances" in results:
            n = self._vector(results["num_instances"], "key 'num_instances'", A.shape[0], whole=True)
        return A, b, n

    def _matrix(self, rows, what: str) -> np.ndarray:
        if not isinstance(rows, list) or not rows or not all(isinstance(r, list) for r in rows):
            raise SourceFormatError(f"{self.path}, key {what}: expected a non-empty list of rows (lists of accuracies)")
        T = len(rows)
        for j, row in enumerate(rows):
            if len(row) != T:
                raise SourceFormatError(
                    f"{self.path}, key {what}, row {j}: expected {T} accuracies (a T x T matrix "
                    f"with T = {T} rows), got {len(row)}"
                )
        return np.array([self._vector(row, f"key {what} row {j}", T, whole=False) for j, row in enumerate(rows)])

    def _vector(self, values, what: str, T: int, *, whole: bool, config: bool = False) -> np.ndarray:
        """``T`` numbers: accuracies in [0, 1], or (``whole``) test sizes in 1..2**53. Messages name the file
        and ``what`` (``key 'accuracy' row 1, task 2``), or for a ``config`` value the key (``source.num_instances[2]``)."""
        prefix = what if config else f"{self.path}, {what}"
        if not isinstance(values, (list, tuple)) or len(values) != T:
            got = f"{len(values)}" if isinstance(values, (list, tuple)) else _show(values)
            raise SourceFormatError(f"{prefix}: expected {T} values (one per task), got {got}")
        out = np.empty(T)
        for i, v in enumerate(values):
            at = f"{prefix}[{i}]" if config else f"{prefix}, task {i}"
            if v is None or isinstance(v, (bool, str)) or not isinstance(v, (int, float)):
                raise SourceFormatError(f"{at}: expected a number, got {_show(v)}")
            try:
                v = float(v)
            except OverflowError:  # an integer beyond float64 (1e400 written out)
                raise SourceFormatError(f"{at}: {str(v)[:30]}... is too large") from None
            if np.isnan(v):
                raise SourceFormatError(f"{at}: NaN where a value is required")
            if whole and not (np.isfinite(v) and v == round(v) and 1 <= v <= MAX_TEST_SIZE):
                raise SourceFormatError(f"{at}: expected a positive whole test size (at most 2**53), got {v!r}")
            if not whole and not 0.0 <= v <= 1.0:
                raise SourceFormatError(f"{at}: accuracy must lie in [0, 1], got {v!r}")
            out[i] = v
        return out

    # -- CSV -----------------------------------------------------------------------------------------
    def _read_csv(self, text: str):
        first = next((line for line in text.removeprefix("\ufeff").splitlines() if line.strip()), "")
        head = first.split(",")[0].strip()
        has_header = bool(first) and not _is_number(head)
        fast = self._fast_csv(text, first, has_header)
        if fast is not None:
            return fast, None, None
        # the row reader: slower (a Python string per field), and it names the row and column of what is wrong
        table = read_rows(self.path, skip_header=has_header, text=text)
        header, fields, lines = table.header, table.fields, table.line_numbers
        if not len(fields):
            raise SourceFormatError(f"{self.path}: no matrix rows")
        labelled = header is not None and header[0] == LABEL_COLUMN
        width = fields.shape[1] - labelled
        T = fields.shape[0]
        if width != T:
            raise SourceFormatError(
                f"{self.path}: expected a square T x T matrix ({T} rows, so {T} task columns"
                f"{' after ' + LABEL_COLUMN if labelled else ''}), got {width} columns: "
                f"{'a missing' if width < T else 'an extra'} column or row"
            )
        names = header[labelled:] if header else [f"task_{i}" for i in range(T)]
        if labelled:
            labels = numeric(
                self.path, fields, columns=[0], names=[LABEL_COLUMN], first_row_number=0, row_numbers=lines
            )[:, 0]
            wrong = np.flatnonzero(labels != np.arange(T))
            if wrong.size:
                raise SourceFormatError(
                    f"{self.path}, row {int(lines[wrong[0]])}, column {LABEL_COLUMN!r}: "
                    f"expected {int(wrong[0])} (rows in task order), got {fields[wrong[0], 0].strip()[:40]}"
                )
        A = numeric(
            self.path,
            fields,
            columns=list(range(labelled, labelled + T)),
            names=names,
            first_row_number=0,
            row_numbers=lines,
        )
        outside = ~((A >= 0) & (A <= 1))
        if outside.any():
            j, i = (int(x) for x in np.argwhere(outside)[0])
            raise SourceFormatError(
                f"{self.path}, row {int(lines[j])}, column {names[i]!r}: accuracy must lie in [0, 1], got {A[j, i]!r}"
            )
        return A, None, None

    def _fast_csv(self, text: str, first: str, has_header: bool) -> np.ndarray | None:
        """The matrix of a well-formed CSV, read column-wise (no Python object per value: a 1,000-task matrix
        in a fraction of a second), or None for anything the row reader has to look at (a header that is not
        the first line or holds a quote, a field that is not a number, a value outside [0, 1], a wrong shape or
        ``after_task`` column): it then reads the file again and names the culprit, as it always did."""
        body = text.removeprefix("\ufeff")
        header = None
        if has_header:
            if '"' in first or not body.startswith(first):
                return None
            header = [h.strip() for h in first.split(",")]
            width = len(header)
        else:
            width = len(first.split(","))
        values = float_rows(body.encode("utf-8"), width=width, skip_rows=int(has_header))
        if values is None:
            return None
        labelled = header is not None and header[0] == LABEL_COLUMN
        T = values.shape[0]
        if T == 0 or width - labelled != T:
            return None
        if labelled and not np.array_equal(values[:, 0], np.arange(T)):
            return None
        A = values[:, labelled:]
        if not ((A >= 0) & (A <= 1)).all():  # NaN too
            return None
        return np.ascontiguousarray(A)

    def _merge(self, from_file, from_config, file_key, config_key, T, *, whole):
        """One value per task from the file or the config; both given: they must agree."""
        given = None
        if from_config is not None:
            try:
                given = self._vector(list(from_config), config_key, T, whole=whole, config=True)
            except SourceFormatError as exc:  # a config value: the message starts with the key
                raise ConfigError(str(exc)) from None
        if from_file is not None and given is not None and not np.allclose(from_file, given, rtol=0, atol=1e-12):
            raise SourceFormatError(
                f"{self.path}: {file_key} in the file {from_file.tolist()} differs from "
                f"{config_key} {given.tolist()}; give one"
            )
        return from_file if from_file is not None else given


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _show(value) -> str:
    """A short description of a value from user data (a nested list is never printed whole)."""
    if isinstance(value, (list, tuple, dict)):
        return f"a {'JSON object' if isinstance(value, dict) else 'list'} of {len(value)} item(s)"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


@dataclass
class GivenMatrixRecord(ContinualRecord):
    """A matrix produced elsewhere, where ``b`` and ``n`` may be unknown: the record then holds NaN / 0
    placeholders and the metrics that need them are N/A (:mod:`owl_eval.protocols.continual.evaluation`)."""

    has_init: bool = True
    has_sizes: bool = True

    def save(self, directory) -> Path:
        path = super().save(directory)
        if self.text_copies and not (self.has_init and self.has_sizes):  # Renate's dict without the placeholders
            results = self.renate_results()
            if not self.has_init:
                del results["accuracy_init"]
            if not self.has_sizes:
                del results["num_instances"]
            (Path(directory) / RENATE_FILE).write_text(json.dumps(results))
            seal(directory)  # the rewritten copy, as saved
        return path
