"""The lifelong-RL agent interface and what it is told about tasks and blocks (a ``typing.Protocol``: any class with these methods is an agent).

The protocol calls, in order: ``seed(rng)`` once (fresh learned state, the agent's own generator);
then per block ``start_task(spec)`` when the block's task or variant differs from the previous block's
(preceded by ``end_task`` of the previous one), ``set_learning(on)`` (off in evaluation blocks),
``start_block(block)``, per episode the optional ``start_episode()`` (when the agent has it), per step ``act(observation) -> action`` and, in training blocks only, ``observe(obs, action, reward, next_obs, terminated, truncated)``; finally ``end_block(block)``.
Evaluation blocks never call ``observe``: learning is off whatever the agent does with ``set_learning``.
Two optional methods: ``observe_evaluation(observation, action, next_observation, terminated, truncated)``, called
at each evaluation step (no reward: what tella's agents are given), and ``check_syllabus(syllabus, domain)``, called
by the protocol's check before any run (raise ``owl_eval.errors.ConfigError`` when the agent cannot run it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class TaskSpec:
    """What an agent may know about the environment of a block.

    ``family`` is the environment family (``cartpole``, ``frozenlake``); ``task``/``variant`` the syllabus
    names (``task_name`` = ``<task>_<variant>``). Discrete observations have ``num_observations`` set (the
    observation is an int in ``[0, num_observations)``); continuous ones have ``observation_low`` /
    ``observation_high`` (finite bounds a discretiser may use; true values can leave them).
    ``max_episode_steps`` is the step limit of the block's episodes (set by ``RLDomain``; None if unknown): an
    agent that runs its own copy of the environment (``agent=lifelong_rl/sb3``) truncates its episodes there too.
    """

    task: str
    variant: str
    family: str
    num_actions: int
    observation_shape: tuple[int, ...] = ()
    num_observations: int | None = None
    observation_low: np.ndarray | None = field(default=None, compare=False)
    observation_high: np.ndarray | None = field(default=None, compare=False)
    params: dict[str, Any] = field(default_factory=dict, compare=False)
    max_episode_steps: int | None = field(default=None, compare=False)

    @property
    def task_name(self) -> str:
        return f"{self.task}_{self.variant}"

    @property
    def discrete(self) -> bool:
        return self.num_observations is not None


@dataclass(frozen=True)
class BlockInfo:
    """One syllabus block as the agent sees it (``index`` is the 0-based block number)."""

    index: int
    block_type: str  # "train" or "test"
    spec: TaskSpec
    episodes: int

    @property
    def learning(self) -> bool:
        return self.block_type == "train"


@runtime_checkable
class RLAgent(Protocol):
    """An agent that acts in discrete-action environments and learns from transitions."""

    def seed(self, rng: np.random.Generator) -> None:
        """Forget everything learned and take ``rng`` as the only source of randomness."""

    def start_task(self, spec: TaskSpec) -> None: ...

    def end_task(self, spec: TaskSpec) -> None: ...

    def start_block(self, block: BlockInfo) -> None: ...

    def end_block(self, block: BlockInfo) -> None: ...

    def set_learning(self, on: bool) -> None: ...

    def act(self, observation) -> int:
        """An action in ``[0, spec.num_actions)`` for the current task."""

    def observe(
        self, observation, action: int, reward: float, next_observation, terminated: bool, truncated: bool
    ) -> None: ...
