"""The selective record: true and predicted labels and the agent's confidence on every test sample.

Saved as ``selective_record.npz`` (``np.savez_compressed``, no pickle): ``y_true``, ``y_pred`` (int64
``[n]``), ``confidence`` (float64 ``[n]``), ``class_names`` (strings ``[C]``) and ``meta_json`` (format and
domain). :meth:`SelectiveRecord.load` reads it with owl-eval's checked reader (every member's CRC, dtype and
shape) and checks the values; :func:`read_saved` is the reader ``owl-eval-evaluate +source=record`` calls.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from owl_eval.formats.npz import json_member, member, npz_arrays
from owl_eval.metrics.validation import MetricInputError
from owl_eval.sources import SourceData

RECORD_FILE = "selective_record.npz"
FORMAT = "owl-eval/selective-record/1"


@dataclass
class SelectiveRecord:
    y_true: np.ndarray  # [n] int: true class of each test sample, in 0..C-1
    y_pred: np.ndarray  # [n] int: the agent's predicted class
    confidence: np.ndarray  # [n] float: the agent's confidence in its prediction (higher = more confident)
    class_names: tuple[str, ...]  # C names, class i = class_names[i]
    domain: str = ""

    @property
    def num_test(self) -> int:
        return int(np.shape(self.y_true)[0])

    # -- files -------------------------------------------------------------------------------------------
    def save(self, directory: str | Path) -> Path:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / RECORD_FILE
        np.savez_compressed(
            path,
            y_true=np.asarray(self.y_true, dtype=np.int64),
            y_pred=np.asarray(self.y_pred, dtype=np.int64),
            confidence=np.asarray(self.confidence, dtype=np.float64),
            class_names=np.array([str(c) for c in self.class_names], dtype=np.str_),
            meta_json=np.array(json.dumps({"format": FORMAT, "domain": self.domain})),
        )
        return path

    @classmethod
    def load(cls, path: str | Path) -> SelectiveRecord:
        """A saved record (the file or its folder); anything malformed is one :class:`MetricInputError`
        naming the file and the array (never an unpickled object)."""
        path = Path(path)
        if path.is_dir():
            path = path / RECORD_FILE
        arrays = npz_arrays(path)
        meta = json_member(arrays, "meta_json", path)
        if meta.get("format") != FORMAT:
            raise MetricInputError(
                f"{path}: not a selective record (format {str(meta.get('format'))[:60]!r}, expected {FORMAT!r})"
            )
        domain = meta.get("domain", "")
        if not isinstance(domain, str):
            raise MetricInputError(f"{path}: meta_json domain: expected a string, got {type(domain).__name__}")
        names = member(arrays, "class_names", path, kinds="U", ndim=1)
        record = cls(
            y_true=member(arrays, "y_true", path, kinds="iu", ndim=1).astype(np.int64),
            y_pred=member(arrays, "y_pred", path, kinds="iu", ndim=1).astype(np.int64),
            confidence=member(arrays, "confidence", path, kinds="f", ndim=1).astype(np.float64),
            class_names=tuple(str(c) for c in names),
            domain=domain,
        )
        check_record(path, record)
        return record


def check_record(path, record: SelectiveRecord) -> None:
    """One length ``n >= 1`` for the three arrays, labels in ``0..C-1``, finite confidences; else one
    :class:`MetricInputError` naming the file, the array and the index."""
    n, num_classes = record.num_test, len(record.class_names)
    if num_classes == 0:
        raise MetricInputError(f"{path}: array 'class_names' is empty, expected one name per class")
    if n == 0:
        raise MetricInputError(f"{path}: array 'y_true' is empty: the record holds no test sample")
    for name in ("y_pred", "confidence"):
        got = np.shape(getattr(record, name))
        if got != (n,):
            raise MetricInputError(f"{path}: array {name!r} has shape {got}, expected ({n},) like 'y_true'")
    for name in ("y_true", "y_pred"):
        labels = getattr(record, name)
        bad = (labels < 0) | (labels >= num_classes)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise MetricInputError(
                f"{path}: array {name!r} [{i}] is {int(labels[i])}, expected a class label in 0..{num_classes - 1}"
            )
    bad = ~np.isfinite(record.confidence)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise MetricInputError(
            f"{path}: array 'confidence' [{i}] is {record.confidence[i]}, expected a finite float "
            f"({int(bad.sum())} non-finite value(s))"
        )


def read_saved(file: Path, *, settings: Mapping[str, Any], chunk_size: int) -> SourceData:
    """A ``selective_record.npz`` saved by a run, to re-score (``owl-eval-evaluate +source=record``)."""
    record = SelectiveRecord.load(file)
    return SourceData("selective", record, {"test_samples": str(record.num_test)})
