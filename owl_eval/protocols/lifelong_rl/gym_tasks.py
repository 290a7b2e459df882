"""Lifelong RL on any registered gymnasium environment (``domain=gymnasium``).

A task names a gymnasium environment id (``id: MountainCar-v0``), one of gymnasium's own, an installed package's
(``MiniGrid-DoorKey-5x5-v0`` once ``minigrid`` is imported: ``import: minigrid``) or a user's own class, registered
under the id by ``entry_point: my_pkg.envs:MyEnv`` before ``gymnasium.make``. Each variant is a mapping of
attributes set on the unwrapped environment (``{force: 0.0015}``, as CartPole's variants) and/or ``gymnasium.make``
keyword arguments under ``make_kwargs``; a task's own ``make_kwargs`` are the base its variants' override.
``wrappers`` (a list of ``{_target_: gymnasium.wrappers.FlattenObservation, ...}``, applied in order, each built
with the environment as its first argument) make the observation one that the agents take: ``Discrete(n)`` or a
``Box``; the actions must be ``Discrete(n)``.

Every (task, variant) is built once when the domain is built, so an unknown id, an attribute the unwrapped
environment lacks, a bad ``make_kwargs`` entry or an unusable space is one ``ConfigError`` naming the task, the
variant and the key, before any run exists. Episodes end at the environment's own termination or truncation or at
``max_episode_steps`` (default: the id's registered limit, else 200), whichever comes first.

``family`` (default: the task name) is what the baseline agents key their learned tables by: tasks of one family
share them (``family: doorkey`` for the three DoorKey sizes, whose egocentric views have the same space).
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from owl_eval.datasets.provenance import DataInput
from owl_eval.errors import ConfigError
from owl_eval.protocols.lifelong_rl.api import TaskSpec
from owl_eval.protocols.lifelong_rl.domains import (
    TASK_RE,
    VARIANT_RE,
    TaskEnv,
    environment_inputs,
    require_gymnasium,
)
from owl_eval.typed import as_int, as_str, check_keys

TASK_KEYS = ("id", "entry_point", "import", "family", "max_episode_steps", "make_kwargs", "wrappers", "variants")
MAKE_KWARGS = "make_kwargs"
EXTRAS = {"minigrid": "minigrid"}  # modules an owl-eval extra installs
SPACES_HINT = "lifelong-RL agents take Discrete(n) or Box observations and act in Discrete(n)"


def _plain(value: Any) -> Any:
    """A resolved plain-Python copy of a config node (the domain node is built with ``_recursive_: false``)."""
    from omegaconf import OmegaConf

    return OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def describe_space(space) -> str:
    """A gymnasium space on one line (Box bounds collapsed to their range when long)."""
    text = " ".join(str(space).split())
    return text if len(text) <= 160 else f"{type(space).__name__}{getattr(space, 'shape', '')}"


def _is_number(value) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_))


def _same_kind(value, reference, key: str, shown: str, env) -> None:
    """A number where the environment has a number (a string there fails only deep in the dynamics)."""
    if _is_number(reference) and not _is_number(value):
        env.close()
        raise ConfigError(f"{key}: expected a number ({shown}), got {value!r}")
    if isinstance(reference, (bool, np.bool_)) and not isinstance(value, (bool, np.bool_)):
        env.close()
        raise ConfigError(f"{key}: expected true or false ({shown}), got {value!r}")


def _constructor_defaults(gym, env_id: str) -> dict[str, Any]:
    """The keyword defaults of an id's constructor, with the registration's own kwargs over them ({} if unknown)."""
    import inspect

    try:
        spec = gym.spec(env_id)
        creator = spec.entry_point
        if isinstance(creator, str):
            from gymnasium.envs.registration import load_env_creator

            creator = load_env_creator(creator)
        params = inspect.signature(creator).parameters.values()
        defaults = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}
        return {**defaults, **(spec.kwargs or {})}
    except Exception:  # noqa: BLE001 - no signature to compare with: nothing checked
        return {}


class GymTaskEnv(TaskEnv):
    """A built gymnasium environment (wrappers included): the environment's own truncation counts as well."""

    def step(self, action: int):
        obs, reward, terminated, truncated, _ = self.env.step(action)
        self._t += 1
        terminated = bool(terminated)
        truncated = (not terminated) and (bool(truncated) or self._t >= self.max_episode_steps)
        return self._obs(obs), float(reward), terminated, truncated


