"""Replay (experience replay): finetune plus a reservoir buffer of past samples mixed into every mini-batch."""

from __future__ import annotations

import numpy as np

from owl_eval.protocols.continual.agents._linear import LinearLearner, _positive_int


class ReservoirBuffer:
    """At most ``capacity`` samples, each of the ``seen`` samples offered so far kept with equal probability.

    Reservoir sampling (Vitter's algorithm R) with the draws from the generator passed to ``add``.
    """

    def __init__(self, capacity: int, num_features: int):
        self.capacity = capacity
        self.X = np.empty((capacity, num_features))
        self.y = np.empty(capacity, dtype=np.int64)
        self.size = 0
        self.seen = 0

    def add(self, X: np.ndarray, y: np.ndarray, rng: np.random.Generator) -> None:
        for x_row, label in zip(X, y):
            if self.size < self.capacity:
                slot = self.size
                self.size += 1
            else:
                slot = int(rng.integers(0, self.seen + 1))
            if slot < self.capacity:
                self.X[slot] = x_row
                self.y[slot] = label
            self.seen += 1

    def sample(self, k: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray] | None:
        """Up to ``k`` distinct stored samples drawn uniformly, or None when empty."""
        if self.size == 0:
            return None
        idx = rng.choice(self.size, size=min(k, self.size), replace=False)
        return self.X[idx], self.y[idx]


class Replay(LinearLearner):
    """Finetune's model trained on each task with ``replay_batch_size`` buffer samples added to each mini-batch.

    The buffer (``buffer_size`` samples, reservoir sampling over every training sample seen, seeded from the
    setup generator) is filled with a task's samples after that task is learned, so it holds past tasks
    only while a task trains. ``replay_batch_size`` defaults to ``batch_size``. Other knobs as Finetune.
    """

    def __init__(
        self,
        buffer_size: int = 200,
        replay_batch_size: int | None = None,
        epochs: int = 10,
        batch_size: int = 32,
        learning_rate: float = 0.1,
        l2: float = 0.0,
        init_scale: float = 0.01,
    ):
        super().__init__(
            epochs=epochs, batch_size=batch_size, learning_rate=learning_rate, l2=l2, init_scale=init_scale
        )
        self.buffer_size = _positive_int("buffer_size", buffer_size)
        self.replay_batch_size = (
            self.batch_size if replay_batch_size is None else _positive_int("replay_batch_size", replay_batch_size)
        )

    def setup(self, num_features: int, num_classes: int, rng: np.random.Generator) -> None:
        super().setup(num_features, num_classes, rng)
        self.buffer = ReservoirBuffer(self.buffer_size, self.num_features)

    def learn(self, task_id: int, X: np.ndarray, y: np.ndarray) -> None:
        X, y = self._check_learn(task_id, X, y)
        k = self.replay_batch_size
        self._fit(X, y, extra=lambda _n, rng: self.buffer.sample(k, rng))
        self.buffer.add(X, y, self._rng)
