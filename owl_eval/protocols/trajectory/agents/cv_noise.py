"""Constant velocity with noise: N_P samples whose heading and speed drift as random walks (seeded).

For sample p and future step k = 1..N_O (per step, from the last observed velocity v with speed s and
heading theta):

    theta_pk = theta + sum_{l<=k} e_pl,   e ~ N(0, heading_std^2)          [rad per step]
    s_pk     = s * exp(sum_{l<=k} u_pl),  u ~ N(0, speed_std^2)           [log-speed per step]
    x_pk     = x_last + sum_{l<=k} s_pl (cos theta_pl, sin theta_pl) + sum_{l<=k} position_std w_pl

``position_std`` (metres per step, isotropic) keeps the samples of a standing agent apart.
"""

from __future__ import annotations

import numpy as np

from owl_eval.protocols.trajectory.api import last_position_and_velocity
from owl_eval.typed import as_float


class ConstantVelocityNoisePredictor:
    def __init__(self, heading_std: float = 0.06, speed_std: float = 0.06, position_std: float = 0.02):
        self.heading_std = as_float(heading_std, "agent.heading_std", minimum=0.0)
        self.speed_std = as_float(speed_std, "agent.speed_std", minimum=0.0)
        self.position_std = as_float(position_std, "agent.position_std", minimum=0.0)

    def fit(self, train, *, rng: np.random.Generator) -> None:
        return None

    def predict(self, history, *, pred_len, num_preds, dt, rng):
        p_last, vel, lag = last_position_and_velocity(np.asarray(history, float))
        s, a = p_last.shape[:2]
        speed = np.linalg.norm(vel, axis=-1)  # [S, A]
        theta = np.arctan2(vel[..., 1], vel[..., 0])
        shape = (s, num_preds, a, pred_len)
        heading = theta[:, None, :, None] + np.cumsum(self.heading_std * rng.standard_normal(shape), axis=-1)
        spd = speed[:, None, :, None] * np.exp(np.cumsum(self.speed_std * rng.standard_normal(shape), axis=-1))
        step = spd[..., None] * np.stack([np.cos(heading), np.sin(heading)], axis=-1)
        # a gap between the last observation and the end of the history is bridged at constant velocity
        offset = lag[:, None, :, None, None] * vel[:, None, :, None, :]
        jitter = self.position_std * rng.standard_normal(shape + (2,))
        return p_last[:, None, :, None, :] + offset + np.cumsum(step + jitter, axis=-2)
