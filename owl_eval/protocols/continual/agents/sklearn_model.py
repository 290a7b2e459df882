"""Any scikit-learn estimator with ``partial_fit`` as a continual learner (``agent=continual/sklearn``), named in
YAML: ``SGDClassifier``, ``MLPClassifier``, ``Perceptron``, ``PassiveAggressiveClassifier``, ``MultinomialNB`` ...

- ``setup``: a fresh copy of ``estimator`` (scikit-learn's ``clone``), every ``random_state`` left at None drawn from
  the learner's generator (a value set in the YAML is kept).
- ``learn(task_id, X, y)``: ``epochs`` passes over the task's training data (with the replay buffer's samples, if
  any), shuffled from the learner's generator each pass, given to ``partial_fit`` whole (``batch_size: null``) or
  in mini-batches of ``batch_size``; the first call passes ``classes`` = every class of the sequence (scikit-learn
  needs them up front). Then the task's samples are offered to the buffer.
- ``replay: {size, per_task}`` (optional): ``per_task: false`` keeps one reservoir of ``size`` samples over
  everything seen (each seen sample kept with equal probability); ``per_task: true`` keeps ``size`` samples of
  every past task (drawn without replacement), so the buffer grows with the sequence.
- ``predict(X, task_id)``: ``estimator.predict``; given a task id whose classes are known, the answer is the best
  of that task's classes by ``predict_proba`` or ``decision_function`` (``predict`` alone cannot be restricted).
  Before the first ``learn`` (the protocol's evaluation of the untrained learner) the estimator cannot predict:
  labels are drawn uniformly from the classes (of the task, if known) with a generator of their own.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from owl_eval.errors import ConfigError
from owl_eval.protocols.adapters import describe, fresh, has_method, require_methods, resolve, seed_estimator
from owl_eval.protocols.base import AgentOutputError, real_array
from owl_eval.protocols.continual.agents.base import TaskClassMemory, check_xy
from owl_eval.protocols.continual.agents.replay import ReservoirBuffer
from owl_eval.typed import as_bool, as_int, check_keys


class SklearnContinualLearner(TaskClassMemory):
    def __init__(
        self,
        estimator: Any,
        epochs: int = 1,
        batch_size: int | None = None,
        replay: dict | None = None,
    ):
        self.estimator = resolve(estimator, "agent.estimator")
        if isinstance(self.estimator, str) or self.estimator is None:
            raise ConfigError(
                "agent.estimator: expected a scikit-learn estimator with partial_fit (a node with _target_, e.g. "
                f"sklearn.linear_model.SGDClassifier), got {self.estimator!r}"
            )
        require_methods(
            self.estimator,
            "agent.estimator",
            ("partial_fit", "predict"),
            need="a continual learner needs partial_fit(X, y, classes) and predict(X)",
            hint="SGDClassifier, MLPClassifier, Perceptron, PassiveAggressiveClassifier, the naive Bayes classifiers; "
            "a Pipeline has no partial_fit",
        )
        self.epochs = as_int(epochs, "agent.epochs", minimum=1)
        self.batch_size = None if batch_size is None else as_int(batch_size, "agent.batch_size", minimum=1)
        if replay is not None and not isinstance(replay, Mapping):
            raise ConfigError(f"agent.replay: expected null or {{size: <int>, per_task: <bool>}}, got {replay!r}")
        self.replay = dict(replay) if replay else None
        if self.replay is not None:
            check_keys(self.replay, ("size", "per_task"), "agent.replay")
            self.replay_size = as_int(self.replay.get("size", 200), "agent.replay.size", minimum=1)
            self.replay_per_task = as_bool(self.replay.get("per_task", False), "agent.replay.per_task")
        self.model: Any = None

    def setup(self, num_features: int, num_classes: int, rng: np.random.Generator) -> None:
        self.num_features, self.num_classes = int(num_features), int(num_classes)
        self._reset_task_classes()
        self._rng, guess_rng, model_rng = rng.spawn(3)
        self._guess_rng = guess_rng
        self.model = seed_estimator(fresh(self.estimator), model_rng)
        self.fitted = False
        self.reservoir = ReservoirBuffer(self.replay_size, self.num_features) if self.replay else None
        self.per_task: list[tuple[np.ndarray, np.ndarray]] = []

    # -- learning ------------------------------------------------------------------------------------------
    def _buffer(self) -> tuple[np.ndarray, np.ndarray] | None:
        if self.replay is None:
            return None
        if self.replay_per_task:
            if not self.per_task:
                return None
            return np.concatenate([x for x, _ in self.per_task]), np.concatenate([y for _, y in self.per_task])
        assert self.reservoir is not None
        if self.reservoir.size == 0:
            return None
        return self.reservoir.X[: self.reservoir.size].copy(), self.reservoir.y[: self.reservoir.size].copy()

    def learn(self, task_id: int, X: np.ndarray, y: np.ndarray) -> None:
        if self.model is None:
            raise RuntimeError("SklearnContinualLearner.learn called before setup")
        X, y = check_xy(X, y, self.num_features, self.num_classes, f"agent.learn(task {task_id})")
        self._record_seen(task_id, y)
        old = self._buffer()
        data_X, data_y = (X, y) if old is None else (np.concatenate([X, old[0]]), np.concatenate([y, old[1]]))
        classes = np.arange(self.num_classes)
        for _ in range(self.epochs):
            order = self._rng.permutation(len(data_y))
            step = len(order) if self.batch_size is None else self.batch_size
            for start in range(0, len(order), step):
                rows = order[start : start + step]
                if self.fitted:
                    self.model.partial_fit(data_X[rows], data_y[rows])
                else:
                    self.model.partial_fit(data_X[rows], data_y[rows], classes=classes)
                    self.fitted = True
        self._remember(X, y)

    def _remember(self, X: np.ndarray, y: np.ndarray) -> None:
        if self.replay is None:
            return
        if self.replay_per_task:
            keep = self._rng.choice(len(y), size=min(self.replay_size, len(y)), replace=False)
            self.per_task.append((X[keep], y[keep]))
        else:
            assert self.reservoir is not None
            self.reservoir.add(X, y, self._rng)

    # -- predicting ----------------------------------------------------------------------------------------
    def predict(self, X, task_id: int | None = None) -> np.ndarray:
        if self.model is None:
            raise RuntimeError("SklearnContinualLearner.predict called before setup")
        X, _ = check_xy(X, None, self.num_features, self.num_classes, "agent.predict")
        classes = None if task_id is None else self.task_classes(task_id)
        if not self.fitted:  # untrained: a uniform guess
            choices = np.arange(self.num_classes) if classes is None else classes
            return self._guess_rng.choice(choices, size=len(X)).astype(np.int64)
        if classes is None or len(classes) == self.num_classes:
            return self.model.predict(X)
        for method in ("predict_proba", "decision_function"):
            if has_method(self.model, method):
                scores = self._scores(method, X)
                return np.asarray(classes)[np.argmax(scores[:, classes], axis=1)].astype(np.int64)
        return self.model.predict(X)  # no scores to restrict: the unrestricted answer

    def _scores(self, method: str, X: np.ndarray) -> np.ndarray:
        """``method``'s scores ``[n, num_classes]`` (columns for classes 0..num_classes-1)."""
        where = f"agent.estimator ({describe(self.model)})"
        scores = real_array(getattr(self.model, method)(X), f"{method}(X)", where=where).astype(np.float64)
        if scores.ndim == 1 and self.num_classes == 2:  # a binary margin: positive = class 1
            scores = np.column_stack([-scores, scores])
        if scores.shape != (len(X), self.num_classes):
            raise AgentOutputError(
                f"{where}: {method}(X) returned shape {scores.shape}, expected {(len(X), self.num_classes)}"
            )
        return scores
