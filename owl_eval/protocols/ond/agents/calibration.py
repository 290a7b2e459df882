"""What the OND adapters share (``agent=ond/sklearn``, ``agent=ond/torch``): a novelty threshold calibrated on
held-out known-class data, ``p_unknown`` from it, and knn_novelty's world-change test.

- Calibration on known classes only: a stratified ``calibration_fraction`` of the training split (drawn from the
  agent's generator) is held out; the models are fitted on the rest and score it; the ``unknown_quantile`` of
  those scores is the threshold ``t``, their standard deviation the scale ``s`` (split conformal: the threshold
  holds for the scores of the models it was computed with).
- ``p_unknown = sigmoid(temperature * (score - t) / s)``; the known-class scores are the classifier's
  probabilities times ``1 - p_unknown`` (column 0 of ``p_class`` is "unknown").
- ``P(world changed)``: knn_novelty's test. Within a trial, the count of samples whose score is above the
  calibration scores' ``world_quantile`` among the last ``window`` samples (the recent unknown fraction) is
  tested against Binomial(n, 1 - world_quantile); P = 1 - min(1, p-value x ``tests_per_trial``), kept monotone.
  From the red light on (``condition: given``) P is 1 and the threshold drops by ``given_shift`` x ``s``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit

from owl_eval.errors import ConfigError
from owl_eval.protocols.ond.agents.world_change import WorldChangeTest
from owl_eval.protocols.ond.api import OndBatch
from owl_eval.typed import as_float, as_int


def open_unit(value, key: str) -> float:
    return as_float(value, key, minimum=0.0, maximum=1.0, open_minimum=True, open_maximum=True)


class CalibratedNovelty:
    """The calibration and world-change half of an OND adapter; the model half sets ``num_known`` and calls
    :meth:`_held_out` and :meth:`_calibrate` in ``fit`` and :meth:`_outputs` in ``predict_batch``."""

    num_known: int

    def _calibration_settings(
        self,
        calibration_fraction,
        unknown_quantile,
        temperature,
        world_quantile,
        window,
        tests_per_trial,
        given_shift,
    ) -> None:
        self.calibration_fraction = open_unit(calibration_fraction, "agent.calibration_fraction")
        self.unknown_quantile = open_unit(unknown_quantile, "agent.unknown_quantile")
        self.temperature = as_float(temperature, "agent.temperature", minimum=0.0, open_minimum=True)
        self.world_quantile = open_unit(world_quantile, "agent.world_quantile")
        self.window = as_int(window, "agent.window", minimum=1)
        self.tests_per_trial = as_float(tests_per_trial, "agent.tests_per_trial", minimum=0.0, open_minimum=True)
        self.given_shift = as_float(given_shift, "agent.given_shift", minimum=0.0)

    def check_training_size(self, num_samples: int, *, role: str = "agent") -> None:
        """Called before any run with the smallest training split the protocol can hand over."""
        if num_samples < 2:
            raise ConfigError(
                f"{role}.calibration_fraction: the {num_samples} training sample(s) of the known classes leave none "
                "to hold out for calibration"
            )

    def _held_out(self, y: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Stratified: ``calibration_fraction`` of each class (rounded down; each class keeps one sample to fit)."""
        held = np.zeros(len(y), dtype=bool)
        for c in range(1, self.num_known + 1):
            rows = rng.permutation(np.flatnonzero(y == c))
            take = min(int(np.floor(self.calibration_fraction * len(rows))), len(rows) - 1)
            held[rows[: max(take, 0)]] = True
        if not held.any():
            raise ConfigError(
                f"agent.calibration_fraction: {self.calibration_fraction:g} of the {len(y)} training samples "
                f"({self.num_known} classes) holds out none; raise it"
            )
        return held

    def _calibrate(self, scores: np.ndarray) -> None:
        """Threshold, world-test cut and scale from the held-out samples' novelty scores."""
        self.threshold = float(np.quantile(scores, self.unknown_quantile))
        self.world_cut = float(np.quantile(scores, self.world_quantile))
        spread = float(np.std(scores))
        self.scale = spread if spread > 1e-12 * max(1.0, abs(self.threshold)) else max(1.0, abs(self.threshold))

    def start_trial(self, trial_id, num_samples):
        self.world_test = WorldChangeTest(
            world_cut=self.world_cut,
            window=self.window,
            world_quantile=self.world_quantile,
            tests_per_trial=self.tests_per_trial,
        )

    def _outputs(self, proba: np.ndarray, score: np.ndarray, batch: OndBatch) -> tuple[np.ndarray, np.ndarray]:
        """``(p_world_changed, p_class)`` of a batch from its known-class probabilities and novelty scores."""
        threshold = self.threshold - (self.given_shift * self.scale if batch.novelty_started else 0.0)
        p_unknown = expit(self.temperature * (score - threshold) / self.scale)
        p_class = np.column_stack([p_unknown, (1.0 - p_unknown)[:, None] * proba])
        return self._world_changed(score, batch), p_class

    def _world_changed(self, score: np.ndarray, batch: OndBatch) -> np.ndarray:
        """knn_novelty's windowed binomial test (:mod:`owl_eval.protocols.ond.agents.world_change`)."""
        return self.world_test(score, batch.novelty_started)


def check_output(arr: np.ndarray, shape: tuple[int, ...], what: str, where: str, meaning: str) -> None:
    from owl_eval.protocols.base import AgentOutputError

    if arr.shape != shape:
        raise AgentOutputError(f"{where}: {what} returned shape {arr.shape}, expected {shape} {meaning}")
    if not np.all(np.isfinite(arr)):
        raise AgentOutputError(f"{where}: {what} returned NaN or inf")
