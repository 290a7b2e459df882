"""Lifelong-RL environments: gymnasium families (CartPole, FrozenLake) and their parametric variants.

A *task* is a named environment family instance; a *variant* is a set of parameters of that family
(``task_name`` = ``<task>_<variant>`` in the logs). Environments are gymnasium's unwrapped classes,
never rendered; the episode step limit is ours (``max_episode_steps``), so no wrapper sits in the
hot loop. gymnasium is the ``rl`` extra: a domain built without it fails with the install command.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from owl_eval.datasets.provenance import DataInput
from owl_eval.errors import ConfigError
from owl_eval.protocols.lifelong_rl.api import TaskSpec
from owl_eval.typed import as_float, as_int, as_str

INSTALL_HINT = 'the RL domains need gymnasium: pip install -e ".[rl]"'
TASK_RE = re.compile(r"[a-z0-9][a-z0-9.-]*")  # no "_": l2metrics splits task_name at the first "_"
VARIANT_RE = re.compile(r"[a-z0-9][a-z0-9_.-]*")


def require_gymnasium():
    try:
        import gymnasium
    except ImportError:
        raise ImportError(INSTALL_HINT) from None
    return gymnasium


# ------------------------------------------------------------------------------------------ families


class CartPoleFamily:
    """CartPole-v1 dynamics with settable physics. ``length`` is gymnasium's half pole length (0.5)."""

    name = "cartpole"
    params = ("gravity", "masscart", "masspole", "length", "force_mag", "tau")
    # Finite observation bounds for discretisers (x, x_dot, theta, theta_dot); termination is |x| > 2.4,
    # |theta| > 12 degrees; velocities rarely leave these ranges under a balancing policy.
    low = np.array([-2.4, -3.0, -0.2095, -3.5])
    high = -low
    positive = ("masscart", "length", "tau")  # divisors of the dynamics

    def check(self, params: Mapping[str, Any], where: str) -> None:
        """Every parameter a finite number (masses, length and time step positive); the values are kept as
        given (they key the STE references)."""
        for key, value in params.items():
            as_float(
                value,
                f"{where}.{key}",
                minimum=0.0 if key in self.positive + ("masspole",) else None,
                open_minimum=key in self.positive,
            )

    def make(self, params: Mapping[str, Any]):
        from gymnasium.envs.classic_control.cartpole import CartPoleEnv

        env = CartPoleEnv()
        for key, value in params.items():
            setattr(env, key, float(value))
        # Derived quantities the dynamics read: recompute them after changing masses or length.
        env.total_mass = env.masspole + env.masscart
        env.polemass_length = env.masspole * env.length
        return env

    def spec(self, task: str, variant: str, params: Mapping[str, Any]) -> TaskSpec:
        return TaskSpec(
            task=task,
            variant=variant,
            family=self.name,
            num_actions=2,
            observation_shape=(4,),
            observation_low=self.low.copy(),
            observation_high=self.high.copy(),
            params=dict(params),
        )


class FrozenLakeFamily:
    """FrozenLake-v1. ``map``: a gymnasium map name ("4x4", "8x8") or a list of rows of S/F/H/G;
    ``is_slippery``: the intended move happens with probability ``success_rate`` (gymnasium: 1/3)."""

    name = "frozenlake"
    params = ("map", "is_slippery", "success_rate")

    def check(self, params: Mapping[str, Any], where: str) -> None:
        try:
            self._desc(params)
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{where}.map: {exc}") from None
        slippery = params.get("is_slippery", False)
        if not isinstance(slippery, bool):  # bool("false") is True: only a real boolean is safe here
            raise ConfigError(f"{where}.is_slippery: expected true or false, got {slippery!r}")
        if "success_rate" in params:
            as_float(params["success_rate"], f"{where}.success_rate", minimum=0.0, maximum=1.0)

    def _desc(self, params):
        from gymnasium.envs.toy_text.frozen_lake import MAPS

        m = params.get("map", "4x4")
        if isinstance(m, str):
            if m not in MAPS:
                raise ValueError(f"frozenlake map {m!r}: expected one of {sorted(MAPS)} or a list of rows")
            return list(MAPS[m])
        rows = [str(r) for r in m]
        if len({len(r) for r in rows}) != 1 or set("".join(rows)) - set("SFHG") or "".join(rows).count("S") != 1:
            raise ValueError(f"frozenlake map {rows}: expected equal-length rows of S/F/H/G with exactly one S")
        return rows

    def make(self, params: Mapping[str, Any]):
        from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv

        kwargs = {"desc": self._desc(params), "is_slippery": bool(params.get("is_slippery", False))}
        if "success_rate" in params:
            kwargs["success_rate"] = float(params["success_rate"])
        return FrozenLakeEnv(**kwargs)

    def spec(self, task: str, variant: str, params: Mapping[str, Any]) -> TaskSpec:
        desc = self._desc(params)
        return TaskSpec(
            task=task,
            variant=variant,
            family=self.name,
            num_actions=4,
            num_observations=len(desc) * len(desc[0]),
            params=dict(params),
        )


FAMILIES = {f.name: f for f in (CartPoleFamily(), FrozenLakeFamily())}


# ------------------------------------------------------------------------------------------ episodes


class TaskEnv:
    """One (task, variant) environment: ``reset(seed) -> obs``, ``step(a) -> (obs, r, terminated, truncated)``."""

    def __init__(self, env, spec: TaskSpec, max_episode_steps: int):
        self.env, self.spec, self.max_episode_steps = env, spec, int(max_episode_steps)
        self._t = 0

    def reset(self, seed: int):
        self._t = 0
        obs, _ = self.env.reset(seed=int(seed))
        return self._obs(obs)

    def step(self, action: int):
        obs, reward, terminated, _, _ = self.env.step(action)
        self._t += 1
        return self._obs(obs), float(reward), bool(terminated), (not terminated) and self._t >= self.max_episode_steps

    def _obs(self, obs):
        return int(obs) if self.spec.discrete else np.asarray(obs, dtype=np.float64)


