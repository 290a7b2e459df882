"""kNN novelty baseline: distance to the k-th nearest known sample as the novelty score.

- Calibration: leave-one-out k-th-neighbour distances inside the training split (the same statistic
  a held-out known sample would get), so ``q = quantile(calibration, unknown_quantile)`` marks "further
  than almost every known sample".
- ``p_unknown = sigmoid(temperature * (score / q - 1))``; the known-class scores are kNN votes scaled by
  ``1 - p_unknown``.
- ``P(world changed)``: within a trial, the count of samples whose score exceeds the calibration
  ``world_quantile`` over the last ``window`` samples is tested against Binomial(n, 1 - world_quantile);
  P = 1 - min(1, p-value x ``tests_per_trial``) (a Bonferroni correction: the test is repeated at every
  sample, and one stray far sample must not raise the alarm), kept monotone (a changed world stays changed).
- Given detection: from the red light on, P(world changed) is 1 and the unknown threshold drops by
  ``given_shift`` (novel samples are now expected).
"""

from __future__ import annotations

import numpy as np

from owl_eval.errors import ConfigError
from owl_eval.protocols.ond.agents.inputs import flat_features
from owl_eval.protocols.ond.agents.knn import (
    Standardizer,
    knn_class_probabilities,
    kth_neighbour_distance,
    squared_distances,
)
from owl_eval.protocols.ond.agents.world_change import WorldChangeTest
from owl_eval.protocols.ond.api import OndBatch
from owl_eval.typed import as_float, as_int


def _open_unit(value, key: str) -> float:
    return as_float(value, key, minimum=0.0, maximum=1.0, open_minimum=True, open_maximum=True)


def _positive(value, key: str) -> float:
    return as_float(value, key, minimum=0.0, open_minimum=True)


class KnnNoveltyAgent:
    def __init__(
        self,
        k_class: int = 5,
        k_novelty: int = 3,
        unknown_quantile: float = 0.95,
        temperature: float = 8.0,
        world_quantile: float = 0.95,
        window: int = 20,
        given_shift: float = 0.85,
        tests_per_trial: float = 100.0,
    ):
        self.k_class = as_int(k_class, "agent.k_class", minimum=1)
        self.k_novelty = as_int(k_novelty, "agent.k_novelty", minimum=1)
        self.unknown_quantile = _open_unit(unknown_quantile, "agent.unknown_quantile")
        self.world_quantile = _open_unit(world_quantile, "agent.world_quantile")
        self.temperature = _positive(temperature, "agent.temperature")
        self.window = as_int(window, "agent.window", minimum=1)
        self.given_shift = _positive(given_shift, "agent.given_shift")
        self.tests_per_trial = _positive(tests_per_trial, "agent.tests_per_trial")

    def check_training_size(self, num_samples: int, *, role: str = "agent") -> None:
        """Called before any run with the smallest training split the protocol can hand over: k_class
        neighbours among them, k_novelty among the others (leave-one-out calibration)."""
        for key, k, available in (
            ("k_class", self.k_class, num_samples),
            ("k_novelty", self.k_novelty, num_samples - 1),
        ):
            if k > available:
                raise ConfigError(
                    f"{role}.{key}: expected at most {available} (the {num_samples} training samples of "
                    f"the known classes{', less the sample itself' if key == 'k_novelty' else ''}), got {k}"
                )

    def fit(self, features, labels, *, num_known, rng):
        features = flat_features(features)
        self.standardize = Standardizer(features)
        self.train = self.standardize(features)
        self.train_labels = np.asarray(labels) - 1
        self.num_known = int(num_known)
        d2 = squared_distances(self.train, self.train)
        np.fill_diagonal(d2, np.inf)  # leave one out
        calibration = kth_neighbour_distance(d2, self.k_novelty)
        self.unknown_scale = float(np.quantile(calibration, self.unknown_quantile))
        self.world_cut = float(np.quantile(calibration, self.world_quantile))

    def start_trial(self, trial_id, num_samples):
        self.world_test = WorldChangeTest(
            world_cut=self.world_cut,
            window=self.window,
            world_quantile=self.world_quantile,
            tests_per_trial=self.tests_per_trial,
        )

    def predict_batch(self, batch: OndBatch):
        d2 = squared_distances(self.standardize(flat_features(batch.features)), self.train)
        score = kth_neighbour_distance(d2, self.k_novelty)
        scale = self.unknown_scale * (self.given_shift if batch.novelty_started else 1.0)
        p_unknown = 1.0 / (1.0 + np.exp(-self.temperature * (score / scale - 1.0)))
        known = knn_class_probabilities(d2, self.train_labels, self.num_known, k=self.k_class)
        p_class = np.concatenate([p_unknown[:, None], (1.0 - p_unknown)[:, None] * known], axis=1)
        return self._world_changed(score, batch), p_class

    def _world_changed(self, score: np.ndarray, batch: OndBatch) -> np.ndarray:
        return self.world_test(score, batch.novelty_started)
