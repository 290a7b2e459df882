"""The trajectory predictor interface (a ``typing.Protocol``: any class with these methods is a predictor).

The protocol calls ``fit(train, rng=...)`` once with the training split (a
:class:`owl_eval.protocols.trajectory.domains.scenes.TrajectoryScenes`: observed history and future of every agent),
then ``predict`` on batches of test scenes, each seeing only the observed steps:

    predict(history[S, N_A, N_I, 2], *, pred_len=N_O, num_preds=N_P, dt, rng) -> futures[S, N_P, N_A, N_O, 2]

``history`` is NaN where an agent is not observed (missing steps, padding agents). The futures must be
finite for every agent observed at the last history step; padding agents may be NaN. Optional extras:

- ``log_prob(history, futures[S, K, N_A, N_O, 2], *, dt) -> [S, K, N_A]``: the predictor's own log-density
  of trajectories (the protocol asks it for its predictions and the truth; used instead of the KDE);
- ``predict_class_probs(history, *, pred_len, dt) -> [S, N_A, C]``: behaviour class probabilities (see
  :mod:`owl_eval.protocols.trajectory.classes`); otherwise the protocol derives them from the predicted futures.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class TrajectoryPredictor(Protocol):
    def fit(self, train: Any, *, rng: np.random.Generator) -> None: ...

    def predict(
        self, history: np.ndarray, *, pred_len: int, num_preds: int, dt: float, rng: np.random.Generator
    ) -> np.ndarray: ...


def last_position_and_velocity(history: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per agent: last observed position ``[S, A, 2]``, velocity per step ``[S, A, 2]`` (from the last two
    observed steps, divided by the number of steps between them; 0 with a single observed step) and the
    number of steps from the last observation to the end of the history ``[S, A]``.

    Agents never observed get position 0 and velocity 0 (their predictions are not scored).
    """
    valid = np.isfinite(history).all(-1)  # [S, A, N_I]
    n_i = history.shape[2]
    steps = np.arange(n_i)
    last = np.where(valid, steps, -1).max(-1)  # [S, A]
    prev = np.where(valid & (steps < last[..., None]), steps, -1).max(-1)
    safe_last, safe_prev = np.maximum(last, 0), np.maximum(prev, 0)
    p_last = np.take_along_axis(history, safe_last[..., None, None], axis=2)[:, :, 0]
    p_prev = np.take_along_axis(history, safe_prev[..., None, None], axis=2)[:, :, 0]
    has_two = (prev >= 0)[..., None]
    gap = np.maximum(last - prev, 1)[..., None]
    vel = np.where(has_two, (np.nan_to_num(p_last) - np.nan_to_num(p_prev)) / gap, 0.0)
    p_last = np.where((last >= 0)[..., None], np.nan_to_num(p_last), 0.0)
    return p_last, vel, np.where(last >= 0, n_i - 1 - last, 0)


def constant_velocity_future(history: np.ndarray, pred_len: int) -> np.ndarray:
    """The constant-velocity extrapolation ``[S, A, N_O, 2]`` of every agent."""
    p_last, vel, lag = last_position_and_velocity(history)
    k = lag[..., None] + np.arange(1, pred_len + 1)  # [S, A, N_O] steps after the last observation
    return p_last[:, :, None, :] + k[..., None] * vel[:, :, None, :]
