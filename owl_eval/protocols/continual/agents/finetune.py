"""Finetune: one linear classifier trained on each task in turn, nothing kept from earlier tasks (lower bound)."""

from __future__ import annotations

import numpy as np

from owl_eval.protocols.continual.agents._linear import LinearLearner


class Finetune(LinearLearner):
    """Softmax regression over all classes, trained by SGD on the current task only.

    Knobs: ``epochs`` passes over each task, ``batch_size``, ``learning_rate``, ``l2`` (weight decay),
    ``init_scale`` (std of the initial weights, drawn from the setup generator).
    """

    def learn(self, task_id: int, X: np.ndarray, y: np.ndarray) -> None:
        X, y = self._check_learn(task_id, X, y)
        self._fit(X, y)
