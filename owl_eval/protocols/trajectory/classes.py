"""The classification-type scenario of the trajectory protocol: how each agent turns over the horizon.

For an agent with last observed velocity v (per step, from its last two observed steps) and final
displacement D = (position at its last valid future step) - (last observed position):

- ``stop``     if |D| < ``stop_distance`` metres;
- otherwise, with a = the signed angle from v to D (counter-clockwise positive), ``straight`` if
  |a| <= ``turn_degrees``, ``left`` if a > ``turn_degrees``, ``right`` if a < -``turn_degrees``.

Agents whose heading is undefined (|v| * N_O < ``stop_distance``, i.e. standing at the end of the
history) or who have no valid future step are not classified. The truth gives one-hot ``P_true``; the
predicted class probabilities are the share of the N_P predictions in each class (each prediction read
at the same step as the truth), smoothed by ``smoothing``: (n_c + smoothing) / (N_P + C smoothing), unless
the predictor provides ``predict_class_probs``.
"""

from __future__ import annotations

import numpy as np

from owl_eval.protocols.trajectory.api import last_position_and_velocity

CLASS_NAMES = ("straight", "left", "right", "stop")


def _last_valid_index(mask: np.ndarray) -> np.ndarray:
    n = mask.shape[-1]
    return n - 1 - np.argmax(mask[..., ::-1], axis=-1)


def turn_classes(
    history, future, future_mask, *, stop_distance: float, turn_degrees: float, pred_len: int | None = None
):
    """Class index per trajectory ``future[S, ..., A, N_O, 2]`` (extra axes after S broadcast, e.g. N_P)
    and which agents are classifiable ``[S, A]``; returns ``(classes[S, ..., A], classifiable[S, A])``."""
    p_last, vel, _ = last_position_and_velocity(history)
    n_o = pred_len or future.shape[-2]
    last = _last_valid_index(future_mask)  # [S, A]
    classifiable = future_mask.any(-1) & (np.linalg.norm(vel, axis=-1) * n_o >= stop_distance)
    extra = future.ndim - 4
    idx = last.reshape(last.shape[:1] + (1,) * extra + last.shape[1:])[..., None, None]
    end = np.take_along_axis(future, np.broadcast_to(idx, future.shape[:-2] + (1, 2)), axis=-2)[..., 0, :]
    shape = p_last.shape[:1] + (1,) * extra + p_last.shape[1:]
    d = end - p_last.reshape(shape)
    v = vel.reshape(shape)
    angle = np.degrees(np.arctan2(v[..., 0] * d[..., 1] - v[..., 1] * d[..., 0], (v * d).sum(-1)))
    cls = np.where(angle > turn_degrees, 1, np.where(angle < -turn_degrees, 2, 0))
    cls = np.where(np.linalg.norm(d, axis=-1) < stop_distance, 3, cls)
    return cls, classifiable


def class_probabilities_from_futures(pred_classes: np.ndarray, num_classes: int, smoothing: float) -> np.ndarray:
    """``pred_classes[S, N_P, A]`` -> probabilities ``[S, A, C]`` (shares with additive smoothing)."""
    onehot = pred_classes[..., None] == np.arange(num_classes)
    counts = onehot.sum(1).astype(float)  # [S, A, C]
    n_p = pred_classes.shape[1]
    return (counts + smoothing) / (n_p + num_classes * smoothing)
