"""Constant velocity: each agent keeps the velocity of its last two observed steps (deterministic)."""

from __future__ import annotations

import numpy as np

from owl_eval.protocols.trajectory.api import constant_velocity_future


class ConstantVelocityPredictor:
    """N_P identical copies of the constant-velocity extrapolation; nothing to fit."""

    def fit(self, train, *, rng: np.random.Generator) -> None:
        return None

    def predict(self, history, *, pred_len, num_preds, dt, rng):
        future = constant_velocity_future(np.asarray(history, float), pred_len)
        return np.broadcast_to(future[:, None], (future.shape[0], num_preds) + future.shape[1:]).copy()
