"""Shared pieces of the lifelong-RL baselines: do-nothing hooks and checked learning settings.

The interface itself (``RLAgent``, ``TaskSpec``, ``BlockInfo``) is :mod:`owl_eval.protocols.lifelong_rl.api`.
"""

from __future__ import annotations

from typing import TypedDict

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
