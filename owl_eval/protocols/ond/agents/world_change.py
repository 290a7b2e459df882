"""P(world changed) from a novelty score: the windowed binomial test of knn_novelty, shared by the agents that use it.

Within a trial each sample's score is an exceedance when above ``world_cut`` (the ``world_quantile`` of the known
training scores, so a known sample exceeds it with probability 1 - world_quantile). Over the last ``window``
samples, the count of exceedances is tested against that binomial rate; the p-value times ``tests_per_trial``
(Bonferroni over the tests a trial makes) gives P(changed) = 1 - min(1, p x tests), held monotone within the
trial, and 1 from the red light on.
"""

from __future__ import annotations

import numpy as np
from scipy.stats import binom


class WorldChangeTest:
    """The test's state over one trial (:meth:`reset` at each trial start)."""

    def __init__(self, *, world_cut: float, window: int, world_quantile: float, tests_per_trial: float):
        self.world_cut, self.window = world_cut, window
        self.world_quantile, self.tests_per_trial = world_quantile, tests_per_trial
        self.reset()

    def reset(self) -> None:
        self.exceedances: list[np.ndarray] = []
        self.p_world = 0.0

    def __call__(self, score: np.ndarray, novelty_started: bool) -> np.ndarray:
        """P(world changed) for each sample of a batch with novelty scores ``score``."""
        n = len(score)
        if novelty_started:
            self.p_world = 1.0
            return np.ones(n)
        self.exceedances.append(score > self.world_cut)
        history = np.concatenate(self.exceedances)
        counts = np.concatenate([[0], np.cumsum(history)])
        end = np.arange(len(history) - n, len(history)) + 1  # exclusive end of each sample's window
        start = np.maximum(end - self.window, 0)
        hits, seen = counts[end] - counts[start], end - start
        p_value = binom.sf(hits - 1, seen, 1.0 - self.world_quantile)
        p = np.maximum.accumulate(np.maximum(1.0 - np.minimum(1.0, p_value * self.tests_per_trial), self.p_world))
        self.p_world = float(p[-1])
        return p
