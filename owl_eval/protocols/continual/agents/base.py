"""Shared pieces of the continual baselines (the interface is :mod:`owl_eval.protocols.continual.api`)."""

from __future__ import annotations

from typing import overload

import numpy as np
import numpy.typing as npt

from owl_eval.protocols.continual.api import ContinualLearner

__all__ = ["ContinualLearner", "TaskClassMemory", "check_xy"]


class TaskClassMemory:
    """Remembers which classes each task holds (declared, or seen in ``learn``) and masks logits with it."""

    num_classes: int  # set by the learner's setup

    def _reset_task_classes(self) -> None:
        self._declared: dict[int, np.ndarray] = {}
        self._seen: dict[int, np.ndarray] = {}

    def classes_for_task(self, task_id: int, classes) -> None:
        """Declare the classes of ``task_id`` (used by ``predict(X, task_id)``); call after ``setup``."""
        if not hasattr(self, "_declared"):
            raise RuntimeError(f"{type(self).__name__}.classes_for_task called before setup")
        classes = np.unique(np.asarray(classes, dtype=np.int64))
        if classes.size == 0:
            raise ValueError(f"classes_for_task: task {task_id} must have at least one class")
        self._check_labels(classes, f"classes_for_task(task {task_id})")
        self._declared[int(task_id)] = classes

    def _record_seen(self, task_id: int, y: np.ndarray) -> None:
        prev = self._seen.get(int(task_id))
        labels = np.unique(y)
        self._seen[int(task_id)] = labels if prev is None else np.union1d(prev, labels)

    def task_classes(self, task_id: int) -> np.ndarray | None:
        """The classes of ``task_id`` (declared first, else seen in training), or None if unknown."""
        task_id = int(task_id)
        if task_id in self._declared:
            return self._declared[task_id]
        return self._seen.get(task_id)

    def _mask_logits(self, logits: np.ndarray, task_id: int | None) -> np.ndarray:
        if task_id is None:
            return logits
        classes = self.task_classes(task_id)
        if classes is None:
            return logits
        masked = np.full_like(logits, -np.inf)
        masked[:, classes] = logits[:, classes]
        return masked

    def _check_labels(self, y: np.ndarray, where: str) -> None:
        if y.size and (y.min() < 0 or y.max() >= self.num_classes):
            raise ValueError(f"{where}: labels must lie in 0..{self.num_classes - 1}, got {y.min()}..{y.max()}")


@overload
def check_xy(X, y: None, num_features: int, num_classes: int, where: str) -> tuple[np.ndarray, None]: ...
@overload
def check_xy(X, y: npt.ArrayLike, num_features: int, num_classes: int, where: str) -> tuple[np.ndarray, np.ndarray]: ...
def check_xy(X, y, num_features: int, num_classes: int, where: str) -> tuple[np.ndarray, np.ndarray | None]:
    """X as float [n, num_features] (finite), y as int [n] in 0..num_classes-1; ValueError naming ``where``."""
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != num_features:
        raise ValueError(f"{where}: X must have shape [n, {num_features}], got {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"{where}: X must be finite")
    if y is None:
        return X, None
    y_arr = np.asarray(y)
    if y_arr.shape != (X.shape[0],) or (y_arr.size and not np.all(y_arr == np.round(y_arr))):
        raise ValueError(f"{where}: y must be whole class labels of shape [{X.shape[0]}], got shape {y_arr.shape}")
    y_arr = y_arr.astype(np.int64)
    if y_arr.size and (y_arr.min() < 0 or y_arr.max() >= num_classes):
        raise ValueError(f"{where}: labels must lie in 0..{num_classes - 1}, got {y_arr.min()}..{y_arr.max()}")
    return X, y_arr
