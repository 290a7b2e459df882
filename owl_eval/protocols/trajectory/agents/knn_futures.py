"""Nearest-neighbour futures: the N_P training futures whose observed history looks most like the agent's.

Every trajectory is put in its own frame: origin at the last observed position, x axis along the last
observed velocity, and (``speed_normalise``) lengths divided by the last observed speed (at least
``min_speed`` metres per step), so a history is matched by its shape and the neighbour's future is scaled
to the agent's speed. Missing history steps are filled by constant-velocity extrapolation backwards.

fit: every training agent with a complete history and future gives one (feature, future) pair, plus
its mirror image (y -> -y) with ``mirror``. Feature = the history in that frame (its last point is the
origin and is left out), plus ``speed_weight`` times the speed (metres per step), so standing and walking
pedestrians are told apart. predict: the ``num_preds`` nearest features (Euclidean, scikit-learn's
``NearestNeighbors``), their futures mapped back into the agent's world frame. Deterministic.
"""

from __future__ import annotations

import numpy as np
from sklearn.neighbors import NearestNeighbors

from owl_eval.protocols.trajectory.api import last_position_and_velocity
from owl_eval.typed import as_bool, as_float, as_int


class KnnFuturesPredictor:
    def __init__(
        self,
        speed_normalise: bool = True,
        min_speed: float = 0.08,
        speed_weight: float = 2.0,
        mirror: bool = True,
        max_train: int | None = 200_000,
    ):
        self.speed_normalise = as_bool(speed_normalise, "agent.speed_normalise")
        # a positive floor: histories are divided by max(speed, min_speed)
        self.min_speed = as_float(min_speed, "agent.min_speed", minimum=0.0, open_minimum=self.speed_normalise)
        self.speed_weight = as_float(speed_weight, "agent.speed_weight", minimum=0.0)
        self.mirror = as_bool(mirror, "agent.mirror")
        self.max_train = None if max_train is None else as_int(max_train, "agent.max_train", minimum=1)
        self._index: NearestNeighbors | None = None
        self._futures: np.ndarray | None = None

    def _frame(self, history):
        """Origin ``[N, 2]``, rotation to the agent frame ``[N, 2, 2]``, length scale ``[N]``, speed ``[N]``."""
        p_last, vel, lag = last_position_and_velocity(history[:, None])
        p_last, vel, lag = p_last[:, 0], vel[:, 0], lag[:, 0]
        speed = np.linalg.norm(vel, axis=-1)
        theta = np.where(speed > 1e-9, np.arctan2(vel[:, 1], vel[:, 0]), 0.0)
        c, s = np.cos(theta), np.sin(theta)
        to_agent = np.stack([np.stack([c, s], -1), np.stack([-s, c], -1)], 1)  # R(-theta)
        scale = np.maximum(speed, self.min_speed) if self.speed_normalise else np.ones_like(speed)
        origin = p_last + lag[:, None] * vel  # where the agent is at the end of the history
        return origin, to_agent, scale, speed, vel

    def _features(self, history):
        """Features ``[N, F]`` of histories ``[N, N_I, 2]`` and the frames."""
        origin, rot, scale, speed, vel = self._frame(history)
        n_i = history.shape[1]
        back = origin[:, None, :] - (n_i - 1 - np.arange(n_i))[None, :, None] * vel[:, None, :]
        filled = np.where(np.isfinite(history).all(-1, keepdims=True), history, back)
        local = np.einsum("nij,ntj->nti", rot, filled - origin[:, None]) / scale[:, None, None]
        feats = np.concatenate([local[:, :-1].reshape(len(local), -1), self.speed_weight * speed[:, None]], axis=1)
        return feats, (origin, rot, scale)

    def fit(self, train, *, rng: np.random.Generator) -> None:
        hist, fut = np.asarray(train.history, float), np.asarray(train.future, float)
        complete = np.isfinite(hist).all((-1, -2)) & np.isfinite(fut).all((-1, -2))  # [S, A]
        hist, fut = hist[complete], fut[complete]
        if len(hist) == 0:
            raise ValueError("knn_futures: the training split has no agent with a complete history and future")
        if self.max_train is not None and len(hist) > self.max_train:
            keep = np.sort(rng.choice(len(hist), size=int(self.max_train), replace=False))
            hist, fut = hist[keep], fut[keep]
        feats, (origin, rot, scale) = self._features(hist)
        futures = np.einsum("nij,ntj->nti", rot, fut - origin[:, None]) / scale[:, None, None]
        if self.mirror:
            n_i = hist.shape[1] - 1
            flip_f = feats.copy()
            flip_f[:, 1 : 2 * n_i : 2] *= -1  # y of every history point
            feats = np.concatenate([feats, flip_f])
            futures = np.concatenate([futures, futures * np.array([1.0, -1.0])])
        self._futures = futures
        self._index = NearestNeighbors().fit(feats)

    def predict(self, history, *, pred_len, num_preds, dt, rng):
        if self._index is None or self._futures is None:  # set together by fit
            raise RuntimeError("knn_futures: predict called before fit")
        history = np.asarray(history, float)
        s, a, n_i, _ = history.shape
        if self._futures.shape[1] < pred_len:
            raise ValueError(f"knn_futures: fitted on {self._futures.shape[1]} future steps, asked for {pred_len}")
        flat = history.reshape(s * a, n_i, 2)
        seen = np.isfinite(flat).all(-1).any(-1)
        out = np.full((s * a, num_preds, pred_len, 2), np.nan)
        if seen.any():
            feats, (origin, rot, scale) = self._features(flat[seen])
            k = min(num_preds, len(self._futures))
            _, idx = self._index.kneighbors(feats, n_neighbors=k)
            if k < num_preds:  # fewer training futures than predictions asked for: repeat the nearest ones
                idx = idx[:, np.arange(num_preds) % k]
            local = self._futures[idx][:, :, :pred_len] * scale[:, None, None, None]  # [n, P, N_O, 2]
            out[seen] = origin[:, None, None] + np.einsum("nji,nptj->npti", rot, local)
        return out.reshape(s, a, num_preds, pred_len, 2).transpose(0, 2, 1, 3, 4)