@dataclasses.dataclass
class _Task:
    id: str
    entry_point: str | None
    imports: list[str]
    family: str
    max_episode_steps: int
    wrappers: list[Any]
    variants: dict[str, dict[str, Any]]  # variant -> {attribute: value, make_kwargs: {...}} (task kwargs merged)


class GymnasiumDomain:
    """Named tasks, each a gymnasium environment id with named variants (see the module docstring).

    ``tasks``: ``{task: {id, entry_point?, import?, family?, max_episode_steps?, make_kwargs?, wrappers?,
    variants: {variant: {attribute: value, ..., make_kwargs: {...}}}}}``.
    """

    def __init__(self, name: str, tasks: Mapping[str, Any]):
        gym = require_gymnasium()
        self.name = as_str(str(name), "domain.name")
        tasks = _plain(tasks)
        self._given = dict(tasks) if isinstance(tasks, Mapping) else {}
        if not isinstance(tasks, Mapping) or not tasks:
            raise ConfigError(
                f"domain.tasks: expected a non-empty mapping {{task: {{id, variants, ...}}}}, got {tasks!r}"
            )
        self.tasks: dict[str, _Task] = {}
        self._specs: dict[tuple[str, str], TaskSpec] = {}
        for task, node in tasks.items():
            where = f"domain.tasks.{task}"
            if not isinstance(node, Mapping):
                raise ConfigError(f"{where}: expected a mapping {{id, variants, ...}}, got {node!r}")
            if not TASK_RE.fullmatch(str(task)):
                raise ConfigError(
                    f"{where}: task names are lower-case letters, digits, '.', '-' (no '_'), got {task!r}"
                )
            check_keys(node, TASK_KEYS, where)
            env_id = as_str(node.get("id"), f"{where}.id") if node.get("id") is not None else None
            if not env_id:
                raise ConfigError(f"{where}.id: expected a gymnasium environment id (MountainCar-v0), got nothing")
            entry_point = node.get("entry_point")
            if entry_point is not None:
                entry_point = as_str(entry_point, f"{where}.entry_point")
            imports = node.get("import") or []
            imports = [imports] if isinstance(imports, str) else list(imports)
            base_kwargs = node.get(MAKE_KWARGS) or {}
            if not isinstance(base_kwargs, Mapping):
                raise ConfigError(
                    f"{where}.{MAKE_KWARGS}: expected a mapping of gymnasium.make keywords, got {base_kwargs!r}"
                )
            wrappers = node.get("wrappers") or []
            if isinstance(wrappers, (str, Mapping)) or not isinstance(wrappers, Sequence):
                raise ConfigError(
                    f"{where}.wrappers: expected a list of {{_target_: a wrapper class}}, got {wrappers!r}"
                )
            for i, w in enumerate(wrappers):
                if not callable(w) and not (isinstance(w, Mapping) and isinstance(w.get("_target_"), str)):
                    raise ConfigError(f"{where}.wrappers[{i}]: expected {{_target_: a wrapper class, ...}}, got {w!r}")
            variants = node.get("variants") or {"default": {}}
            if not isinstance(variants, Mapping):
                raise ConfigError(f"{where}.variants: expected a mapping {{variant: {{attributes, make_kwargs}}}}")
            merged: dict[str, dict[str, Any]] = {}
            for variant, params in variants.items():
                vwhere = f"{where}.variants.{variant}"
                if not VARIANT_RE.fullmatch(str(variant)):
                    raise ConfigError(
                        f"{where}.variants: variant names are lower-case letters, digits, '.', '-', '_', got {variant!r}"
                    )
                params = dict(params or {})
                if not isinstance(params.get(MAKE_KWARGS) or {}, Mapping):
                    raise ConfigError(f"{vwhere}.{MAKE_KWARGS}: expected a mapping of gymnasium.make keywords")
                params[MAKE_KWARGS] = {**base_kwargs, **(params.get(MAKE_KWARGS) or {})}
                merged[str(variant)] = params
            self.tasks[str(task)] = _Task(
                id=env_id,
                entry_point=entry_point,
                imports=[as_str(m, f"{where}.import") for m in imports],
                family=as_str(str(node.get("family") or task), f"{where}.family"),
                max_episode_steps=0,
                wrappers=list(wrappers),
                variants=merged,
            )
            self._prepare(gym, str(task), node.get("max_episode_steps"))
            for variant in merged:  # every variant built once: a bad one is refused now, before any run
                env = self._build(str(task), variant)
                self._specs[(str(task), variant)] = self._spec_of(env, str(task), variant)
                self._probe(env, str(task), variant)

    # -- building ----------------------------------------------------------------------------------------
    def _prepare(self, gym, task: str, steps) -> None:
        """Imports, registration of ``entry_point`` under the id, the id known, the step limit."""
        node, where = self.tasks[task], f"domain.tasks.{task}"
        for module in node.imports:
            try:
                importlib.import_module(module)
            except ImportError as exc:
                hint = f'; pip install -e ".[{EXTRAS[module]}]"' if module in EXTRAS else ""
                raise ConfigError(f"{where}.import: cannot import {module!r} ({_one_line(exc)}){hint}") from None
        if node.entry_point is not None:
            known = gym.envs.registry.get(node.id)
            if known is None or known.entry_point != node.entry_point:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # "Overriding environment": what the config asks
                    gym.register(id=node.id, entry_point=node.entry_point)
        try:
            env_spec = gym.spec(node.id)
        except gym.error.Error as exc:
            first = next(iter(node.variants))
            raise ConfigError(
                f"{where}.id (variant {first}): unknown gymnasium environment {node.id!r}: {_one_line(exc)} "
                "(a package's environments need `import: <package>`, your own `entry_point: module:Class`)"
            ) from None
        default = env_spec.max_episode_steps or 200
        node.max_episode_steps = as_int(default if steps is None else steps, f"{where}.max_episode_steps", minimum=1)

    def _build(self, task: str, variant: str):
        """``gymnasium.make(id, **make_kwargs)``, the variant's attributes set on the unwrapped env, the wrappers."""
        gym = require_gymnasium()
        node = self._task(task)
        params = self.params(task, variant)
        kwargs = params.pop(MAKE_KWARGS)
        where = f"domain.tasks.{task}.variants.{variant}"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # the passive checker's notes on user environments
                env = gym.make(node.id, **kwargs)
        except Exception as exc:  # noqa: BLE001 - any failure of the env's constructor is the config's
            text = _one_line(exc)
            if node.entry_point is not None and isinstance(exc, (ImportError, AttributeError)) and not kwargs:
                raise ConfigError(
                    f"domain.tasks.{task}.entry_point (variant {variant}): cannot load {node.entry_point!r}: {text}"
                ) from None
            named = re.search(r"unexpected keyword argument '(\w+)'", text)
            keys = [named.group(1)] if named else list(kwargs)
            key = keys[0] if len(keys) == 1 else "{" + ",".join(keys) + "}"
            raise ConfigError(
                f"{where}.{MAKE_KWARGS}.{key}: gymnasium.make({node.id!r}, ...) refused it: {text}"
                if keys
                else f"domain.tasks.{task}.id (variant {variant}): gymnasium.make({node.id!r}) failed: {text}"
            ) from None
        for key, value in kwargs.items():
            default = _constructor_defaults(gym, node.id).get(key)
            _same_kind(value, default, f"{where}.{MAKE_KWARGS}.{key}", f"{node.id}'s default {default!r}", env)
        unwrapped = env.unwrapped
        for key, value in params.items():
            if not hasattr(unwrapped, key):
                env.close()
                raise ConfigError(
                    f"{where}.{key}: {type(unwrapped).__name__} ({node.id}) has no attribute {key!r}; attributes: "
                    f"{sorted(k for k in vars(unwrapped) if not k.startswith('_'))}; gymnasium.make keywords go "
                    f"under {MAKE_KWARGS}"
                )
            current = getattr(unwrapped, key)
            _same_kind(value, current, f"{where}.{key}", f"{type(unwrapped).__name__}.{key} = {current!r}", env)
            setattr(unwrapped, key, value)
        for i, wrapper in enumerate(node.wrappers):
            env = self._wrap(env, wrapper, f"domain.tasks.{task}.wrappers[{i}] (variant {variant})")
        return env

    def _probe(self, env, task: str, variant: str) -> None:
        """A reset and one step: a setting the constructor took but the dynamics cannot use (a string where a
        number goes) fails here, before any run, naming the variant's settings."""
        params = self.params(task, variant)
        kwargs = params.pop(MAKE_KWARGS)
        keys = [*params, *(f"{MAKE_KWARGS}.{k}" for k in kwargs)]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                env.reset(seed=0)
                env.step(0)
        except Exception as exc:  # noqa: BLE001 - the variant's settings broke the environment
            where = f"domain.tasks.{task}.variants.{variant}"
            key = f"{where}.{keys[0]}" if len(keys) == 1 else f"{where} (settings {keys})" if keys else where
            raise ConfigError(
                f"{key}: {self._task(task).id} fails at its first reset and step: {_one_line(exc)}"
            ) from None
        finally:
            env.close()

    @staticmethod
    def _wrap(env, wrapper, where: str):
        try:
            if callable(wrapper):
                return wrapper(env)
            from hydra.utils import instantiate

            return instantiate(dict(wrapper), env, _convert_="all")
        except Exception as exc:  # noqa: BLE001 - a wrapper that cannot wrap is a config error
            cause = exc.__cause__ or exc
            raise ConfigError(f"{where}: could not wrap the environment: {_one_line(cause)}") from None

    def _spec_of(self, env, task: str, variant: str) -> TaskSpec:
        """The agent's view of the built env's spaces; a space the agents cannot take is one error naming it."""
        gym = require_gymnasium()
        node = self._task(task)
        where = f"domain.tasks.{task}.variants.{variant}"
        obs_space, act_space = env.observation_space, env.action_space
        Discrete, Box = gym.spaces.Discrete, gym.spaces.Box
        if not isinstance(act_space, Discrete) or int(act_space.start) != 0:
            raise ConfigError(
                f"{where}: {node.id} acts in {describe_space(act_space)}, the agents in Discrete(n) (actions 0..n-1): "
                f"{SPACES_HINT}"
            )
        base: dict[str, Any] = dict(
            task=task,
            variant=variant,
            family=node.family,
            num_actions=int(act_space.n),
            params=self.params(task, variant),
            max_episode_steps=node.max_episode_steps,
        )
        if isinstance(obs_space, Discrete) and int(obs_space.start) == 0:
            return TaskSpec(**base, num_observations=int(obs_space.n))
        if isinstance(obs_space, Box):
            low = np.asarray(obs_space.low, dtype=np.float64).ravel()
            high = np.asarray(obs_space.high, dtype=np.float64).ravel()
            finite = bool(np.all(np.isfinite(low)) and np.all(np.isfinite(high)))
            return TaskSpec(
                **base,
                observation_shape=(int(np.prod(obs_space.shape)),) if len(obs_space.shape) != 1 else obs_space.shape,
                observation_low=low if finite else None,
                observation_high=high if finite else None,
            )
        raise ConfigError(
            f"{where}: {node.id} observes {describe_space(obs_space)}, the agents Discrete(n) or Box: add a wrapper "
            f"(domain.tasks.{task}.wrappers: [{{_target_: gymnasium.wrappers.FlattenObservation}}]); {SPACES_HINT}"
        )

    # -- the RLDomain interface -------------------------------------------------------------------------
    def provenance(self) -> tuple[DataInput, ...]:
        return environment_inputs(self.name, self._given)

    def variants(self, task: str) -> list[str]:
        return list(self._task(task).variants)

    def params(self, task: str, variant: str) -> dict:
        node = self._task(task)
        if variant not in node.variants:
            raise KeyError(
                f"unknown variant {variant!r} of task {task!r} in domain {self.name!r}; variants: {list(node.variants)}"
            )
        params = dict(node.variants[variant])
        params[MAKE_KWARGS] = dict(params[MAKE_KWARGS])
        return params

    def spec(self, task: str, variant: str) -> TaskSpec:
        self.params(task, variant)  # the KeyError of an unknown variant
        return self._specs[(task, variant)]

    def make(self, task: str, variant: str) -> GymTaskEnv:
        node = self._task(task)
        return GymTaskEnv(self._build(task, variant), self.spec(task, variant), node.max_episode_steps)

    def identity(self, task: str, variant: str) -> dict:
        """Everything about a (task, variant) that changes its episodes (keys STE references)."""
        node = self._task(task)
        return json.loads(
            json.dumps(
                {
                    "family": "gymnasium",
                    "id": node.id,
                    "entry_point": node.entry_point,
                    "params": self.params(task, variant),
                    "wrappers": [w if isinstance(w, Mapping) else repr(w) for w in node.wrappers],
                    "max_episode_steps": node.max_episode_steps,
                },
                default=repr,
            )
        )

    def _task(self, task: str) -> _Task:
        if task not in self.tasks:
            raise KeyError(f"unknown task {task!r} in domain {self.name!r}; tasks: {list(self.tasks)}")
        return self.tasks[task]
