"""The continual record: accuracy matrix, init accuracies, test sizes, task classes, scenario.

Saved three ways into one folder (no pickle):

- ``continual_record.npz``: the record itself (``ContinualRecord.load`` reads it with ``allow_pickle=False``);
- ``renate_results.json``: Renate's results dict (FORMATS.md): ``{"accuracy": A rows, "accuracy_init":
  [[b_0, ..., b_{T-1}]], "num_instances": [n_0, ...]}``;
- ``accuracy_matrix.csv``: ``after_task,task_0,...,task_{T-1}`` with one line per completed row of ``A``.

A record of an interrupted run holds only the rows completed before the failure: ``accuracy`` is then
``[k, T]`` with ``k < T`` (``b``, ``n`` and the task classes are always complete).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

RECORD_FILE = "continual_record.npz"
RENATE_FILE = "renate_results.json"
MATRIX_FILE = "accuracy_matrix.csv"
FORMAT = "owl-eval/continual-record/1"


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

    def add_row(self, row: np.ndarray) -> None:
        self.accuracy = np.vstack([self.accuracy, np.asarray(row, dtype=np.float64)[None, :]])

    def renate_results(self) -> dict:
        return {"accuracy": self.accuracy.tolist(), "accuracy_init": [self.init_accuracy.tolist()],
                "num_instances": [int(v) for v in self.num_instances]}

    # -- files -------------------------------------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / RECORD_FILE
        counts = np.array([len(c) for c in self.task_classes], dtype=np.int64)
        flat = np.array([c for cls in self.task_classes for c in cls], dtype=np.int64)
        meta = {"scenario": self.scenario, "domain": self.domain, "format": FORMAT}
        np.savez_compressed(path, accuracy=np.asarray(self.accuracy, dtype=np.float64).reshape(-1, self.num_tasks),
                            init_accuracy=np.asarray(self.init_accuracy, dtype=np.float64),
                            num_instances=np.asarray(self.num_instances, dtype=np.int64),
                            task_classes=flat, task_class_counts=counts, meta_json=np.array(json.dumps(meta)))
        (directory / RENATE_FILE).write_text(json.dumps(self.renate_results()))
        self._write_csv(directory / MATRIX_FILE)
        return path

    def _write_csv(self, path: Path) -> None:
        # repr-precision floats, so the CSV reads back to exactly the logged matrix
        header = ",".join(["after_task"] + [f"task_{i}" for i in range(self.num_tasks)])
        lines = [header] + [",".join([str(j)] + [repr(float(v)) for v in row]) for j, row in enumerate(self.accuracy)]
        path.write_text("\n".join(lines) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> "ContinualRecord":
        path = Path(path)
        if path.is_dir():
            path = path / RECORD_FILE
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta_json"]))
            if meta.get("format") != FORMAT:
                raise ValueError(f"{path}: not a continual record (format {meta.get('format')!r}, expected {FORMAT!r})")
            bounds = np.concatenate([[0], np.cumsum(data["task_class_counts"])])
            flat = data["task_classes"]
            classes = tuple(tuple(int(c) for c in flat[bounds[i]:bounds[i + 1]]) for i in range(len(bounds) - 1))
            return cls(scenario=meta["scenario"], accuracy=data["accuracy"], init_accuracy=data["init_accuracy"],
                       num_instances=data["num_instances"], task_classes=classes, domain=meta.get("domain", ""))
