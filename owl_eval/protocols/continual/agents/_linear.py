"""A multinomial logistic (softmax) regression trained by mini-batch SGD in numpy: the baselines' model."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from owl_eval.errors import ConfigError
from owl_eval.protocols.continual.agents.base import TaskClassMemory, check_xy

# draws extra (X, y) rows to mix into one mini-batch (replay); arguments: the batch size, the generator
ExtraSampler = Callable[[int, np.random.Generator], "tuple[np.ndarray, np.ndarray] | None"]


class SoftmaxRegression:
    """``softmax(X W + c)`` over ``num_classes`` outputs; weights start as N(0, ``init_scale``²), biases 0."""

    def __init__(self, num_features: int, num_classes: int, rng: np.random.Generator, init_scale: float = 0.01):
        self.W = (
            rng.normal(0.0, init_scale, size=(num_features, num_classes))
            if init_scale > 0
            else np.zeros((num_features, num_classes))
        )
        self.c = np.zeros(num_classes)

    def logits(self, X: np.ndarray) -> np.ndarray:
        return X @ self.W + self.c

    def step(self, X: np.ndarray, y: np.ndarray, learning_rate: float, l2: float) -> None:
        """One gradient step on the mean cross-entropy of (X, y) plus ``l2/2 ||W||²``."""
        z = self.logits(X)
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        p[np.arange(y.size), y] -= 1.0
        p /= y.size
        self.W -= learning_rate * (X.T @ p + l2 * self.W)
        self.c -= learning_rate * p.sum(axis=0)

    def fit(
        self,
        X: np.ndarray,
        y: np.ndarray,
        *,
        epochs: int,
        batch_size: int,
        learning_rate: float,
        l2: float,
        rng: np.random.Generator,
        extra: ExtraSampler | None = None,
    ) -> None:
        """``epochs`` passes over (X, y) in mini-batches, reshuffled each epoch from ``rng``."""
        n = y.size
        for _ in range(epochs):
            order = rng.permutation(n)
            for start in range(0, n, batch_size):
                idx = order[start : start + batch_size]
                Xb, yb = X[idx], y[idx]
                if extra is not None:
                    more = extra(idx.size, rng)
                    if more is not None:
                        Xb = np.concatenate([Xb, more[0]])
                        yb = np.concatenate([yb, more[1]])
                self.step(Xb, yb, learning_rate, l2)


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ConfigError(f"agent.{name} must be a positive whole number, got {value!r}")
    return int(value)


def _non_negative_float(name: str, value, *, positive: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ConfigError(f"agent.{name} must be a number, got {value!r}")
    value = float(value)
    if not np.isfinite(value) or value < 0 or (positive and value == 0):
        raise ConfigError(
            f"agent.{name} must be a finite {'positive' if positive else 'non-negative'} number, got {value!r}"
        )
    return value


class LinearLearner(TaskClassMemory):
    """Shared by the baselines: a softmax regression over all classes, task-aware prediction by masking."""

    def __init__(
        self,
        epochs: int = 10,
        batch_size: int = 32,
        learning_rate: float = 0.1,
        l2: float = 0.0,
        init_scale: float = 0.01,
    ):
        self.epochs = _positive_int("epochs", epochs)
        self.batch_size = _positive_int("batch_size", batch_size)
        self.learning_rate = _non_negative_float("learning_rate", learning_rate, positive=True)
        self.l2 = _non_negative_float("l2", l2)
        self.init_scale = _non_negative_float("init_scale", init_scale)
        self.model: SoftmaxRegression | None = None

    def setup(self, num_features: int, num_classes: int, rng: np.random.Generator) -> None:
        if not isinstance(rng, np.random.Generator):
            raise TypeError(f"setup: rng must be a numpy.random.Generator, got {type(rng).__name__}")
        self.num_features = _positive_int("num_features", num_features)
        self.num_classes = _positive_int("num_classes", num_classes)
        self._rng = rng
        self._reset_task_classes()
        self.model = self._new_model()

    def _new_model(self) -> SoftmaxRegression:
        return SoftmaxRegression(self.num_features, self.num_classes, self._rng, self.init_scale)

    def _fit(self, X, y, extra: ExtraSampler | None = None) -> None:
        assert self.model is not None  # _check_learn ran
        self.model.fit(
            X,
            y,
            epochs=self.epochs,
            batch_size=self.batch_size,
            learning_rate=self.learning_rate,
            l2=self.l2,
            rng=self._rng,
            extra=extra,
        )

    def _check_learn(self, task_id, X, y) -> tuple[np.ndarray, np.ndarray]:
        if self.model is None:
            raise RuntimeError(f"{type(self).__name__}.learn called before setup")
        X, y = check_xy(X, y, self.num_features, self.num_classes, f"{type(self).__name__}.learn(task {task_id})")
        if y.size == 0:
            raise ValueError(f"{type(self).__name__}.learn(task {task_id}): no training samples")
        self._record_seen(task_id, y)
        return X, y

    def predict(self, X, task_id: int | None = None) -> np.ndarray:
        if self.model is None:
            raise RuntimeError(f"{type(self).__name__}.predict called before setup")
        X, _ = check_xy(X, None, self.num_features, self.num_classes, f"{type(self).__name__}.predict")
        return np.argmax(self._mask_logits(self.model.logits(X), task_id), axis=1).astype(np.int64)
