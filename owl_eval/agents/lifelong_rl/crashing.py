"""An agent that fails on purpose after a number of training episodes (wraps a real agent).

For checking the harness end to end: a crash must leave a FAILED run whose logged episodes are kept
and whose metrics are computed from them.
"""
from __future__ import annotations

from owl_eval.api.lifelong_rl import BlockInfo, TaskSpec
from owl_eval.agents.lifelong_rl.random_agent import RandomAgent
from owl_eval.typed import as_int


class AgentCrash(RuntimeError):
    pass


class CrashingAgent:
    def __init__(self, crash_at_episode: int = 10, inner: object | None = None):
        self.crash_at_episode = as_int(crash_at_episode, "agent.crash_at_episode", minimum=0)
        self.inner = inner if inner is not None else RandomAgent()
        self.episodes = 0

    def seed(self, rng):
        self.episodes = 0
        self.inner.seed(rng)

    def start_task(self, spec: TaskSpec):
        self.inner.start_task(spec)

    def end_task(self, spec: TaskSpec):
        self.inner.end_task(spec)

    def start_block(self, block: BlockInfo):
        self.inner.start_block(block)

    def end_block(self, block: BlockInfo):
        self.inner.end_block(block)

    def set_learning(self, on: bool):
        self.inner.set_learning(on)

    def act(self, observation) -> int:
        return self.inner.act(observation)

    def observe(self, observation, action, reward, next_observation, terminated, truncated):
        self.inner.observe(observation, action, reward, next_observation, terminated, truncated)
        if terminated or truncated:
            self.episodes += 1
            if self.episodes == self.crash_at_episode:
                raise AgentCrash(f"deliberate crash after {self.episodes} training episodes")
