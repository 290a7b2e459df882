"""Q-learning with a linear function of tile-coded features (numpy): the capable CartPole learner.

``tilings`` overlapping grids of ``tiles`` cells per dimension cover the task's observation bounds, each
offset by ``(1, 3, 5, ...) / tilings`` of a cell per dimension (Sutton & Barto's asymmetric offsets). A
state activates one cell per tiling; ``Q(s, a)`` is the sum of those cells' weights for ``a``, so one update
touches ``tilings`` weights. Like the tabular agent: one weight table per environment family, so
variants share it; exploration decays per family with its training episodes.
"""

from __future__ import annotations

import numpy as np

from owl_eval.protocols.lifelong_rl.agents.base import (
    AgentHooks,
    check_observation_dims,
    learning_settings,
    observation_bounds,
)
from owl_eval.protocols.lifelong_rl.api import BlockInfo, TaskSpec
from owl_eval.typed import as_int, as_int_list


class TileCoder:
    def __init__(self, tiles, tilings: int, low, high):
        self.tiles = np.asarray(tiles, dtype=np.int64)
        self.low, self.high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
        dims = len(self.low)
        if self.tiles.shape != (dims,) or np.any(self.tiles < 1) or tilings < 1 or np.any(self.high <= self.low):
            raise ValueError(
                f"tile coder: tiles {self.tiles.tolist()} need one entry >= 1 per observation dimension "
                f"({dims}), tilings >= 1, high > low"
            )
        self.tilings = int(tilings)
        grid = self.tiles + 1  # one extra cell per dimension: offset tilings overhang the bounds
        self.scale = self.tiles / (self.high - self.low)
        self.offsets = (np.arange(self.tilings)[:, None] * (2 * np.arange(dims) + 1)[None, :] / self.tilings) % 1.0
        self.strides = np.concatenate([np.cumprod(grid[::-1])[::-1][1:], [1]])
        self.per_tiling = int(np.prod(grid))
        self.base = np.arange(self.tilings) * self.per_tiling
        self.size = self.per_tiling * self.tilings
        self.top = grid - 1

    def __call__(self, obs) -> np.ndarray:
        """Indices of the active feature in each tiling (``tilings`` ints)."""
        x = (np.asarray(obs, dtype=np.float64) - self.low) * self.scale
        # np.minimum/np.maximum: np.clip costs ~20 us per call on arrays this small
        cells = np.minimum(np.maximum((x[None, :] + self.offsets).astype(np.int64), 0), self.top)
        return cells @ self.strides + self.base


class LinearQAgent(AgentHooks):
    def __init__(
        self,
        alpha: float = 0.5,
        gamma: float = 0.99,
        epsilon: float = 0.5,
        epsilon_min: float = 0.01,
        epsilon_decay: float = 0.97,
        tiles=(4, 4, 8, 8),
        tilings: int = 8,
        low=None,
        high=None,
    ):
        (self.alpha, self.gamma, self.epsilon0, self.epsilon_min, self.epsilon_decay) = learning_settings(
            alpha, gamma, epsilon, epsilon_min, epsilon_decay
        )
        self.tiles = as_int_list(tiles, "agent.tiles", minimum=1)
        self.tilings = as_int(tilings, "agent.tilings", minimum=1)
        self.low, self.high = observation_bounds(low, high, len(self.tiles))
        self.seed(np.random.default_rng(0))

    def seed(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.weights: dict[str, np.ndarray] = {}
        self.coders: dict[str, TileCoder] = {}
        self.episodes: dict[str, int] = {}

    def check_syllabus(self, syllabus, domain) -> None:
        """Continuous observations need one ``tiles`` entry per dimension."""
        check_observation_dims(syllabus, domain, len(self.tiles), "agent.tiles", "tile-coded linear Q-learning")

    def start_task(self, spec: TaskSpec) -> None:
        super().start_task(spec)
        key = spec.family
        if key not in self.weights:
            if (
                spec.num_observations is not None
            ):  # spec.discrete: one-hot states: a tile coder over the state index with one tiling
                coder = TileCoder([spec.num_observations], 1, [0.0], [float(spec.num_observations)])
            else:
                low = spec.observation_low if self.low is None else self.low
                high = spec.observation_high if self.high is None else self.high
                coder = TileCoder(self.tiles, self.tilings, low, high)
            self.coders[key] = coder
            self.weights[key] = np.zeros((spec.num_actions, coder.size))
            self.episodes[key] = 0
        self.w, self.coder = self.weights[key], self.coders[key]
        self._cached = (None, None)
        self.step_size = self.alpha / self.coder.tilings

    def start_block(self, block: BlockInfo) -> None:
        self._eps = self.epsilon

    @property
    def epsilon(self) -> float:
        assert self.spec is not None  # start_task ran
        return max(self.epsilon_min, self.epsilon0 * self.epsilon_decay ** self.episodes[self.spec.family])

    def _q(self, features) -> np.ndarray:
        return self.w[:, features].sum(axis=1)

    def _features(self, observation) -> np.ndarray:
        # The protocol passes the previous step's next_observation object to act: encode it once.
        cached_observation, cached = self._cached
        if observation is cached_observation and cached is not None:
            return cached
        f = self.coder(observation)
        self._cached = (observation, f)
        return f

    _cached: tuple[object, np.ndarray | None] = (None, None)

    def act(self, observation) -> int:
        if self.learning and self.rng.random() < self._eps:
            return int(self.rng.integers(self.w.shape[0]))
        q = self._q(self._features(observation))
        best = np.flatnonzero(q == q.max())
        return int(best[0] if len(best) == 1 else best[self.rng.integers(len(best))])

    def observe(self, observation, action, reward, next_observation, terminated, truncated) -> None:
        f = self._features(observation)
        target = reward
        if not terminated:
            target += self.gamma * self._q(self._features(next_observation)).max()
        self.w[action, f] += self.step_size * (target - self.w[action, f].sum())
        if terminated or truncated:
            assert self.spec is not None  # start_task ran
            self.episodes[self.spec.family] += 1
            self._eps = self.epsilon
