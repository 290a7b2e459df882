"""RL environments: variants really change the dynamics; clear errors; the install hint without gymnasium."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

pytest.importorskip("gymnasium")

from owl_eval.errors import ConfigError  # noqa: E402
from owl_eval.protocols.lifelong_rl.domains import INSTALL_HINT, RLDomain  # noqa: E402

MAP = ["SFFF", "FHFH", "FFFH", "HFFG"]


@pytest.fixture(scope="module")
def cartpole():
    return RLDomain(
        "cartpole",
        {
            "cartpole": {
                "variants": {
                    "default": {},
                    "long_pole": {"length": 2.0},
                    "heavy_pole": {"masspole": 0.5},
                    "moon": {"gravity": 1.6},
                    "reversed_force": {"force_mag": -10.0},
                }
            }
        },
    )


@pytest.fixture(scope="module")
def frozenlake():
    return RLDomain(
        "frozenlake",
        {
            "frozenlake": {
                "params": {"map": MAP},
                "variants": {
                    "plain": {},
                    "mirrored": {"map": [r[::-1] for r in MAP]},
                    "slippery": {"is_slippery": True, "success_rate": 0.8},
                },
            }
        },
    )


def hand_cartpole(state, actions, *, gravity=9.8, masscart=1.0, masspole=0.1, length=0.5, force_mag=10.0, tau=0.02):
    """Barto-Sutton-Anderson cart-pole, explicit Euler (Florian 2007, eqs. 23-24 with friction 0), written
    out independently of gymnasium."""
    x, x_dot, th, th_dot = state
    out = []
    for a in actions:
        f = force_mag if a == 1 else -force_mag
        total = masscart + masspole
        tmp = (f + masspole * length * th_dot**2 * math.sin(th)) / total
        th_acc = (gravity * math.sin(th) - math.cos(th) * tmp) / (
            length * (4 / 3 - masspole * math.cos(th) ** 2 / total)
        )
        x_acc = tmp - masspole * length * th_acc * math.cos(th) / total
        x, x_dot, th, th_dot = x + tau * x_dot, x_dot + tau * x_acc, th + tau * th_dot, th_dot + tau * th_acc
        out.append((x, x_dot, th, th_dot))
    return np.array(out)


def rollout(domain, task, variant, actions, seed=3):
    env = domain.make(task, variant)
    start = env.reset(seed)
    states = [env.step(a)[0] for a in actions]
    return start, np.array(states)


ACTIONS = [1, 1, 0, 1, 0, 0, 1, 0]


@pytest.mark.parametrize(
    "variant, physics",
    [
        ("default", {}),
        ("long_pole", {"length": 2.0}),
        ("heavy_pole", {"masspole": 0.5}),
        ("moon", {"gravity": 1.6}),
        ("reversed_force", {"force_mag": -10.0}),
    ],
)
def test_cartpole_variant_matches_hand_dynamics(cartpole, variant, physics):
    start, states = rollout(cartpole, "cartpole", variant, ACTIONS)
    expected = hand_cartpole(start, ACTIONS, **physics)
    # gymnasium returns float32 observations
    np.testing.assert_allclose(states, expected, rtol=1e-5, atol=1e-6)


def test_longer_pole_changes_the_trajectory_under_the_same_actions(cartpole):
    s0, default = rollout(cartpole, "cartpole", "default", ACTIONS)
    s1, long_pole = rollout(cartpole, "cartpole", "long_pole", ACTIONS)
    np.testing.assert_array_equal(s0, s1)  # same reset seed, same start
    # a 4x longer pole tips more slowly: smaller |theta_dot| after the same pushes
    assert np.abs(long_pole[-1, 3]) < np.abs(default[-1, 3])
    assert not np.allclose(default, long_pole)


def test_reversed_force_pushes_the_other_way(cartpole):
    _, default = rollout(cartpole, "cartpole", "default", [1])
    _, reversed_ = rollout(cartpole, "cartpole", "reversed_force", [1])
    assert default[0, 1] > 0 > reversed_[0, 1]  # x_dot after one push "right"


def test_cartpole_episode_is_truncated_at_the_step_limit():
    domain = RLDomain("c", {"cartpole": {"max_episode_steps": 5, "variants": {"default": {"gravity": 0.0}}}})
    env = domain.make("cartpole", "default")
    env.reset(0)
    flags = [env.step(i % 2)[2:] for i in range(5)]
    assert flags == [(False, False)] * 4 + [(False, True)]


def test_frozenlake_map_variant_moves_the_start_and_goal(frozenlake):
    # actions: 0 left, 1 down, 2 right, 3 up. Plain map: start 0, the path down,down,right,right,down,right
    # reaches the goal (15); on the mirrored map the start is 3 and the mirrored path reaches 12.
    path = [1, 1, 2, 2, 1, 2]
    for variant, mirrored, start, goal in (
        ("plain", path, 0, 15),
        ("mirrored", [{0: 2, 2: 0}.get(a, a) for a in path], 3, 12),
    ):
        env = frozenlake.make("frozenlake", variant)
        assert env.reset(0) == start
        results = [env.step(a) for a in mirrored]
        assert results[-1][0] == goal and results[-1][1] == 1.0 and results[-1][2]
        assert sum(r[1] for r in results) == 1.0


def test_slippery_variant_follows_the_intended_move_at_its_success_rate(frozenlake):
    plain, slippery = frozenlake.make("frozenlake", "plain"), frozenlake.make("frozenlake", "slippery")
    n = 400
    right = []
    for seed in range(n):
        plain.reset(seed)
        assert plain.step(2)[0] == 1
        slippery.reset(seed)
        right.append(slippery.step(2)[0] == 1)
    # success_rate 0.8: binomial(400, 0.8) has sd 8; 0.8 +- 4 sd
    assert abs(np.mean(right) - 0.8) < 4 * math.sqrt(0.8 * 0.2 / n)


def test_spec_describes_the_spaces(cartpole, frozenlake):
    c = cartpole.spec("cartpole", "long_pole")
    assert (c.num_actions, c.observation_shape, c.discrete, c.task_name) == (2, (4,), False, "cartpole_long_pole")
    f = frozenlake.spec("frozenlake", "mirrored")
    assert (f.num_actions, f.num_observations, f.discrete) == (4, 16, True)


@pytest.mark.parametrize(
    "tasks, message",
    [
        ({"cartpole": {"variants": {"bad": {"pole_length": 1.0}}}}, "unknown parameter(s) ['pole_length']"),
        ({"cart_pole": {"family": "cartpole"}}, "no '_'"),
        ({"pong": {}}, "unknown family 'pong'"),
        (
            {"frozenlake": {"variants": {"x": {"map": ["SF", "FGG"]}}}},
            "domain.tasks.frozenlake.variants.x.map: frozenlake map ['SF', 'FGG']: expected equal-length rows",
        ),
        (
            {"frozenlake": {"variants": {"x": {"is_slippery": "false"}}}},
            "domain.tasks.frozenlake.variants.x.is_slippery: expected true or false, got 'false'",
        ),
        ({"frozenlake": {"variants": {"x": {"success_rate": 1.5}}}}, "domain.tasks.frozenlake.variants.x.success_rate"),
        (
            {"cartpole": {"variants": {"x": {"length": "long"}}}},
            "domain.tasks.cartpole.variants.x.length: expected a number",
        ),
        (
            {"cartpole": {"variants": {"x": {"length": 0.0}}}},
            "domain.tasks.cartpole.variants.x.length: expected a number > 0",
        ),
        ({"cartpole": {"max_episode_steps": 2.5}}, "domain.tasks.cartpole.max_episode_steps: expected an integer"),
        ({"cartpole": {"variants": ["a", "b"]}}, "domain.tasks.cartpole.variants: expected a mapping"),
    ],
)
def test_bad_domain_config_is_named(tasks, message):
    """Every variant's parameters are checked when the domain is built (before any run), not when the
    environment is made mid-run."""
    with pytest.raises(ConfigError) as err:
        RLDomain("d", tasks)
    assert message in str(err.value)


def test_missing_gymnasium_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "gymnasium", None)  # import gymnasium -> ImportError
    with pytest.raises(ImportError) as err:
        RLDomain("cartpole", {"cartpole": {}})
    assert str(err.value) == INSTALL_HINT and 'pip install -e ".[rl]"' in str(err.value)


def test_missing_gymnasium_fails_the_cli_build_with_one_line(monkeypatch, tmp_path):
    from omegaconf import OmegaConf

    from owl_eval.runner.config.build import build_part

    monkeypatch.setitem(sys.modules, "gymnasium", None)
    cfg = OmegaConf.create(
        {
            "domain": {
                "_target_": "owl_eval.protocols.lifelong_rl.domains.RLDomain",
                "name": "cartpole",
                "tasks": {"cartpole": {}},
            }
        }
    )
    with pytest.raises(ValueError) as err:
        build_part(cfg, "domain")
    text = str(err.value)
    assert "\n" not in text and 'pip install -e ".[rl]"' in text
