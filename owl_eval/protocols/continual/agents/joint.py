"""Joint: retrains from scratch on all data seen so far after every task (upper bound)."""

from __future__ import annotations

import numpy as np

from owl_eval.protocols.continual.agents._linear import LinearLearner


class Joint(LinearLearner):
    """Keeps every training sample; at each task re-initialises the model and trains on all of them.

    Same model and knobs as :class:`~owl_eval.protocols.continual.agents.finetune.Finetune`.
    """

    def setup(self, num_features: int, num_classes: int, rng: np.random.Generator) -> None:
        super().setup(num_features, num_classes, rng)
        self._X: list[np.ndarray] = []
        self._y: list[np.ndarray] = []

    def learn(self, task_id: int, X: np.ndarray, y: np.ndarray) -> None:
        X, y = self._check_learn(task_id, X, y)
        self._X.append(X)
        self._y.append(y)
        self.model = self._new_model()
        self._fit(np.concatenate(self._X), np.concatenate(self._y))