# ------------------------------------------------------------------------------------------ domain


def environment_inputs(name: str, tasks: Mapping[str, Any]) -> tuple[DataInput, ...]:
    """The run's "Datasets" entries of an RL domain: one per task, the environment it makes (gymnasium's version and
    the task's settings as given, its variants included) and the digest of those settings, so a run records which
    exact environments produced its numbers and a changed variant is a different run."""
    import hashlib

    import gymnasium

    found = []
    for task, node in tasks.items():
        text = json.dumps(node, sort_keys=True, default=repr)
        variants = node.get("variants") if isinstance(node, Mapping) else None
        ident = node.get("id") or node.get("family") or task if isinstance(node, Mapping) else task
        found.append(
            DataInput(
                name=f"{name}/{task}",
                source=f"gymnasium {gymnasium.__version__}: {ident} {text}"[:60000],
                digest=hashlib.sha256(text.encode()).hexdigest(),
                num_samples=len(variants) if isinstance(variants, Mapping) else 1,
                source_type="environment",
                context="environment",
            )
        )
    return tuple(found)


class RLDomain:
    """Named tasks, each a family with base parameters and named variants.

    ``tasks``: ``{task: {family: cartpole, max_episode_steps: 200, params: {...}, variants: {name: {...}}}}``;
    a variant's parameters override the task's base ``params``.
    """

    def __init__(self, name: str, tasks: Mapping[str, Mapping[str, Any]]):
        require_gymnasium()
        self.name = as_str(str(name), "domain.name")
        if not isinstance(tasks, Mapping) or not tasks:
            raise ConfigError(
                f"domain.tasks: expected a non-empty mapping {{task: {{family, variants, ...}}}}, got {tasks!r}"
            )
        self.tasks: dict[str, dict] = {}
        for task, node in tasks.items():
            where = f"domain.tasks.{task}"
            if not isinstance(node, Mapping):
                raise ConfigError(
                    f"{where}: expected a mapping {{family, max_episode_steps, params, variants}}, got {node!r}"
                )
            if not TASK_RE.fullmatch(str(task)):
                raise ConfigError(
                    f"{where}: task names are lower-case letters, digits, '.', '-' (no '_'), got {task!r}"
                )
            family = FAMILIES.get(node.get("family", task))
            if family is None:
                raise ConfigError(
                    f"{where}.family: unknown family {node.get('family', task)!r}; known: {sorted(FAMILIES)}"
                )
            variants = node.get("variants") or {"default": {}}
            if not isinstance(variants, Mapping):
                raise ConfigError(f"{where}.variants: expected a mapping {{variant: {{parameters}}}}, got {variants!r}")
            variants = dict(variants)
            base = node.get("params") or {}
            for variant, params in variants.items():
                for part, value in ((f"{where}.params", base), (f"{where}.variants.{variant}", params or {})):
                    if not isinstance(value, Mapping):
                        raise ConfigError(f"{part}: expected a mapping of parameters, got {value!r}")
                if not VARIANT_RE.fullmatch(str(variant)):
                    raise ConfigError(
                        f"{where}.variants: variant names are lower-case letters, digits, '.', '-', '_', got {variant!r}"
                    )
                merged = {**(node.get("params") or {}), **(params or {})}
                unknown = sorted(set(merged) - set(family.params))
                if unknown:
                    raise ConfigError(
                        f"{where}.variants.{variant}: unknown parameter(s) {unknown} for family "
                        f"{family.name!r}; valid: {list(family.params)}"
                    )
                family.check(merged, f"{where}.variants.{variant}")
                variants[variant] = merged
            steps = as_int(node.get("max_episode_steps", 200), f"{where}.max_episode_steps", minimum=1)
            self.tasks[str(task)] = {"family": family, "variants": variants, "max_episode_steps": steps}
        self._given = {str(k): v for k, v in tasks.items()}

    def provenance(self) -> tuple[DataInput, ...]:
        return environment_inputs(self.name, self._given)

    def variants(self, task: str) -> list[str]:
        return list(self._task(task)["variants"])

    def params(self, task: str, variant: str) -> dict:
        node = self._task(task)
        if variant not in node["variants"]:
            raise KeyError(
                f"unknown variant {variant!r} of task {task!r} in domain {self.name!r}; "
                f"variants: {list(node['variants'])}"
            )
        return dict(node["variants"][variant])

    def spec(self, task: str, variant: str) -> TaskSpec:
        node = self._task(task)
        spec = node["family"].spec(task, variant, self.params(task, variant))
        return dataclasses.replace(spec, max_episode_steps=node["max_episode_steps"])

    def make(self, task: str, variant: str) -> TaskEnv:
        node = self._task(task)
        params = self.params(task, variant)
        return TaskEnv(node["family"].make(params), self.spec(task, variant), node["max_episode_steps"])

    def identity(self, task: str, variant: str) -> dict:
        """Everything about a (task, variant) that changes its episodes (keys STE references)."""
        node = self._task(task)
        return {
            "family": node["family"].name,
            "params": json.loads(json.dumps(self.params(task, variant))),
            "max_episode_steps": node["max_episode_steps"],
        }

    def _task(self, task: str) -> dict:
        if task not in self.tasks:
            raise KeyError(f"unknown task {task!r} in domain {self.name!r}; tasks: {list(self.tasks)}")
        return self.tasks[task]
