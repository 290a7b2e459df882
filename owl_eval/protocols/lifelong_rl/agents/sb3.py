"""A Stable-Baselines3 algorithm as a lifelong-RL agent (``agent=lifelong_rl/sb3``), named in YAML: PPO, A2C, DQN
(or any ``BaseAlgorithm``: ``sb3_contrib.QRDQN``...) with its policy and keywords, learning through the syllabus.

How it learns, and what is logged. SB3 steps its environment itself (``learn`` collects its own rollouts), while
the syllabus driver steps the block's environment and logs each of its episodes. So the agent learns on a
private copy of each block's environment, and the driver's episodes are the logged ones:

- The private copy is built from the block's task spec as the domain builds it (the family's gymnasium class with
  the variant's parameters, truncated at the domain's ``max_episode_steps``), wrapped in SB3's ``Monitor`` and a
  one-env ``DummyVecEnv``, seeded once from the agent's generator; SB3 resets it itself from then on.
- In a learning block, before each of the driver's episodes, SB3 learns until its step count reaches the agent's
  budget, which grows by ``timesteps_per_episode`` per learning episode (null: the task's ``max_episode_steps``,
  one full episode's worth): ``learn(total_timesteps=budget - num_timesteps, reset_num_timesteps=False)``. SB3
  learns in whole rollouts (PPO/A2C: ``n_steps`` steps at a time), so with ``n_steps`` larger than
  ``timesteps_per_episode`` the policy changes every few episodes, and SB3's step count may run ahead of the
  budget by less than one rollout. Then the driver's episode is played by the current policy
  (``predict(obs, deterministic=deterministic_learning)``: sampled, as SB3's own rollouts are, by default) on the
  driver's environment with the driver's seeds, and logged. SB3's own episodes are never logged: a learning
  block of E episodes logs E episodes and costs E x ``timesteps_per_episode`` environment steps more.
  So the l2logger log's learning curve is the return of the policy as it learns, measured once per budget step;
  its "episodes" count the budget, not SB3's episodes (read them from ``Monitor``/SB3's logger if you need them).
- In an evaluation block nothing is learned; every step is ``predict(obs, deterministic=deterministic)``
  (deterministic by default) on the driver's environment with the evaluation seeds.
- One SB3 model for every task whose private environment has the same observation and action spaces (all CartPole
  variants share one; FrozenLake and CartPole in an ANT syllabus get one each), built when such a task first
  comes (``algo(policy, env, seed=..., device=..., verbose=0, **algo_kwargs)``) and moved between variants with
  ``set_env`` (a new variant starts a fresh private episode). Progress-based schedules (a learning-rate function,
  DQN's ``exploration_fraction``) see each ``learn`` call as SB3 does with ``reset_num_timesteps=False``.
- ``save_dir``: after each learning block the block's model is saved as
  ``<save_dir>/run-<n>/block-<index>-<task_name>.zip`` (``PPO.load`` reads it back): the policy of the evaluation
  blocks that follow, until the next learning block of the same model. Each run of the agent takes the first free
  ``run-<n>`` at its first save: the syllabus, then each single-task expert it computes (the STE agent's config is
  the agent's, ``save_dir`` included), so a fresh ``save_dir`` holds the syllabus's models in ``run-0``.

Seeds: ``seed(rng)`` keeps the agent's generator; each model's ``seed=`` and each private environment's seed are
drawn from it in the order they are first needed. SB3 draws from the process-global generators (``random``,
``numpy.random``, ``torch``): every SB3 call runs with the agent's own saved states swapped in and the process's
put back afterwards (and on ``threads`` torch threads, 1 by default), so the same config and seed give the same
log, and nothing else in the process sees SB3's draws.
"""

from __future__ import annotations

import inspect
import random
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from owl_eval.errors import ConfigError
from owl_eval.protocols.adapters import _import, describe, require_call
from owl_eval.protocols.lifelong_rl.agents.base import AgentHooks
from owl_eval.protocols.lifelong_rl.api import BlockInfo, TaskSpec
from owl_eval.protocols.torch_support import flat
from owl_eval.typed import as_bool, as_int, as_str

