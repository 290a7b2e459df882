"""Shared pieces of the lifelong-RL baselines: do-nothing hooks and checked learning settings.

The interface itself (``RLAgent``, ``TaskSpec``, ``BlockInfo``) is :mod:`owl_eval.protocols.lifelong_rl.api`.
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np

from owl_eval.errors import ConfigError
from owl_eval.protocols.lifelong_rl.api import BlockInfo, TaskSpec
from owl_eval.typed import as_float


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


class _Bounds(TypedDict):
    minimum: float
    maximum: float


def learning_settings(alpha, gamma, epsilon, epsilon_min, epsilon_decay) -> tuple[float, float, float, float, float]:
    """The Q-learners' step size (> 0), discount and exploration rates (in [0, 1]) and decay (in (0, 1]),
    typed; each bad value is one error naming ``agent.<key>``."""
    unit = _Bounds(minimum=0.0, maximum=1.0)
    return (
        as_float(alpha, "agent.alpha", minimum=0.0, open_minimum=True),
        as_float(gamma, "agent.gamma", **unit),
        as_float(epsilon, "agent.epsilon", **unit),
        as_float(epsilon_min, "agent.epsilon_min", **unit),
        as_float(epsilon_decay, "agent.epsilon_decay", minimum=0.0, maximum=1.0, open_minimum=True),
    )


def observation_bounds(low, high, dims: int) -> tuple[list[float] | None, list[float] | None]:
    """``low``/``high`` (null = the task's own bounds): ``dims`` finite numbers each, ``high > low``."""
    out: list[list[float] | None] = []
    for key, value in (("low", low), ("high", high)):
        if value is None:
            out.append(None)
            continue
        if isinstance(value, str) or not isinstance(value, (list, tuple)) or len(value) != dims:
            raise ConfigError(
                f"agent.{key}: expected null or a list of {dims} numbers (one per grid dimension), got {value!r}"
            )
        out.append([as_float(v, f"agent.{key}[{i}]") for i, v in enumerate(value)])
    if out[0] is not None and out[1] is not None:
        bad = [i for i, (lo, hi) in enumerate(zip(*out)) if not hi > lo]
        if bad:
            raise ConfigError(
                f"agent.high[{bad[0]}]: expected more than agent.low[{bad[0]}] ({out[0][bad[0]]:g}), "
                f"got {out[1][bad[0]]:g}"
            )
    return out[0], out[1]


def check_observation_dims(syllabus, domain, dims: int, key: str, agent: str) -> None:
    """Before any run: every continuous-observation (task, variant) of the syllabus has ``dims`` dimensions, the
    number the agent's ``key`` setting gives (discrete observations always fit). A mismatch is one error naming the
    agent's expected space and the environment's. Domains without ``spec(task, variant)`` are not checked."""
    spec_of = getattr(domain, "spec", None)
    if not callable(spec_of):
        return
    seen: set[tuple[str, str]] = set()
    for block in syllabus.blocks:
        if (block.task, block.variant) in seen:
            continue
        seen.add((block.task, block.variant))
        spec = spec_of(block.task, block.variant)
        if spec.num_observations is not None or tuple(spec.observation_shape) == (dims,):
            continue
        raise ConfigError(
            f"{key}: {agent} expects observations Box(shape=({dims},)) (one {key} entry per dimension) or "
            f"Discrete(n), but task {block.task} variant {block.variant} observes "
            f"{observation_space_text(spec)} and acts in Discrete({spec.num_actions})"
        )


def observation_space_text(spec: TaskSpec) -> str:
    """The observation space of a task spec, as gymnasium prints it."""
    if spec.num_observations is not None:
        return f"Discrete({spec.num_observations})"
    shape = tuple(int(n) for n in spec.observation_shape)
    if spec.observation_low is not None and spec.observation_high is not None:
        low = np.array2string(np.asarray(spec.observation_low), precision=4, threshold=8)
        high = np.array2string(np.asarray(spec.observation_high), precision=4, threshold=8)
        return f"Box({low}, {high}, {shape})"
    return f"Box(shape={shape})"
