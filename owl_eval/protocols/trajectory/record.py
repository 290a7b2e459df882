"""The trajectory record: General-Framework arrays (FORMATS.md, seed 003) in one ``.npz``, no pickle.

``Path_true[N_S, 1, N_A, N_O, 2]``, ``Path_pred[N_S, N_P, N_A, N_O, 2]``, ``Pred_steps[N_S, N_A, N_O]`` (bool,
the steps that count), ``Path_history[N_S, N_A, N_I, 2]`` (NaN = not observed), optional ``Log_probs[N_S,
N_P + 1, N_A]`` (last column: the truth), class arrays ``P_true[N, C]`` / ``P_pred[N, C]`` with
``Class_names[C]`` and ``Class_index[N, 2]`` (scene, agent) of each classified agent, plus ``Scene_source`` /
``Scene_frame`` (provenance), ``dt`` and ``Metric_seed``. :func:`owl_eval.protocols.trajectory.evaluation.trajectory_table_npz` reads the file directly.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from owl_eval.formats.checksums import seal
from owl_eval.formats.names import distinct_names, text_names
from owl_eval.formats.npz import member, npz_arrays
from owl_eval.metrics.validation import MetricInputError

RECORD_FILE = "trajectory_record.npz"


@dataclass
class TrajectoryRecord:
    path_true: np.ndarray  # [N_S, 1, N_A, N_O, 2]
    path_pred: np.ndarray  # [N_S, N_P, N_A, N_O, 2]
    pred_steps: np.ndarray  # [N_S, N_A, N_O] bool
    path_history: np.ndarray  # [N_S, N_A, N_I, 2]
    p_true: np.ndarray  # [N, C]
    p_pred: np.ndarray  # [N, C]
    class_index: np.ndarray  # [N, 2] (scene, agent)
    class_names: np.ndarray  # [C] str
    scene_source: np.ndarray  # [N_S] str
    scene_frame: np.ndarray  # [N_S] int
    dt: float
    metric_seed: int = 0  # seeds the K-subsets of the *_K metrics, so a saved record gives the same numbers
    log_probs: np.ndarray | None = None  # [N_S, N_P + 1, N_A]

    @property
    def num_scenes(self) -> int:
        return self.path_pred.shape[0]

    def save(self, directory: str | Path) -> Path:
        path = Path(directory) / RECORD_FILE
        arrays: dict[str, Any] = {  # Any: a **dict[str, ndarray] could fill savez_compressed's allow_pickle: bool
            "Path_true": self.path_true,
            "Path_pred": self.path_pred,
            "Pred_steps": self.pred_steps.astype(bool),
            "Path_history": self.path_history,
            "P_true": self.p_true,
            "P_pred": self.p_pred,
            "Class_index": self.class_index.astype(np.int64),
            "Class_names": np.asarray(self.class_names, dtype=str),
            "Scene_source": np.asarray(self.scene_source, dtype=str),
            "Scene_frame": np.asarray(self.scene_frame, dtype=np.int64),
            "dt": np.array(float(self.dt)),
            "Metric_seed": np.array(int(self.metric_seed), dtype=np.int64),
        }
        if self.log_probs is not None:
            arrays["Log_probs"] = self.log_probs
        # compressed: an ETH/UCY job's record is 97 MB stored, far less deflated; owl_eval.formats.npz reads
        # deflated members into memory (stored ones, e.g. General-Framework files, stay memory-mapped)
        np.savez_compressed(path, **arrays)
        seal(directory)  # the re-score checks the record against these
        return path

    @classmethod
    def load(cls, path: str | Path) -> TrajectoryRecord:
        """A saved record (the file or its folder): every member's CRC, dtype and number of axes checked
        (one ``ValueError`` naming the file and the member); the values are checked by the record source."""
        path = Path(path)
        if path.is_dir():
            path = path / RECORD_FILE
        return cls.from_arrays(npz_arrays(path), path)

    @classmethod
    def from_arrays(cls, arrays, path) -> TrajectoryRecord:
        def get(name, ndim, kinds="biuf"):
            return member(arrays, name, path, kinds=kinds, ndim=ndim)

        dt, seed = get("dt", 0, "iuf"), get("Metric_seed", 0, "iu")
        if not (np.isfinite(dt) and dt > 0):
            raise MetricInputError(f"{path}: array 'dt' is {dt.item()!r}, expected a positive number of seconds")
        if not 0 <= int(seed) < 2**63:
            raise MetricInputError(f"{path}: array 'Metric_seed' is {int(seed)}, expected an integer in [0, 2**63)")
        path_true = get("Path_true", 5)
        if path_true.shape[0] == 0:  # every metric would be N/A: a run of nothing is refused, not logged
            raise MetricInputError(f"{path}: array 'Path_true' holds no scene (shape {path_true.shape}); expected one")
        return cls(
            path_true=path_true,
            path_pred=get("Path_pred", 5),
            pred_steps=get("Pred_steps", 3),
            path_history=get("Path_history", 4),
            p_true=get("P_true", 2),
            p_pred=get("P_pred", 2),
            class_index=get("Class_index", 2, "iu"),
            class_names=_names(get("Class_names", 1, "US"), path, "Class_names", "class name"),
            scene_source=_names(get("Scene_source", 1, "US"), path, "Scene_source", "scene source"),
            scene_frame=get("Scene_frame", 1, "iu"),
            dt=float(dt),
            metric_seed=int(seed),
            log_probs=get("Log_probs", 3) if "Log_probs" in arrays else None,
        )

    @staticmethod
    def concatenate(parts: list[TrajectoryRecord]) -> TrajectoryRecord:
        """Records of consecutive scene batches (same agent width) as one record; class indices re-based."""
        offsets = np.cumsum([0] + [p.num_scenes for p in parts[:-1]])
        cat = lambda name: np.concatenate([getattr(p, name) for p in parts])  # noqa: E731
        index = np.concatenate([p.class_index + np.array([o, 0]) for p, o in zip(parts, offsets)])
        return TrajectoryRecord(
            cat("path_true"),
            cat("path_pred"),
            cat("pred_steps"),
            cat("path_history"),
            cat("p_true"),
            cat("p_pred"),
            index,
            parts[0].class_names,
            cat("scene_source"),
            cat("scene_frame"),
            parts[0].dt,
            parts[0].metric_seed,
            cat("log_probs") if parts[0].log_probs is not None else None,
        )


def _names(array: np.ndarray, path, name: str, what: str) -> np.ndarray:
    """A string member as text (``S`` bytes decoded as UTF-8), class names each once: one error naming the file and
    the member otherwise."""
    where = f"{path}: array {name!r}"
    names = text_names(array, where=where, what=what, error=MetricInputError)
    if what == "class name":
        distinct_names(names, where=where, error=MetricInputError)
    return np.array(names, dtype=str)
