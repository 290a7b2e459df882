"""Sampled constant velocity (CVM-S of Schoeller et al. 2020): each of the N_P samples is the
constant-velocity future with the velocity rotated by one angle per sample and agent,

    theta_pa ~ N(0, sigma^2),   x_pak = x_last + (lag + k) R(theta_pa) v        k = 1..N_O

(``x_last``, ``v``, ``lag`` as :func:`owl_eval.protocols.trajectory.api.last_position_and_velocity`). Unlike
``cv_noise`` (a random walk per step), a sample is a straight line; the spread grows linearly with the
horizon. ``sigma`` in degrees (the paper's 25); drawn from the run's generator, so seeded.
"""

from __future__ import annotations

import numpy as np

from owl_eval.protocols.trajectory.api import constant_velocity_future, last_position_and_velocity
from owl_eval.typed import as_float


class ConstantVelocitySampledPredictor:
    def __init__(self, sigma_degrees: float = 25.0):
        self.sigma_degrees = as_float(sigma_degrees, "agent.sigma_degrees", minimum=0.0, maximum=180.0)

    def fit(self, train, *, rng: np.random.Generator) -> None:
        return None

    def predict(self, history, *, pred_len, num_preds, dt, rng):
        history = np.asarray(history, float)
        p_last, _, _ = last_position_and_velocity(history)
        cv = constant_velocity_future(history, pred_len)  # [S, A, N_O, 2]
        s, a = p_last.shape[:2]
        theta = np.deg2rad(self.sigma_degrees) * rng.standard_normal((s, num_preds, a))
        cos_m1, sin = (np.cos(theta) - 1.0)[..., None], np.sin(theta)[..., None]  # [S, N_P, A, 1]
        # rotate the displacement from the last position: cv + (R - I) d, exactly cv when theta is 0
        d = (cv - p_last[:, :, None, :])[:, None]  # [S, 1, A, N_O, 2]
        dx, dy = d[..., 0], d[..., 1]
        turn = np.stack([cos_m1 * dx - sin * dy, sin * dx + cos_m1 * dy], axis=-1)
        return cv[:, None] + turn
