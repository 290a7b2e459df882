"""Run an agent written for tella (``tella.ContinualRLAgent``), unchanged, on owl-eval's lifelong-RL syllabi.

The user's class (``agent.agent._target_``) is built as tella builds it (``tella/experiment.py``,
``rl_experiment``): ``Agent(rng_seed, observation_space, action_space, num_envs, config_file)``, positionally, once
per run (tella: once per lifetime), with

- ``rng_seed``: ``rng.bit_generator.random_raw()`` of the agent's generator (tella:
  ``agent_rng.bit_generator.random_raw()``), the agent's generator being the one the protocol spawns from the
  run's ``seed`` for the agent (``owl_eval/protocols/lifelong_rl/episodes.py``);
- ``observation_space``, ``action_space``: the gymnasium spaces of the syllabus's first block's environment
  (tella: of the curriculum's first task variant; one pair for the whole run). A syllabus whose blocks have
  other spaces is an error before any run;
- ``num_envs``: 1 (tella's default ``--num-parallel-envs``; the episode loop runs one environment);
- ``config_file``: ``agent.config_file`` (null: tella's ``None``). Other keys of ``agent.agent`` are passed as
  keyword arguments after these five (tella passes none).

Then, as tella's ``run`` loop does for each block of a curriculum whose blocks each hold one task variant
(``tella/experiment.py``, ``run`` and ``generate_transitions``; ``tella/agents.py`` for the methods):
``agent.is_learning_allowed = <train block>``, ``block_start(is_learning_allowed)``, ``task_start(task)``,
``task_variant_start(task, variant)``; per step ``choose_actions([observation])`` -> a list of one action and
``receive_transitions([Transition(observation, action, reward, done, next_observation)])``, where in evaluation
blocks the reward is ``None`` (tella's ``hide_rewards``: evaluation transitions are given, their rewards
withheld); then ``task_variant_end(task, variant)``, ``task_end(task)``, ``block_end(is_learning_allowed)``.
``done`` is ``terminated or truncated`` (gym's ``done``; the step limit is the domain's ``max_episode_steps``, as
tella's ``TimeLimit``), and ``next_observation`` of the last step is the terminal observation (tella's
``info["terminal_observation"]``). Task and variant names are the syllabus's (``cartpole``, ``long_pole``).

**Differences from tella, named.**

- Spaces and observations are gymnasium's (tella 2.x uses gym 0.2x: same ``n``, ``shape``, ``low``/``high``,
  ``dtype``, ``seed`` and ``sample``). An observation is given as a row of gym's vector environment would be:
  ``numpy`` of the observation space's dtype (float32 for CartPole), a ``numpy.int64`` for a discrete space.
- ``Transition`` is this module's named tuple with tella's fields in tella's order (``tella.curriculum.Transition``
  is not imported: tella needs gym).
- One environment: no observation is ever ``None`` (tella masks environments past a block's episode limit only
  when several run in parallel); the returned list must hold one action, not ``None``.
- Evaluation episodes reset with the protocol's seeds (``protocol.eval_seed`` + i), training episodes with
  seeds from the run's generator (tella seeds a vector environment once per task variant).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from owl_eval.errors import ConfigError
from owl_eval.protocols.base import AgentOutputError
from owl_eval.protocols.interfaces import plain
from owl_eval.protocols.lifelong_rl.api import BlockInfo, TaskSpec
from owl_eval.protocols.lifelong_rl.domains import FAMILIES, require_gymnasium

KEY = "agent.agent"
# tella's ContinualRLAgent: what its run loop calls (the event methods have do-nothing defaults in tella's base
# class, which an agent written for tella inherits), name -> (how it is called, positional arguments)
TELLA_METHODS = {
    "choose_actions": ("choose_actions(observations)", 1),
    "receive_transitions": ("receive_transitions(transitions)", 1),
    "block_start": ("block_start(is_learning_allowed)", 1),
    "task_start": ("task_start(task_name)", 1),
    "task_variant_start": ("task_variant_start(task_name, variant_name)", 2),
    "task_variant_end": ("task_variant_end(task_name, variant_name)", 2),
    "task_end": ("task_end(task_name)", 1),
    "block_end": ("block_end(is_learning_allowed)", 1),
}
CONSTRUCTOR = "(rng_seed, observation_space, action_space, num_envs, config_file)"


class Transition(NamedTuple):
    """tella's ``Transition``: one step, ``reward`` None in evaluation blocks."""

    observation: Any
    action: Any
    reward: float | None
    done: bool
    next_observation: Any


