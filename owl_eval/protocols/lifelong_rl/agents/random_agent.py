"""Uniformly random actions: the floor every learner must beat."""

from __future__ import annotations

import numpy as np

from owl_eval.protocols.lifelong_rl.agents.base import AgentHooks


class RandomAgent(AgentHooks):
    def __init__(self):
        self.rng = np.random.default_rng(0)

    def seed(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def act(self, observation) -> int:
        assert self.spec is not None  # start_task ran
        return int(self.rng.integers(self.spec.num_actions))

    def observe(self, observation, action, reward, next_observation, terminated, truncated) -> None:
        pass
