"""Crowd simulator: determinism, shapes and masks, plausibility (toward goals, no NaN, repulsion)."""

from __future__ import annotations

import numpy as np

from owl_eval.protocols.trajectory.domains.crowd_sim import CrowdSimDomain


def test_same_seed_same_scenes_other_seed_differs():
    dom = CrowdSimDomain(num_train_scenes=5, num_test_scenes=4)
    a, b = dom.load(np.random.default_rng(3)), dom.load(np.random.default_rng(3))
    np.testing.assert_array_equal(a.test.history, b.test.history)
    np.testing.assert_array_equal(a.train.future, b.train.future)
    c = dom.load(np.random.default_rng(4))
    assert not np.allclose(np.nan_to_num(c.test.history), np.nan_to_num(a.test.history))


def test_shapes_padding_and_no_nan_for_real_agents():
    dom = CrowdSimDomain(num_train_scenes=3, num_test_scenes=50, min_agents=2, max_agents=6, obs_len=5, pred_len=7)
    test = dom.load(np.random.default_rng(0)).test
    assert test.history.shape == (50, 6, 5, 2) and test.future.shape == (50, 6, 7, 2)
    counts = test.agent_mask.sum(1)
    assert counts.min() >= 2 and counts.max() <= 6
    # real agents are the first `count` slots, fully observed; padding agents are NaN everywhere
    for s in range(50):
        n = counts[s]
        assert np.isfinite(test.history[s, :n]).all() and np.isfinite(test.future[s, :n]).all()
        assert np.isnan(test.history[s, n:]).all() and np.isnan(test.future[s, n:]).all()


def test_single_agent_walks_to_its_goal_at_preferred_speed():
    # one agent, no noise: it must move straight at its preferred speed toward the goal
    dom = CrowdSimDomain(
        min_agents=1,
        max_agents=1,
        noise_std=0.0,
        speed_std=0.0,
        speed_mean=1.0,
        area=100.0,
        goal_radius=0.01,
        substeps=4,
        tau=0.5,
    )
    rng = np.random.default_rng(1)
    pos = np.array([[[10.0, 10.0]]])
    goal = np.array([[[40.0, 50.0]]])  # distance 50, direction (0.6, 0.8)
    vel = np.array([[[0.6, 0.8]]])  # already at the preferred speed toward the goal
    p, v, g = dom._step(pos, vel, goal, np.array([[1.0]]), np.array([[True]]), rng)
    # drive = (v0 e - v) / tau = 0, so after dt = 0.4 s it moved 0.4 m along (0.6, 0.8)
    np.testing.assert_allclose(p[0, 0], [10.24, 10.32], atol=1e-12)
    np.testing.assert_allclose(v[0, 0], [0.6, 0.8], atol=1e-12)


def test_agents_get_closer_to_goals_and_repel_each_other():
    dom = CrowdSimDomain(noise_std=0.0)
    rng = np.random.default_rng(2)
    # two agents facing each other 1 m apart, both standing, goals far away on their own side
    pos = np.array([[[0.0, 0.0], [1.0, 0.0]]])
    goal = np.array([[[-5.0, 0.0], [6.0, 0.0]]])
    p, _, _ = dom._step(pos, np.zeros_like(pos), goal, np.array([[1.3, 1.3]]), np.array([[True, True]]), rng)
    assert p[0, 0, 0] < 0.0 and p[0, 1, 0] > 1.0  # both moved away from each other and toward their goals
    # on whole scenes: the mean distance to the goal shrinks over one step for most agents
    scenes = dom.simulate(20, np.random.default_rng(5))
    track = np.concatenate([scenes.history, scenes.future], axis=2)
    speed = np.linalg.norm(np.diff(track, axis=2), axis=-1) / dom.dt
    real = np.isfinite(speed)
    assert 0.8 < np.mean(speed[real]) < 1.6  # pedestrians walk near their preferred 1.3 m/s
    assert np.all(speed[real] <= dom.max_speed_factor * 2.0)  # speed cap (v0 clipped well below 2 m/s)