class TellaAgent:
    """A lifelong-RL agent that drives a tella ``ContinualRLAgent`` (see the module docstring)."""

    def __init__(self, agent: Any, config_file: str | None = None):
        if not isinstance(agent, Mapping) or not isinstance(agent.get("_target_"), str):
            raise ConfigError(
                f"{KEY}: expected the config of your tella agent, {{_target_: your.module.Agent}} (built here with "
                f"tella's arguments {CONSTRUCTOR}; keep _recursive_: false on the agent node), got {agent!r}"
            )
        if config_file is not None and not isinstance(config_file, str):
            raise ConfigError(f"{KEY.rsplit('.', 1)[0]}.config_file: expected null or a path, got {config_file!r}")
        self.config = dict(agent)
        self.config_file = config_file
        self.target = self.config["_target_"]
        self.kwargs = {k: v for k, v in self.config.items() if not k.startswith("_")}
        factory = _locate(self.target)
        _check_constructor(factory, self.target, self.kwargs)
        if inspect.isclass(factory):
            _check_methods(factory, self.target, on_class=True)
        self.agent: Any = None
        self.rng_seed: int | None = None
        self.spaces: tuple[Any, Any] | None = None
        self.learning = True

    # -- checks before any run ------------------------------------------------------------------------------------
    def check_syllabus(self, syllabus, domain) -> None:
        """tella builds the agent with one observation/action space pair: every block's environment has it."""
        first, seen = None, {}
        for index, block in enumerate(syllabus.blocks):
            key = (block.task, block.variant)
            if key not in seen:
                seen[key] = spaces_for(domain.make(block.task, block.variant).spec)
            spaces = seen[key]
            if first is None:
                first = (block, spaces)
            elif spaces != first[1]:
                raise ConfigError(
                    f"agent ({self.target} through agent=lifelong_rl/tella): tella builds the agent once, with the "
                    f"spaces of the first task variant ({first[0].task_name}: observation {first[1][0]}, action "
                    f"{first[1][1]}); block {index} ({block.task_name}) has observation {spaces[0]}, action "
                    f"{spaces[1]}; choose a syllabus whose tasks share their spaces"
                )

    # -- the lifelong-RL agent interface ------------------------------------------------------------------------
    def seed(self, rng: np.random.Generator) -> None:
        """A fresh tella agent (built at the first block, when its spaces are known) with a seed from ``rng``."""
        self.rng_seed = int(rng.bit_generator.random_raw())
        self.agent = None
        self.spaces = None

    def start_task(self, spec: TaskSpec) -> None:
        spaces = spaces_for(spec)
        if self.agent is None:
            if self.rng_seed is None:
                raise RuntimeError("TellaAgent.start_task before seed: the protocol calls seed first")
            self.spaces = spaces
            self.agent = _build(self.target, self.config, self.rng_seed, spaces, self.config_file)
            _check_methods(self.agent, self.target, on_class=False)
        elif spaces != self.spaces:
            raise ConfigError(
                f"agent ({self.target}): task {spec.task_name} has observation {spaces[0]}, action {spaces[1]}, "
                f"not the spaces the tella agent was built with ({self.spaces})"
            )

    def end_task(self, spec: TaskSpec) -> None:
        pass  # tella's task_end comes with every block (end_block)

    def set_learning(self, on: bool) -> None:
        self.learning = bool(on)

    def start_block(self, block: BlockInfo) -> None:
        learning = block.learning
        try:
            self.agent.is_learning_allowed = learning
        except AttributeError:  # a read-only attribute: tella would fail here; the call below still tells it
            pass
        self.agent.block_start(learning)
        self.agent.task_start(block.spec.task)
        self.agent.task_variant_start(block.spec.task, block.spec.variant)

    def end_block(self, block: BlockInfo) -> None:
        self.agent.task_variant_end(block.spec.task, block.spec.variant)
        self.agent.task_end(block.spec.task)
        self.agent.block_end(block.learning)

    def act(self, observation):
        self._observation = self._obs(observation)
        actions = self.agent.choose_actions([self._observation])
        if isinstance(actions, (str, bytes)) or not isinstance(actions, (Sequence, np.ndarray)) or len(actions) != 1:
            raise AgentOutputError(
                f"{KEY} ({self.target}).choose_actions([observation]) returned {actions!r}, expected a list of one "
                "action (one environment)"
            )
        action = actions[0]
        if action is None:
            raise AgentOutputError(
                f"{KEY} ({self.target}).choose_actions([observation]) returned [None] for an environment that is "
                "not done; expected an action"
            )
        self._action = action
        return action

    def observe(self, observation, action, reward, next_observation, terminated, truncated) -> None:
        self._give(float(reward), next_observation, terminated, truncated)

    def observe_evaluation(self, observation, action, next_observation, terminated, truncated) -> None:
        self._give(None, next_observation, terminated, truncated)

    def _give(self, reward, next_observation, terminated, truncated) -> None:
        done = bool(terminated or truncated)
        step = Transition(self._observation, self._action, reward, done, self._obs(next_observation))
        self.agent.receive_transitions([step])

    def _obs(self, observation):
        space = self.spaces[0] if self.spaces is not None else None
        if space is not None and getattr(space, "n", None) is not None and not getattr(space, "shape", ()):
            return np.int64(observation)
        dtype = getattr(space, "dtype", None) or np.float64
        return np.asarray(observation, dtype=dtype)

    def __repr__(self) -> str:
        return f"TellaAgent({self.target})"


