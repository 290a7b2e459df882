"""Trajectory records saved by owl-eval runs, read back for re-scoring: ``trajectory_record.npz`` (a live
run's arrays) and ``trajectory_source.json`` (a trajectories-source run: the file it names is read again).

The record is user data once downloaded: every check runs before any MLflow run exists and raises one
:class:`~owl_eval.sources.SourceFormatError` naming the file, the array and the index of what is wrong.
(Member presence, dtypes and axes are checked when the record is read: ``TrajectoryRecord.from_arrays``.)
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from owl_eval.formats.checksums import sha256_of
from owl_eval.protocols.trajectory.sources.checks import (
    check_class_outputs,
    check_coordinates,
    check_log_probs,
)
from owl_eval.sources import SourceData, SourceFormatError
from owl_eval.sources.record import UNVERIFIED_TAG, read_json_object

log = logging.getLogger(__name__)


def read_saved(file: Path, *, settings: Mapping[str, Any], chunk_size: int) -> SourceData:
    from owl_eval.protocols.trajectory.record import TrajectoryRecord

    record = TrajectoryRecord.load(file)
    check_trajectory(file, record)
    return SourceData("trajectory", record, {"scenes": str(record.num_scenes)})


def read_source_summary(file: Path, *, settings: Mapping[str, Any], chunk_size: int) -> SourceData:
    """A trajectories-source run's summary: the .npz it names is read (and checked) again."""
    from owl_eval.protocols.trajectory.sources.trajectories import TrajectoriesSource

    summary = read_json_object(file)
    path, arrays, seed = summary.get("path"), summary.get("arrays", {}), summary.get("seed", 0)
    if not isinstance(path, str) or not path:
        raise SourceFormatError(f"{file}: key 'path': expected the .npz file name, got {str(path)[:60]!r}")
    if not isinstance(arrays, dict) or not all(isinstance(v, str) or v is None for v in arrays.values()):
        raise SourceFormatError(f"{file}: key 'arrays': expected an object of array names (strings or null)")
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
        raise SourceFormatError(f"{file}: key 'seed': expected an integer in [0, 2**63), got {str(seed)[:30]}")
    unverified = _check_named_file(file, Path(path), summary.get("sha256"))
    source = TrajectoriesSource(
        path,
        chunk_size=chunk_size,
        true_key=arrays.get("true") or "Path_true",
        pred_key=arrays.get("pred") or "Path_pred",
        mask_key=arrays.get("mask") or "Pred_steps",
        log_probs=arrays.get("log_probs"),
        seed=seed,
    )
    try:
        data = source.load()
    except SourceFormatError as exc:
        raise SourceFormatError(f"{exc} (the file named by {file})") from None
    data.tags |= {UNVERIFIED_TAG: "true"} if unverified else {"owl_eval.predictions_sha256": summary["sha256"]}
    return data


def _check_named_file(file: Path, path: Path, recorded: object) -> bool:
    """The predictions file a summary names, compared with the SHA-256 the run recorded: rewritten since, one error
    naming it and both checksums. Returns whether it went unchecked (a summary that records no checksum)."""
    if recorded is None:
        log.warning(
            "%s: no sha256 of %s (saved before owl-eval kept checksums): the file cannot be checked against the "
            "run that scored it; the run is tagged %s=true",
            file,
            path,
            UNVERIFIED_TAG,
        )
        return True
    if not isinstance(recorded, str) or len(recorded) != 64:
        raise SourceFormatError(f"{file}: key 'sha256': expected 64 hex digits, got {str(recorded)[:80]!r}")
    if not path.is_file():
        return False  # the source names what is missing
    now = sha256_of(path)
    if now != recorded:
        raise SourceFormatError(
            f"{path}: changed since the run scored it (sha256 recorded in {file} {recorded}, now {now}); restore "
            f"the file, or score it as new results, not as that run's: +source=trajectories source.path={path}"
        )
    return False


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
