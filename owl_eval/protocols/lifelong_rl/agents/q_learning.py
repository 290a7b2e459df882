"""Tabular Q-learning with epsilon-greedy exploration.

Discrete observations index the table directly; continuous ones (CartPole) are discretised on a grid
of ``bins`` per dimension between the task's observation bounds (or ``low``/``high`` given here);
``bins: null`` gives every distinct observation its own row instead (discrete-valued Box observations
such as MiniGrid's flattened view, too many dimensions for a grid). One
table per environment family: variants of a task share it (so a changed variant shows as a drop and a
recovery), other families get their own. Exploration decays per family with its training episodes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from owl_eval.protocols.lifelong_rl.agents.base import (
    AgentHooks,
    check_observation_dims,
    learning_settings,
    observation_bounds,
)
from owl_eval.protocols.lifelong_rl.api import BlockInfo, TaskSpec
from owl_eval.typed import as_float, as_int_list


class Discretiser:
    """Continuous observation -> flat grid cell index (values outside the bounds go to the edge cells)."""

    def __init__(self, bins, low, high):
        self.bins = np.asarray(bins, dtype=np.int64)
        self.low, self.high = np.asarray(low, dtype=np.float64), np.asarray(high, dtype=np.float64)
        if (
            not (self.bins.shape == self.low.shape == self.high.shape)
            or np.any(self.bins < 1)
            or np.any(self.high <= self.low)
        ):
            raise ValueError(
                f"discretiser: bins {self.bins.tolist()}, low {self.low.tolist()}, high "
                f"{self.high.tolist()} must have one entry per observation dimension, bins >= 1, high > low"
            )
        self.scale = self.bins / (self.high - self.low)
        self.strides = np.concatenate([np.cumprod(self.bins[::-1])[::-1][1:], [1]])
        self.size = int(np.prod(self.bins))

    def __call__(self, obs) -> int:
        # np.minimum/np.maximum: np.clip costs ~20 us per call on arrays this small
        cell = np.minimum(np.maximum(((obs - self.low) * self.scale).astype(np.int64), 0), self.bins - 1)
        return int(cell @ self.strides)


def exact_key(obs) -> bytes:
    """A distinct observation's table key (``bins: null``)."""
    return np.asarray(obs).tobytes()


class GrowingTable(dict):
    """Rows keyed by observation, created at first sight with ``initial_q`` (``bins: null``)."""

    def __init__(self, num_actions: int, initial_q: float):
        super().__init__()
        self.num_actions, self.initial_q = num_actions, initial_q

    def __missing__(self, key):
        row = self[key] = np.full(self.num_actions, self.initial_q)
        return row


class QLearningAgent(AgentHooks):
    def __init__(
        self,
        alpha: float = 0.1,
        gamma: float = 0.99,
        epsilon: float = 1.0,
        epsilon_min: float = 0.05,
        epsilon_decay: float = 0.99,
        initial_q: float = 0.0,
        bins=(1, 1, 6, 12),
        low=None,
        high=None,
    ):
        (self.alpha, self.gamma, self.epsilon0, self.epsilon_min, self.epsilon_decay) = learning_settings(
            alpha, gamma, epsilon, epsilon_min, epsilon_decay
        )
        self.initial_q = as_float(initial_q, "agent.initial_q")
        self.bins = None if bins is None else as_int_list(bins, "agent.bins", minimum=1)
        self.low, self.high = (None, None) if self.bins is None else observation_bounds(low, high, len(self.bins))
        self.seed(np.random.default_rng(0))

    def seed(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.tables: dict[str, Any] = {}
        self.encoders: dict[str, Callable[[Any], Any]] = {}
        self.episodes: dict[str, int] = {}

    # -- hooks -------------------------------------------------------------------------------------
    def start_task(self, spec: TaskSpec) -> None:
        super().start_task(spec)
        key = spec.family
        if key not in self.tables:
            encode: Callable[[Any], Any]
            table: Any
            if spec.num_observations is not None:  # spec.discrete
                encode, table = int, np.full((spec.num_observations, spec.num_actions), self.initial_q)
            elif self.bins is None:  # every distinct observation its own row
                encode, table = exact_key, GrowingTable(spec.num_actions, self.initial_q)
            else:
                low = spec.observation_low if self.low is None else self.low
                high = spec.observation_high if self.high is None else self.high
                encode = Discretiser(self.bins, low, high)
                table = np.full((encode.size, spec.num_actions), self.initial_q)
            self.encoders[key], self.tables[key] = encode, table
            self.episodes[key] = 0
        self.q, self.encode = self.tables[key], self.encoders[key]
        self.num_actions = spec.num_actions

    def check_syllabus(self, syllabus, domain) -> None:
        """Continuous observations need one ``bins`` entry per dimension (or ``bins: null``)."""
        if self.bins is not None:
            check_observation_dims(syllabus, domain, len(self.bins), "agent.bins", "tabular Q-learning")

    def start_block(self, block: BlockInfo) -> None:
        self._eps = self.epsilon

    @property
    def epsilon(self) -> float:
        assert self.spec is not None  # start_task ran
        return max(self.epsilon_min, self.epsilon0 * self.epsilon_decay ** self.episodes[self.spec.family])

    # -- acting and learning -------------------------------------------------------------------------
    def act(self, observation) -> int:
        if self.learning and self.rng.random() < self._eps:
            return int(self.rng.integers(self.num_actions))
        row = self.q[self.encode(observation)]
        best = np.flatnonzero(row == row.max())
        # random tie-break: an untrained table must not always pick action 0
        return int(best[0] if len(best) == 1 else best[self.rng.integers(len(best))])

    def observe(self, observation, action, reward, next_observation, terminated, truncated) -> None:
        s, s2 = self.encode(observation), self.encode(next_observation)
        target = reward if terminated else reward + self.gamma * self.q[s2].max()
        row = self.q[s]
        row[action] += self.alpha * (target - row[action])
        if terminated or truncated:
            assert self.spec is not None  # start_task ran
            self.episodes[self.spec.family] += 1
            self._eps = self.epsilon
