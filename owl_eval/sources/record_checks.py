"""Value checks of saved owl-eval records before they are re-scored (``owl_eval.sources.record``).

A record is the artifact of one of our runs, but it is user data once downloaded: it may be damaged,
hand-edited or from another version. Every check here runs before any MLflow run exists and raises one
:class:`~owl_eval.sources.SourceFormatError` naming the file, the array and the index of what is wrong.
(Member presence, dtypes and the number of axes are checked when the record is read:
``OndRecord.from_arrays``, ``ContinualRecord.from_arrays``, ``TrajectoryRecord.from_arrays``.)
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from owl_eval.sources import SourceFormatError
from owl_eval.sources.trajectory_checks import (
    MAX_ABS_COORDINATE,
    check_class_outputs,
    check_coordinates,
    check_log_probs,
)

MAX_TEST_SIZE = 2**53  # every whole number up to here is exact in float64


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


def check_trajectory(file: Path, record) -> None:
    """Shapes between the members, positions finite and within +-MAX_ABS_COORDINATE at counted steps,
    log-probs, class outputs and their (scene, agent) indices, provenance arrays."""
    true, pred, mask = record.path_true, record.path_pred, record.pred_steps
    n_s, n_p, n_a, n_o, two = pred.shape
    if two != 2 or n_p < 1:
        raise SourceFormatError(
            f"{file}: array 'Path_pred' has shape {pred.shape}, expected [N_S, N_P >= 1, N_A, N_O, 2]"
        )
    shapes = {
        "Path_true": (true, (n_s, 1, n_a, n_o, 2)),
        "Pred_steps": (mask, (n_s, n_a, n_o)),
        "Scene_source": (record.scene_source, (n_s,)),
        "Scene_frame": (record.scene_frame, (n_s,)),
    }
    if record.log_probs is not None:
        shapes["Log_probs"] = (record.log_probs, (n_s, n_p + 1, n_a))
    for key, (arr, shape) in shapes.items():
        if arr.shape != shape:
            raise SourceFormatError(
                f"{file}: array {key!r} has shape {arr.shape}, expected {list(shape)} (from 'Path_pred' {pred.shape})"
            )
    history = record.path_history
    if history.shape[:2] != (n_s, n_a) or history.shape[3] != 2:
        raise SourceFormatError(
            f"{file}: array 'Path_history' has shape {history.shape}, expected [{n_s}, {n_a}, N_I, 2]"
        )
    if mask.dtype != bool and not np.isin(mask, (0, 1)).all():
        raise SourceFormatError(f"{file}: array 'Pred_steps' holds values other than 0/1 (dtype {mask.dtype})")
    counted = mask.astype(bool)
    check_coordinates(file, "Path_true", true, counted[:, None], ("scene", "", "agent", "step"))
    check_coordinates(file, "Path_pred", pred, counted[:, None], ("scene", "prediction", "agent", "step"))
    seen = ~np.isnan(np.asarray(history, dtype=np.float64)).any(-1)  # NaN = not observed (only plotted)
    check_coordinates(file, "Path_history", history, seen, ("scene", "agent", "step"), mask_key="observed")
    if record.log_probs is not None:
        check_log_probs(file, "Log_probs", record.log_probs, counted.any(-1))
    p_true, p_pred = record.p_true, record.p_pred
    if len(p_true) or len(p_pred):
        check_class_outputs(file, "P_true", "P_pred", p_true, p_pred, rows=None, row="classified agent")
    index = record.class_index
    if index.shape != (len(p_true), 2):
        raise SourceFormatError(
            f"{file}: array 'Class_index' has shape {index.shape}, expected [{len(p_true)}, 2] "
            "(scene, agent of each classified agent)"
        )
    outside = (index < 0) | (index >= np.array([n_s, n_a]))
    if outside.any():
        i = int(np.argwhere(outside)[0][0])
        raise SourceFormatError(
            f"{file}: array 'Class_index' [{i}] = {index[i].tolist()} is not a (scene, agent) below ({n_s}, {n_a})"
        )
    if len(p_true) and record.class_names.shape != (p_true.shape[1],):
        raise SourceFormatError(
            f"{file}: array 'Class_names' has shape {record.class_names.shape}, expected "
            f"[{p_true.shape[1]}] (one per column of 'P_true')"
        )


__all__ = ["MAX_ABS_COORDINATE", "MAX_TEST_SIZE", "check_continual", "check_trajectory"]
