"""agent=lifelong_rl/tella: the adapter's checks and what it hands a tella agent (the command line end to end is
tests/runner/test_tella_end_to_end.py)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gymnasium")

from hydra.utils import instantiate  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

from owl_eval.errors import ConfigError  # noqa: E402
from owl_eval.protocols.base import AgentOutputError  # noqa: E402
from owl_eval.protocols.lifelong_rl.agents.tella import TellaAgent, Transition  # noqa: E402
from owl_eval.protocols.lifelong_rl.driver import RLSyllabusDriver  # noqa: E402

PROJECT_ROOT = Path(__file__).resolve().parents[2]
CONF = PROJECT_ROOT / "owl_eval" / "protocols" / "lifelong_rl" / "conf" / "domain"
HERE = "tests.agents.test_tella_adapter"


def domain(name):
    return instantiate(OmegaConf.load(CONF / f"{name}.yaml"), _convert_="all")


def protocol(tmp_path, task_variants, train=3, test=1):
    syllabus = {
        "kind": "custom",
        "generate": {"task_variants": task_variants, "cycles": 1, "train_episodes": train, "test_episodes": test},
    }
    return RLSyllabusDriver(syllabus=syllabus, log_dir=str(tmp_path / "l2log"), ste={"missing": "skip"})


class Spy:
    """A tella agent (the constructor and the eight methods) that keeps what it is given."""

    def __init__(self, rng_seed, observation_space, action_space, num_envs, config_file=None, push=0.0):
        self.args = (rng_seed, observation_space, action_space, num_envs, config_file)
        self.action_space, self.push = action_space, push
        self.observations, self.transitions = [], []

    def block_start(self, is_learning_allowed): ...
    def task_start(self, task_name): ...
    def task_variant_start(self, task_name, variant_name): ...
    def task_variant_end(self, task_name, variant_name): ...
    def task_end(self, task_name): ...
    def block_end(self, is_learning_allowed): ...

    def choose_actions(self, observations):
        self.observations += observations
        theta, omega = observations[0][2], observations[0][3]
        return [int(theta + self.push * omega > 0)]  # push on the pole angle: deterministic, falls in 20-70 steps

    def receive_transitions(self, transitions):
        self.transitions += transitions


def test_cartpole_spaces_observations_and_transitions_as_tella_gives_them(tmp_path):
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv

    agent = TellaAgent({"_target_": f"{HERE}.Spy", "push": 0.0}, config_file="agent.yml")
    p = protocol(tmp_path, ["cartpole/default", "cartpole/long_pole"], train=2, test=1)
    p.check(domain=domain("cartpole"), agent=agent)  # one space pair across the variants: accepted
    record = p.run(domain=domain("cartpole"), agent=agent, rng=np.random.default_rng(7), progress=False)
    spy = agent.agent
    seed, observation_space, action_space, num_envs, config_file = spy.args
    assert seed == np.random.default_rng(7).spawn(2)[1].bit_generator.random_raw()
    assert (observation_space, action_space, num_envs, config_file) == (
        CartPoleEnv().observation_space,
        CartPoleEnv().action_space,
        1,
        "agent.yml",
    )
    assert all(o.dtype == np.float32 and o.shape == (4,) for o in spy.observations)
    assert len(spy.transitions) == len(spy.observations) == int(record.log["episode_step_count"].sum())
    assert all(isinstance(t, Transition) and t._fields == ("observation", "action", "reward", "done",
                                                           "next_observation") for t in spy.transitions)  # fmt: skip
    # episodes end with done (terminated or the 200-step limit); training rewards 1.0, evaluation rewards None
    assert sum(t.done for t in spy.transitions) == len(record.log)
    kinds = np.repeat(record.log["block_type"], record.log["episode_step_count"].astype(int))
    assert [t.reward for t, k in zip(spy.transitions, kinds) if k == "test"] == [None] * int(np.sum(kinds == "test"))
    assert {t.reward for t, k in zip(spy.transitions, kinds) if k == "train"} == {1.0}
    # the next observation of one step is the observation of the next one within an episode
    t0, t1 = spy.transitions[0], spy.transitions[1]
    np.testing.assert_array_equal(t0.next_observation, t1.observation)
    # the rule's evaluation returns (short of the 200-step limit) equal direct gymnasium rollouts, evaluation seeds
    assert record.log["reward"].max() < 200
    for variant, ret in zip(["default", "long_pole"], record.log["reward"][record.log["block_type"] == "test"][:2]):
        env = CartPoleEnv()
        if variant == "long_pole":
            env.length, env.polemass_length = 2.0, env.masspole * 2.0
        obs, _ = env.reset(seed=1_000_000)
        total = 0.0
        for _ in range(200):
            obs, reward, terminated, _, _ = env.step(int(obs[2] > 0))
            total += reward
            if terminated:
                break
        assert ret == total


def test_a_syllabus_with_other_spaces_is_refused_before_any_run(tmp_path):
    from owl_eval.protocols.lifelong_rl.domains import RLDomain

    both = RLDomain(
        "mixed",
        {
            "cartpole": {"family": "cartpole", "max_episode_steps": 50},
            "frozenlake": {"family": "frozenlake", "max_episode_steps": 50},
        },
    )
    agent = TellaAgent({"_target_": f"{HERE}.Spy"})
    with pytest.raises(ConfigError, match=r"tella builds the agent once, with the spaces of the first task variant "
                                          r"\(cartpole_default: observation Box.*block 1 \(frozenlake_default\) has "
                                          r"observation Discrete\(16\)"):  # fmt: skip
        protocol(tmp_path, ["cartpole/default", "frozenlake/default"], test=0).check(domain=both, agent=agent)
    assert not (tmp_path / "l2log").exists()


class NoChoose:
    def __init__(self, rng_seed, observation_space, action_space, num_envs, config_file=None): ...
    def receive_transitions(self, transitions): ...


class NoEvents(NoChoose):
    def choose_actions(self, observations): ...


class TwoArgs(Spy):
    def __init__(self, rng_seed, observation_space):  # not tella's constructor
        pass


class OldChoose(Spy):
    def choose_actions(self):
        return []


@pytest.mark.parametrize(
    "node, message",
    [
        (
            {"_target_": f"{HERE}.NoChoose"},
            f"agent.agent: {HERE}.NoChoose has no method choose_actions(observations) (tella's ContinualRLAgent "
            "interface; subclassing tella.ContinualRLAgent gives the block/task methods)",
        ),
        (
            {"_target_": f"{HERE}.NoEvents"},
            f"agent.agent: {HERE}.NoEvents has no method block_start(is_learning_allowed)",
        ),
        (
            {"_target_": f"{HERE}.TwoArgs"},
            f"agent.agent: {HERE}.TwoArgs(rng_seed, observation_space) cannot be called as tella calls it, "
            f"{HERE}.TwoArgs(rng_seed, observation_space, action_space, num_envs, config_file)",
        ),
        ({"_target_": f"{HERE}.Spy", "colour": 3}, "plus ['colour']"),
        (
            {"_target_": f"{HERE}.OldChoose"},
            f"agent.agent: {HERE}.OldChoose.choose_actions(self) cannot be called as tella calls it, "
            "choose_actions(observations)",
        ),
        ({"_target_": "nowhere.Agent"}, "agent.agent._target_: cannot import 'nowhere.Agent'"),
        ("my.Agent", "agent.agent: expected the config of your tella agent, {_target_: your.module.Agent}"),
    ],
)
def test_a_bad_tella_agent_is_one_error_naming_what_is_missing(node, message):
    with pytest.raises(ConfigError) as err:
        TellaAgent(node)
    assert str(err.value).startswith(message) or message in str(err.value), str(err.value)
    assert "\n" not in str(err.value)


def factory(rng_seed, observation_space, action_space, num_envs, config_file):
    """tella's AgentFactory may be a function: its agent's methods are checked once it is built."""
    return NoEvents(rng_seed, observation_space, action_space, num_envs, config_file)


def test_a_factory_is_built_then_checked(tmp_path):
    agent = TellaAgent({"_target_": f"{HERE}.factory"})
    with pytest.raises(ConfigError, match=r"factory has no method block_start\(is_learning_allowed\)"):
        protocol(tmp_path, ["frozenlake/plain"]).run(
            domain=domain("frozenlake"), agent=agent, rng=np.random.default_rng(0), progress=False
        )


class Scalar(Spy):
    def choose_actions(self, observations):
        return 1


def test_choose_actions_must_return_a_list_of_one_action(tmp_path):
    agent = TellaAgent({"_target_": f"{HERE}.Scalar"})
    with pytest.raises(AgentOutputError, match=r"choose_actions\(\[observation\]\) returned 1, expected a list of one"):
        protocol(tmp_path, ["cartpole/default"]).run(
            domain=domain("cartpole"), agent=agent, rng=np.random.default_rng(0), progress=False
        )


def test_the_runner_names_a_bad_tella_agent_before_any_run():
    from tests.inprocess import run_module

    proc = run_module(
        "owl_eval",
        [
            "+experiment=lifelong_rl_frozenlake_syllabus",
            "agent=lifelong_rl/tella",
            f"agent.agent._target_={HERE}.NoChoose",
            "tracking.uri=sqlite:///:memory:",
            "progress=false",
        ],
        cwd=os.fspath(PROJECT_ROOT),
        timeout=120,
    )
    assert proc.returncode != 0
    assert (
        proc.stderr.strip()
        .splitlines()[-1]
        .startswith(f"error: agent.agent: {HERE}.NoChoose has no method choose_actions(observations)")
    )
