"""The continual record: accuracy matrix, init accuracies, test sizes, task classes, scenario.

Saved three ways into one folder (no pickle):

- ``continual_record.npz``: the record itself (``ContinualRecord.load`` reads it with ``allow_pickle=False``);
- ``renate_results.json``: Renate's results dict (FORMATS.md): ``{"accuracy": A rows, "accuracy_init":
  [[b_0, ..., b_{T-1}]], "num_instances": [n_0, ...]}``;
- ``accuracy_matrix.csv``: ``after_task,task_0,...,task_{T-1}`` with one line per completed row of ``A``.

The two text copies (Renate's dict and the CSV, about 20 bytes per value each at full precision: 19 MB each for
1,000 tasks) are written for sequences of up to :data:`TEXT_COPY_MAX_TASKS` tasks; ``continual_record.npz``
(float64, exact, 8 bytes per value at most) always holds the whole matrix: ``np.load(path)["accuracy"]``.

A record of an interrupted run holds only the rows completed before the failure: ``accuracy`` is then
``[k, T]`` with ``k < T`` (``b``, ``n`` and the task classes are always complete).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from owl_eval.formats.checksums import seal
from owl_eval.formats.npz import json_member, member, npz_arrays
from owl_eval.metrics.validation import MetricInputError

RECORD_FILE = "continual_record.npz"
RENATE_FILE = "renate_results.json"
MATRIX_FILE = "accuracy_matrix.csv"
FORMAT = "owl-eval/continual-record/1"
SCENARIOS = ("class_incremental", "task_incremental")
TEXT_COPY_MAX_TASKS = 200  # renate_results.json and accuracy_matrix.csv up to here; continual_record.npz always


@dataclass
class ContinualRecord:
    scenario: str  # class_incremental | task_incremental
    accuracy: np.ndarray  # [k, T]: A[j][i] = accuracy on task i after learning task j (k rows completed)
    init_accuracy: np.ndarray  # [T]: b[i] = accuracy on task i before any learning
    num_instances: np.ndarray  # [T]: test size of task i
    task_classes: tuple[tuple[int, ...], ...]  # classes of each task, in task order
    domain: str = ""

    @property
    def num_tasks(self) -> int:
        return len(self.task_classes)

    @property
    def num_completed(self) -> int:
        """How many tasks were learned and evaluated (rows of ``accuracy``)."""
        return int(self.accuracy.shape[0])

    @property
    def complete(self) -> bool:
        return self.num_completed == self.num_tasks

    @property
    def text_copies(self) -> bool:
        """Whether :meth:`save` writes the text copies of the matrix (Renate's dict and the CSV)."""
        return self.num_tasks <= TEXT_COPY_MAX_TASKS

    def add_row(self, row: np.ndarray) -> None:
        self.accuracy = np.vstack([self.accuracy, np.asarray(row, dtype=np.float64)[None, :]])

    def renate_results(self) -> dict:
        return {
            "accuracy": self.accuracy.tolist(),
            "accuracy_init": [self.init_accuracy.tolist()],
            "num_instances": [int(v) for v in self.num_instances],
        }

    # -- files -------------------------------------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / RECORD_FILE
        counts = np.array([len(c) for c in self.task_classes], dtype=np.int64)
        flat = np.array([c for cls in self.task_classes for c in cls], dtype=np.int64)
        meta = {"scenario": self.scenario, "domain": self.domain, "format": FORMAT}
        np.savez_compressed(
            path,
            accuracy=np.asarray(self.accuracy, dtype=np.float64).reshape(-1, self.num_tasks),
            init_accuracy=np.asarray(self.init_accuracy, dtype=np.float64),
            num_instances=np.asarray(self.num_instances, dtype=np.int64),
            task_classes=flat,
            task_class_counts=counts,
            meta_json=np.array(json.dumps(meta)),
        )
        if self.text_copies:
            (directory / RENATE_FILE).write_text(json.dumps(self.renate_results()))
            self._write_csv(directory / MATRIX_FILE)
        seal(directory)  # the re-score checks the record against these
        return path

    def _write_csv(self, path: Path) -> None:
        # repr-precision floats, so the CSV reads back to exactly the logged matrix
        header = ",".join(["after_task"] + [f"task_{i}" for i in range(self.num_tasks)])
        lines = [header] + [",".join([str(j)] + [repr(float(v)) for v in row]) for j, row in enumerate(self.accuracy)]
        path.write_text("\n".join(lines) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> ContinualRecord:
        """A saved record (the file or its folder); every member's CRC, type and shape is checked, and a
        malformed one is one ``ValueError`` naming the file and the member (never an unpickled object)."""
        path = Path(path)
        if path.is_dir():
            path = path / RECORD_FILE
        return cls.from_arrays(npz_arrays(path), path)

    @classmethod
    def from_arrays(cls, arrays, path) -> ContinualRecord:
        meta = json_member(arrays, "meta_json", path)
        if meta.get("format") != FORMAT:
            raise MetricInputError(
                f"{path}: not a continual record (format {str(meta.get('format'))[:60]!r}, expected {FORMAT!r})"
            )
        scenario, domain = meta.get("scenario"), meta.get("domain", "")
        if scenario not in SCENARIOS:
            raise MetricInputError(
                f"{path}: meta_json scenario: expected one of {list(SCENARIOS)}, got {str(scenario)[:60]!r}"
            )
        if not isinstance(domain, str):
            raise MetricInputError(f"{path}: meta_json domain: expected a string, got {type(domain).__name__}")
        counts = member(arrays, "task_class_counts", path, kinds="iu", ndim=1)
        flat = member(arrays, "task_classes", path, kinds="iu", ndim=1)
        if (counts < 0).any() or int(counts.sum(dtype=object)) != len(flat):
            raise MetricInputError(
                f"{path}: array 'task_class_counts' {counts.tolist()[:20]} does not split the "
                f"{len(flat)} entries of 'task_classes' (non-negative counts summing to {len(flat)})"
            )
        bounds = np.concatenate([[0], np.cumsum(counts)])
        classes = tuple(tuple(int(c) for c in flat[bounds[i] : bounds[i + 1]]) for i in range(len(counts)))
        return cls(
            scenario=scenario,
            accuracy=member(arrays, "accuracy", path, kinds="f", ndim=2),
            init_accuracy=member(arrays, "init_accuracy", path, kinds="f", ndim=1),
            num_instances=member(arrays, "num_instances", path, kinds="iu", ndim=1),
            task_classes=classes,
            domain=domain,
        )
