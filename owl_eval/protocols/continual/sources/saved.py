"""A continual record saved by an owl-eval run (``continual_record.npz``), read back for re-scoring.

The record is user data once downloaded: it may be damaged, hand-edited or from another version. Every
check runs before any MLflow run exists and raises one :class:`~owl_eval.sources.SourceFormatError` naming
the file, the array and the index of what is wrong. (Member presence, dtypes and axes are checked when the
record is read: ``ContinualRecord.from_arrays``.)
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from owl_eval.sources import SourceData, SourceFormatError

MAX_TEST_SIZE = 2**53  # every whole number up to here is exact in float64


def read_saved(file: Path, *, settings: Mapping[str, Any], chunk_size: int) -> SourceData:
    from owl_eval.protocols.continual.record import ContinualRecord
    from owl_eval.protocols.continual.sources.accuracy_matrix import GivenMatrixRecord

    record = ContinualRecord.load(file)
    has_init, has_sizes = check_continual(file, record)
    record = GivenMatrixRecord(
        **{
            f: getattr(record, f)
            for f in ("scenario", "accuracy", "init_accuracy", "num_instances", "task_classes", "domain")
        },
        has_init=has_init,
        has_sizes=has_sizes,
    )
    return SourceData("continual", record, {"scenario": record.scenario, "tasks": str(record.num_tasks)})


def check_continual(file: Path, record) -> tuple[bool, bool]:
    """The matrix ``[k <= T, T]`` in [0, 1]; ``b`` all NaN (unknown) or all in [0, 1]; ``n`` all 0 (unknown)
    or whole test sizes in 1..2**53. Returns ``(has_init, has_sizes)``."""
    A, T = np.asarray(record.accuracy), record.num_tasks
    if T == 0:
        raise SourceFormatError(f"{file}: the record has no task ('task_class_counts' is empty)")
    if A.ndim != 2 or A.shape[1] != T or A.shape[0] > T:
        raise SourceFormatError(f"{file}: array 'accuracy' has shape {A.shape}, expected [k <= {T}, {T}] ({T} tasks)")
    if A.shape[0] == 0:
        raise SourceFormatError(f"{file}: array 'accuracy' has no row: no task was completed, nothing to score")
    bad = ~((A >= 0) & (A <= 1))
    if bad.any():
        j, i = (int(x) for x in np.argwhere(bad)[0])
        raise SourceFormatError(f"{file}: array 'accuracy' [{j}, {i}] is {A[j, i]}, expected an accuracy in [0, 1]")
    for key, arr in (("init_accuracy", record.init_accuracy), ("num_instances", record.num_instances)):
        if np.shape(arr) != (T,):
            raise SourceFormatError(f"{file}: array {key!r} has shape {np.shape(arr)}, expected [{T}]")
    b, n = np.asarray(record.init_accuracy, dtype=np.float64), np.asarray(record.num_instances)
    has_init = not np.isnan(b).all()  # the accuracy_matrix source saves an unknown b as NaN, an unknown n as 0
    bad_b = ~((b >= 0) & (b <= 1)) if has_init else np.zeros(T, bool)
    if bad_b.any():
        i = int(np.argmax(bad_b))
        raise SourceFormatError(
            f"{file}: array 'init_accuracy' [{i}] is {b[i]}, expected an accuracy in [0, 1] "
            "(or NaN for every task: unknown)"
        )
    has_sizes = bool((n != 0).any())
    bad_n = ((n < 1) | (n > MAX_TEST_SIZE)) if has_sizes else np.zeros(T, bool)
    if bad_n.any():
        i = int(np.argmax(bad_n))
        raise SourceFormatError(
            f"{file}: array 'num_instances' [{i}] is {n[i]}, expected a test size in 1..2**53 "
            "(or 0 for every task: unknown)"
        )
    return has_init, has_sizes
