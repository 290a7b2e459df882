"""Finetune: one linear classifier trained on each task in turn, nothing kept from earlier tasks (lower bound)."""
from __future__ import annotations

import numpy as np

from agents.continual._linear import LinearLearner


class Finetune(LinearLearner):
    """Softmax regression over all classes, trained by SGD on the current task only.

    Knobs: ``epochs`` passes over each task, ``batch_size``, ``learning_rate``, ``l2`` (weight decay),
    ``init_scale`` (std of the initial weights, drawn from the setup generator).
    """

    def __init__(
        self,
        epochs: int = 10,
        batch_size: int = 32,
        learning_rate: float = 0.1,
        l2: float = 0.0,
        init_scale: float = 0.01,
    ):
        super().__init__(epochs=epochs, batch_size=batch_size, learning_rate=learning_rate, l2=l2, init_scale=init_scale)

    def learn(self, task_id: int, X: np.ndarray, y: np.ndarray) -> None:
        X, y = self._check_learn(task_id, X, y)
        self._fit(X, y)