INSTALL_HINT = 'pip install -e ".[sb3]"'
SEED_HIGH = 2**31 - 1
RESERVED = ("policy", "env", "seed", "device", "verbose")


def require_sb3(key: str = "agent.algo"):
    try:
        import stable_baselines3
    except ImportError:
        raise ConfigError(f"{key}: needs stable-baselines3, which is not installed here ({INSTALL_HINT})") from None
    return stable_baselines3


def algorithm_class(value: Any, key: str = "agent.algo") -> tuple[Any, dict]:
    """``agent.algo`` as (the algorithm class, the keywords its node carries)."""
    sb3 = require_sb3(key)
    from stable_baselines3.common.base_class import BaseAlgorithm

    extra: dict = {}
    if isinstance(value, Mapping):
        if "_target_" not in value:
            raise ConfigError(
                f"{key}: expected an algorithm name (PPO, A2C, DQN) or a node with _target_, got {value!r}"
            )
        extra = {k: v for k, v in value.items() if not (k.startswith("_") and k.endswith("_"))}
        value = value["_target_"]
    if isinstance(value, str):
        name = as_str(value, key)
        if "." in name:
            value = _import(name, key)
        elif hasattr(sb3, name):
            value = getattr(sb3, name)
        else:
            known = sorted(
                n for n in dir(sb3) if inspect.isclass(getattr(sb3, n)) and issubclass(getattr(sb3, n), BaseAlgorithm)
            )
            raise ConfigError(
                f"{key}: stable_baselines3 has no algorithm {name!r}; known: {', '.join(known)} (or a dotted path, "
                "e.g. sb3_contrib.QRDQN)"
            )
    if not (inspect.isclass(value) and issubclass(value, BaseAlgorithm)):
        raise ConfigError(
            f"{key} ({describe(value)}) is not a Stable-Baselines3 algorithm (a subclass of "
            "stable_baselines3.common.base_class.BaseAlgorithm, e.g. stable_baselines3.PPO)"
        )
    return value, extra


class _GlobalStream:
    """The agent's states of the process-global generators SB3 draws from (``random``, ``numpy.random``,
    ``torch``), swapped in by ``active()`` and out again afterwards, with torch on ``threads`` threads."""

    def __init__(self, seed: int, threads: int | None):
        import torch

        self.torch, self.threads = torch, threads
        with self._kept():
            random.seed(seed)
            np.random.seed(seed)
            torch.manual_seed(seed)
            self.state = self._get()

    def _get(self):
        return random.getstate(), np.random.get_state(), self.torch.get_rng_state()

    def _set(self, state) -> None:
        random.setstate(state[0])
        np.random.set_state(state[1])
        self.torch.set_rng_state(state[2])

    @contextmanager
    def _kept(self) -> Iterator[None]:
        before, threads = self._get(), self.torch.get_num_threads()
        try:
            yield
        finally:
            self._set(before)
            if self.torch.get_num_threads() != threads:
                self.torch.set_num_threads(threads)

    @contextmanager
    def active(self, draws: bool = True) -> Iterator[None]:
        """The agent's generator states and thread count in force; ``draws=False`` (a deterministic ``predict``,
        which draws nothing) only sets the thread count, saving two state copies per step."""
        if not draws:
            threads = self.torch.get_num_threads()
            if self.threads is not None and self.threads != threads:
                self.torch.set_num_threads(self.threads)
            try:
                yield
            finally:
                if self.torch.get_num_threads() != threads:
                    self.torch.set_num_threads(threads)
            return
        with self._kept():
            self._set(self.state)
            if self.threads is not None:
                self.torch.set_num_threads(self.threads)
            try:
                yield
            finally:
                self.state = self._get()