# -- spaces ---------------------------------------------------------------------------------------------------
def spaces_for(spec: TaskSpec) -> tuple[Any, Any]:
    """The gymnasium (observation, action) spaces of ``spec``'s environment: the environment's own for the
    built-in families, else made from the spec (``Discrete`` observations, or a float32 ``Box`` between the spec's
    bounds, unbounded without them)."""
    family = FAMILIES.get(spec.family)
    if family is not None:
        env = family.make(spec.params)
        try:
            return env.observation_space, env.action_space
        finally:
            env.close()
    spaces = require_gymnasium().spaces
    if spec.num_observations is not None:
        observation = spaces.Discrete(spec.num_observations)
    elif spec.observation_low is not None and spec.observation_high is not None:
        observation = spaces.Box(spec.observation_low, spec.observation_high, dtype=np.float32)
    else:
        observation = spaces.Box(-np.inf, np.inf, shape=spec.observation_shape, dtype=np.float32)
    return observation, spaces.Discrete(spec.num_actions)


# -- building and checking the user's agent -------------------------------------------------------------------
def _locate(target: str):
    """The object ``target`` names (``package.module.Name``, or a name nested in a module)."""
    import importlib

    parts = target.split(".")
    error: Exception | None = None
    for cut in range(len(parts) - 1, 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError as exc:
            error = error or exc
            continue
        try:
            for name in parts[cut:]:
                found = getattr(found, name)
        except AttributeError as exc:
            raise ConfigError(f"{KEY}._target_: cannot import {target!r} ({exc})") from None
        return found
    raise ConfigError(f"{KEY}._target_: cannot import {target!r} ({error or 'not a dotted path'})")


def _check_constructor(factory, target: str, kwargs: dict) -> None:
    if not callable(factory):
        raise ConfigError(f"{KEY}._target_: {target} is not a class or a function (tella's AgentFactory)")
    try:
        signature = inspect.signature(factory)
    except (TypeError, ValueError):
        return
    try:
        signature.bind(*([None] * 5), **kwargs)
    except TypeError as exc:
        raise ConfigError(
            f"{KEY}: {target}({plain(signature)}) cannot be called as tella calls it, {target}{CONSTRUCTOR}"
            + (f" plus {sorted(kwargs)}" if kwargs else "")
            + f" ({exc})"
        ) from None


def _check_methods(obj, target: str, *, on_class: bool) -> None:
    """``obj`` (the class, or the built agent) has every method tella's run loop calls, callable as tella calls it."""
    for name, (call, args) in TELLA_METHODS.items():
        method = getattr(obj, name, None)
        if not callable(method):
            raise ConfigError(
                f"{KEY}: {target} has no method {call} (tella's ContinualRLAgent interface; subclassing "
                "tella.ContinualRLAgent gives the block/task methods)"
            )
        try:
            signature = inspect.signature(method)
        except (TypeError, ValueError):
            continue
        if on_class and inspect.isfunction(inspect.getattr_static(obj, name, None)):
            args += 1  # a plain function on the class: self comes first
        if not _binds(signature, args):
            raise ConfigError(f"{KEY}: {target}.{name}({plain(signature)}) cannot be called as tella calls it, {call}")


def _binds(signature: inspect.Signature, count: int) -> bool:
    try:
        signature.bind(*([None] * count))
    except TypeError:
        return False
    return True


def _build(target: str, config: dict, rng_seed: int, spaces: tuple[Any, Any], config_file: str | None):
    from hydra.utils import instantiate

    agent = instantiate(config, rng_seed, spaces[0], spaces[1], 1, config_file, _convert_="all")
    if agent is None:
        raise ConfigError(f"{KEY}: {target}{CONSTRUCTOR} returned None, expected the agent")
    return agent
