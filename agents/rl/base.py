"""The lifelong-RL agent interface (a ``typing.Protocol``: any class with these methods is an agent).

The protocol calls, in order: ``seed(rng)`` once (fresh learned state, the agent's own generator);
then per block ``start_task(spec)`` when the block's task or variant differs from the previous block's
(preceded by ``end_task`` of the previous one), ``set_learning(on)`` (off in evaluation blocks),
``start_block(block)``, per step ``act(observation) -> action`` and, in training blocks only, ``observe(obs, action, reward, next_obs, terminated, truncated)``; finally ``end_block(block)``.
Evaluation blocks never call ``observe``: learning is off whatever the agent does with ``set_learning``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from runner.errors import ConfigError
from runner.typed import as_float


@dataclass(frozen=True)
class TaskSpec:
    """What an agent may know about the environment of a block.

    ``family`` is the environment family (``cartpole``, ``frozenlake``); ``task``/``variant`` the syllabus
    names (``task_name`` = ``<task>_<variant>``). Discrete observations have ``num_observations`` set (the
    observation is an int in ``[0, num_observations)``); continuous ones have ``observation_low`` /
    ``observation_high`` (finite bounds a discretiser may use; true values can leave them).
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

    def observe(self, observation, action: int, reward: float, next_observation, terminated: bool,
                truncated: bool) -> None: ...


class AgentHooks:
    """Do-nothing hooks and the current task/learning state, for agents to inherit (optional)."""

    spec: TaskSpec | None = None
    learning: bool = True

    def start_task(self, spec: TaskSpec) -> None:
        self.spec = spec

    def end_task(self, spec: TaskSpec) -> None:
        pass

    def start_block(self, block: BlockInfo) -> None:
        pass

    def end_block(self, block: BlockInfo) -> None:
        pass

    def set_learning(self, on: bool) -> None:
        self.learning = bool(on)


# ------------------------------------------------------------------------------ constructor settings

def learning_settings(alpha, gamma, epsilon, epsilon_min, epsilon_decay) -> tuple[float, float, float, float, float]:
    """The Q-learners' step size (> 0), discount and exploration rates (in [0, 1]) and decay (in (0, 1]),
    typed; each bad value is one error naming ``agent.<key>``."""
    unit = dict(minimum=0.0, maximum=1.0)
    return (as_float(alpha, "agent.alpha", minimum=0.0, open_minimum=True), as_float(gamma, "agent.gamma", **unit),
            as_float(epsilon, "agent.epsilon", **unit), as_float(epsilon_min, "agent.epsilon_min", **unit),
            as_float(epsilon_decay, "agent.epsilon_decay", minimum=0.0, maximum=1.0, open_minimum=True))


def observation_bounds(low, high, dims: int) -> tuple[list[float] | None, list[float] | None]:
    """``low``/``high`` (null = the task's own bounds): ``dims`` finite numbers each, ``high > low``."""
    out = []
    for key, value in (("low", low), ("high", high)):
        if value is None:
            out.append(None)
            continue
        if isinstance(value, str) or not isinstance(value, (list, tuple)) or len(value) != dims:
            raise ConfigError(f"agent.{key}: expected null or a list of {dims} numbers (one per grid dimension), got {value!r}")
        out.append([as_float(v, f"agent.{key}[{i}]") for i, v in enumerate(value)])
    if out[0] is not None and out[1] is not None:
        bad = [i for i, (lo, hi) in enumerate(zip(*out)) if not hi > lo]
        if bad:
            raise ConfigError(f"agent.high[{bad[0]}]: expected more than agent.low[{bad[0]}] ({out[0][bad[0]]:g}), "
                              f"got {out[1][bad[0]]:g}")
    return out[0], out[1]
