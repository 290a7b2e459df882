"""RL agents: the interface, hand-checked encoders and updates, learning, drop and recovery."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("gymnasium")

from owl_eval.protocols.lifelong_rl.agents import (  # noqa: E402
    BlockInfo,
    LinearQAgent,
    QLearningAgent,
    RandomAgent,
    RLAgent,
    TaskSpec,
)
from owl_eval.protocols.lifelong_rl.agents.linear_q import TileCoder  # noqa: E402
from owl_eval.protocols.lifelong_rl.agents.q_learning import Discretiser  # noqa: E402
from owl_eval.protocols.lifelong_rl.domains import RLDomain  # noqa: E402

MAP = ["SFFF", "FHFH", "FFFH", "HFFG"]


@pytest.fixture(scope="module")
def lake():
    return RLDomain(
        "frozenlake",
        {
            "frozenlake": {
                "max_episode_steps": 100,
                "params": {"map": MAP},
                "variants": {"plain": {}, "mirrored": {"map": [r[::-1] for r in MAP]}},
            }
        },
    )


@pytest.fixture(scope="module")
def cart():
    return RLDomain(
        "cartpole",
        {"cartpole": {"max_episode_steps": 200, "variants": {"default": {}, "reversed_force": {"force_mag": -10.0}}}},
    )


def play(agent, domain, task, variant, episodes, *, learn, seed0):
    """A plain loop (independent of the protocol): returns (returns, steps) per episode."""
    env = domain.make(task, variant)
    agent.start_task(env.spec)
    agent.set_learning(learn)
    agent.start_block(BlockInfo(0, "train" if learn else "test", env.spec, episodes))
    rets, lens = [], []
    for e in range(episodes):
        obs, ret, n = env.reset(seed0 + e), 0.0, 0
        while True:
            a = agent.act(obs)
            nxt, r, term, trunc = env.step(a)
            if learn:
                agent.observe(obs, a, r, nxt, term, trunc)
            obs, ret, n = nxt, ret + r, n + 1
            if term or trunc:
                break
        rets.append(ret)
        lens.append(n)
    return np.array(rets), np.array(lens)


def test_agents_satisfy_the_interface():
    for agent in (RandomAgent(), QLearningAgent(), LinearQAgent()):
        assert isinstance(agent, RLAgent)


def test_discretiser_cells_by_hand():
    d = Discretiser([2, 3], [0.0, -1.0], [1.0, 2.0])
    # dim 0: 0.7 -> int(0.7 * 2) = 1; dim 1: 0.5 -> int((0.5 + 1) * 3 / 3) = 1; flat = 1 * 3 + 1 = 4
    assert d(np.array([0.7, 0.5])) == 4
    assert d(np.array([-5.0, 9.0])) == 0 * 3 + 2  # outside the bounds: edge cells
    assert d.size == 6


def test_tile_coder_features_by_hand():
    c = TileCoder([2], 2, [0.0], [1.0])
    # offsets (k * 1 / 2) % 1 = 0, 0.5; grid 3 cells per tiling; x = 0.3 -> 0.6: cell 0 and int(1.1) = 1 + 3
    assert c(np.array([0.3])).tolist() == [0, 4]
    assert c(np.array([0.99])).tolist() == [1, 3 + 2]


def test_q_learning_update_by_hand():
    spec = TaskSpec("frozenlake", "plain", "frozenlake", num_actions=4, num_observations=16)
    agent = QLearningAgent(alpha=0.5, gamma=0.9)
    agent.seed(np.random.default_rng(0))
    agent.start_task(spec)
    agent.start_block(BlockInfo(0, "train", spec, 1))
    agent.q[5] = [0.0, 2.0, 1.0, 0.0]
    agent.observe(4, 1, 1.0, 5, False, False)  # Q[4,1] = 0 + 0.5 * (1 + 0.9 * 2 - 0) = 1.4
    agent.observe(14, 2, 1.0, 15, True, False)  # terminal: 0.5 * (1 - 0) = 0.5
    assert agent.q[4, 1] == pytest.approx(1.4) and agent.q[14, 2] == pytest.approx(0.5)


def test_random_agent_is_uniform_and_seeded():
    spec = TaskSpec("t", "v", "cartpole", num_actions=3, observation_shape=(4,))
    draws = []
    for _ in range(2):
        a = RandomAgent()
        a.seed(np.random.default_rng(5))
        a.start_task(spec)
        draws.append([a.act(None) for _ in range(3000)])
    assert draws[0] == draws[1]
    counts = np.bincount(draws[0], minlength=3) / 3000
    assert np.all(np.abs(counts - 1 / 3) < 0.04)  # sd of a frequency is ~0.0086


def test_q_learning_learns_deterministic_frozenlake(lake):
    agent = QLearningAgent()
    agent.seed(np.random.default_rng(1))
    before, _ = play(agent, lake, "frozenlake", "plain", 20, learn=False, seed0=10_000)
    train, _ = play(agent, lake, "frozenlake", "plain", 400, learn=True, seed0=0)
    after, steps = play(agent, lake, "frozenlake", "plain", 20, learn=False, seed0=10_000)
    assert before.mean() < 0.2  # an untrained greedy table breaks ties at random: it rarely gets there
    assert train[:100].mean() < train[-100:].mean()  # rising learning curve
    assert after.mean() == 1.0
    assert np.all(steps == 6)  # the shortest path on the 4x4 map: down, down, right, right, down, right


def drop_and_recovery(curve_before, curve_after, k=10):
    """(terminal level before the change, level of the first k episodes after it, level of the last k)."""
    return curve_before[-k:].mean(), curve_after[:k].mean(), curve_after[-k:].mean()


def test_q_learning_drops_and_recovers_when_the_map_changes(lake):
    agent = QLearningAgent()
    agent.seed(np.random.default_rng(2))
    plain, _ = play(agent, lake, "frozenlake", "plain", 400, learn=True, seed0=0)
    mirrored, _ = play(agent, lake, "frozenlake", "mirrored", 400, learn=True, seed0=1000)
    before, first, last = drop_and_recovery(plain, mirrored, k=25)
    assert before > 0.8 and first < 0.2 and last > 0.8


@pytest.mark.slow
def test_linear_q_learns_cartpole_then_drops_and_recovers_when_the_force_reverses(cart):
    agent = LinearQAgent()
    agent.seed(np.random.default_rng(0))
    default, _ = play(agent, cart, "cartpole", "default", 80, learn=True, seed0=0)
    greedy, _ = play(agent, cart, "cartpole", "default", 5, learn=False, seed0=10_000)
    # a random policy balances ~22 steps on average (Barto et al. 1983 setting); a learned one the full 200
    assert default[:10].mean() < 40 and default[-10:].mean() > 150 and greedy.mean() > 150
    reversed_greedy, _ = play(agent, cart, "cartpole", "reversed_force", 5, learn=False, seed0=10_000)
    reversed_train, _ = play(agent, cart, "cartpole", "reversed_force", 80, learn=True, seed0=100)
    assert reversed_greedy.mean() < 30  # the default policy pushes the wrong way: a sharp drop
    assert reversed_train[-10:].mean() > 150  # and it recovers
