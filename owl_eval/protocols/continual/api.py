"""The interface a continual learner implements (a ``typing.Protocol``: any class with these methods is one)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["ContinualLearner"]


@runtime_checkable
class ContinualLearner(Protocol):
    """A learner driven by the continual protocol.

    The protocol calls ``setup`` once, then for each task in order ``learn`` followed by ``predict`` on the
    test set of every task (and ``predict`` on every task once before the first ``learn``).

    - ``setup(num_features, num_classes, rng)``: (re)initialise; every random choice is drawn from ``rng``.
    - ``learn(task_id, X, y)``: train on task ``task_id``'s training data (``X [n, num_features]`` float,
      ``y [n]`` int in ``0..num_classes-1``). Labels are global (one label space for all tasks).
    - ``predict(X, task_id=None) -> int array [n]``: class-incremental when ``task_id`` is None (any of the
      ``num_classes``); task-incremental when ``task_id`` is given: the learner may restrict its answer to
      the classes of that task.

    Which classes belong to a task: by default the learner records the labels it saw in ``learn(task_id,
    ...)``. A protocol that knows the task's classes up front (e.g. ``ContinualTask.classes``) may call the
    optional ``classes_for_task(task_id, classes)`` where a learner has it; it takes precedence over labels
    seen in training. A task whose classes are unknown is predicted among all classes.
    """

    def setup(self, num_features: int, num_classes: int, rng: np.random.Generator) -> None: ...

    def learn(self, task_id: int, X: np.ndarray, y: np.ndarray) -> None: ...

    def predict(self, X: np.ndarray, task_id: int | None = None) -> np.ndarray: ...