class Sb3Agent(AgentHooks):
    def __init__(
        self,
        algo: Any = "PPO",
        policy: Any = "MlpPolicy",
        algo_kwargs: Mapping[str, Any] | None = None,
        timesteps_per_episode: int | None = None,
        deterministic: bool = True,
        deterministic_learning: bool = False,
        device: str = "cpu",
        threads: int | None = 1,
        save_dir: str | None = None,
    ):
        self.algo_class, node_kwargs = algorithm_class(algo, "agent.algo")
        self.algo = algo
        if algo_kwargs is not None and not isinstance(algo_kwargs, Mapping):
            raise ConfigError(f"agent.algo_kwargs: expected a mapping of the algorithm's keywords, got {algo_kwargs!r}")
        self.algo_kwargs = dict(algo_kwargs or {})
        kwargs = {**node_kwargs, **self.algo_kwargs}
        clash = sorted(set(kwargs) & set(RESERVED))
        if clash:
            raise ConfigError(
                f"agent.algo_kwargs: {clash} are set by the agent (policy: agent.policy, seed: drawn from the run's "
                "seed, device: agent.device, env: the block's environment)"
            )
        self.kwargs = self._built(kwargs)
        name = self.algo_class.__name__
        require_call(self.algo_class, "agent.algo", f"{name}(policy, env, **agent.algo_kwargs)", 2, self.kwargs)
        self.policy = policy
        self.policy_class = self._policy(policy)  # an alias name (MlpPolicy) or a policy class
        self.timesteps_per_episode = (
            None
            if timesteps_per_episode is None
            else as_int(timesteps_per_episode, "agent.timesteps_per_episode", minimum=1)
        )
        self.deterministic = as_bool(deterministic, "agent.deterministic")
        self.deterministic_learning = as_bool(deterministic_learning, "agent.deterministic_learning")
        self.device = as_str(str(device), "agent.device")
        self.threads = None if threads is None else as_int(threads, "agent.threads", minimum=1)
        self.save_dir = None if save_dir is None else as_str(str(save_dir), "agent.save_dir")
        self.rng: np.random.Generator | None = None
        self.model: Any = None

    @staticmethod
    def _built(kwargs: dict) -> dict:
        """Nested nodes with _target_ (``policy_kwargs: {activation_fn: {_target_: hydra.utils.get_class, ...}}``)
        built: the agent config is not built recursively."""
        from hydra.errors import InstantiationException
        from hydra.utils import instantiate

        try:
            return instantiate(kwargs, _convert_="all") if kwargs else {}
        except InstantiationException as exc:
            raise ConfigError(f"agent.algo_kwargs: cannot build a nested node ({flat(exc.__cause__ or exc)})") from None

    def _policy(self, policy: Any) -> Any:
        from stable_baselines3.common.policies import BasePolicy

        aliases = sorted(getattr(self.algo_class, "policy_aliases", {}))
        if isinstance(policy, str) and policy in aliases:
            return policy
        if isinstance(policy, str) and "." in policy:
            policy = _import(policy, "agent.policy")
        if inspect.isclass(policy) and issubclass(policy, BasePolicy):
            return policy
        raise ConfigError(
            f"agent.policy: expected one of {self.algo_class.__name__}'s policies {aliases} or a "
            f"stable_baselines3 policy class (a dotted path), got {policy!r}"
        )

    # -- the run -------------------------------------------------------------------------------------------
    def seed(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.stream = _GlobalStream(int(rng.integers(SEED_HIGH)), self.threads)
        self.envs: dict[tuple[str, str], Any] = {}
        self.models: list[tuple[Any, Any, Any]] = []  # (observation space, action space, model)
        self.budget: dict[int, int] = {}  # id(model) -> the steps it may have learned by now
        self.model = None
        self.run_folder: Path | None = None

    def _env(self, spec: TaskSpec):
        """The private copy of the (task, variant)'s environment, built once and seeded from the agent's generator."""
        key = (spec.task, spec.variant)
        if key not in self.envs:
            from gymnasium.wrappers import TimeLimit
            from stable_baselines3.common.monitor import Monitor
            from stable_baselines3.common.vec_env import DummyVecEnv

            from owl_eval.protocols.lifelong_rl.domains import FAMILIES

            family = FAMILIES.get(spec.family)
            if family is None:
                raise ConfigError(
                    f"agent (Stable-Baselines3): task {spec.task_name} is of family {spec.family!r}, which the agent "
                    f"cannot copy for SB3 to learn on; families: {sorted(FAMILIES)}"
                )
            env = family.make(spec.params)
            if spec.max_episode_steps is not None:
                env = TimeLimit(env, max_episode_steps=spec.max_episode_steps)
            vec = DummyVecEnv([lambda env=env: Monitor(env)])
            vec.seed(int(self._rng().integers(SEED_HIGH)))
            self.envs[key] = vec
        return self.envs[key]

    def _rng(self) -> np.random.Generator:
        if self.rng is None:
            raise RuntimeError("Sb3Agent used before seed(rng)")
        return self.rng

    def start_task(self, spec: TaskSpec) -> None:
        super().start_task(spec)
        env = self._env(spec)
        for obs_space, act_space, model in self.models:
            if obs_space == env.observation_space and act_space == env.action_space:
                with self.stream.active():
                    model.set_env(env)
                self.model = model
                return
        seed = int(self._rng().integers(SEED_HIGH))
        with self.stream.active():
            try:
                model = self.algo_class(self.policy_class, env, seed=seed, device=self.device, verbose=0, **self.kwargs)
            except (AssertionError, ValueError, TypeError, KeyError) as exc:
                raise ConfigError(
                    f"agent.algo ({self.algo_class.__name__}) cannot learn task {spec.task_name} "
                    f"(observations {env.observation_space}, actions {env.action_space}): {flat(exc)}"
                ) from None
        if self.kwargs.get("tensorboard_log") is None:
            # SB3 makes an empty tempdir/SB3-<time> folder per model for a logger that writes nothing (verbose=0)
            from stable_baselines3.common.logger import Logger

            model.set_logger(Logger(folder=None, output_formats=[]))
        self.models.append((env.observation_space, env.action_space, model))
        self.budget[id(model)] = 0
        self.model = model

    def start_block(self, block: BlockInfo) -> None:
        self.block = block

    def _steps(self) -> int:
        if self.timesteps_per_episode is not None:
            return self.timesteps_per_episode
        if self.spec is None or self.spec.max_episode_steps is None:
            raise ConfigError(
                "agent.timesteps_per_episode: null takes the task's max_episode_steps, which this domain does not "
                "give; set a number"
            )
        return int(self.spec.max_episode_steps)

    def start_episode(self) -> None:
        """In a learning block: SB3 learns on its private environment up to the grown budget (see the module)."""
        if not (self.learning and self.block.learning):
            return
        key = id(self.model)
        self.budget[key] += self._steps()
        todo = self.budget[key] - int(self.model.num_timesteps)
        if todo > 0:
            with self.stream.active():
                self.model.learn(total_timesteps=todo, reset_num_timesteps=False, progress_bar=False)

    def act(self, observation) -> int:
        deterministic = self.deterministic_learning if self.learning and self.block.learning else self.deterministic
        with self.stream.active(draws=not deterministic):
            action, _ = self.model.predict(np.asarray(observation), deterministic=deterministic)
        return int(np.asarray(action).reshape(-1)[0])

    def end_block(self, block: BlockInfo) -> None:
        if self.save_dir is not None and block.learning:
            self.model.save(self._run_folder() / f"block-{block.index:03d}-{block.spec.task_name}.zip")

    def _run_folder(self) -> Path:
        """This run's folder under ``save_dir``: the first free ``run-<n>``, taken at the run's first save."""
        if self.run_folder is None:
            root = Path(str(self.save_dir))
            root.mkdir(parents=True, exist_ok=True)
            n = 0
            while True:
                try:
                    (root / f"run-{n}").mkdir()
                    break
                except FileExistsError:
                    n += 1
            self.run_folder = root / f"run-{n}"
        return self.run_folder

    def observe(self, observation, action, reward, next_observation, terminated, truncated) -> None:
        """Nothing: SB3 learns from its own rollouts on the private environment (see the module)."""
