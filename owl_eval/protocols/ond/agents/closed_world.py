"""Closed-world baseline: a kNN classifier over the known classes that never flags novelty."""

from __future__ import annotations

import numpy as np

from owl_eval.errors import ConfigError
from owl_eval.protocols.ond.agents.inputs import flat_features
from owl_eval.protocols.ond.agents.knn import Standardizer, knn_class_probabilities, squared_distances
from owl_eval.protocols.ond.api import OndBatch
from owl_eval.typed import as_int


class ClosedWorldAgent:
    def __init__(self, k: int = 5):
        self.k = as_int(k, "agent.k", minimum=1)

    def check_training_size(self, num_samples: int, *, role: str = "agent") -> None:
        """Called before any run with the smallest training split the protocol can hand over."""
        if self.k > num_samples:
            raise ConfigError(
                f"{role}.k: expected at most the {num_samples} training samples of the known classes, got {self.k}"
            )

    def fit(self, features, labels, *, num_known, rng):
        features = flat_features(features)
        self.standardize = Standardizer(features)
        self.train = self.standardize(features)
        self.train_labels = np.asarray(labels) - 1  # labels arrive as 1..K
        self.num_known = int(num_known)

    def start_trial(self, trial_id, num_samples):
        pass

    def predict_batch(self, batch: OndBatch):
        d2 = squared_distances(self.standardize(flat_features(batch.features)), self.train)
        known = knn_class_probabilities(d2, self.train_labels, self.num_known, k=self.k)
        p_class = np.concatenate([np.zeros((len(known), 1)), known], axis=1)
        return np.zeros(len(known)), p_class
