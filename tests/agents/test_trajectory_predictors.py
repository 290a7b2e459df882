"""Trajectory predictors: constant velocity is exact on straight lines, noise is seeded, the kNN uses its data."""

from __future__ import annotations

import numpy as np
import pytest

from owl_eval.protocols.trajectory.agents.constant_velocity import ConstantVelocityPredictor
from owl_eval.protocols.trajectory.agents.cv_noise import ConstantVelocityNoisePredictor
from owl_eval.protocols.trajectory.agents.knn_futures import KnnFuturesPredictor
from owl_eval.protocols.trajectory.api import TrajectoryPredictor, last_position_and_velocity
from owl_eval.protocols.trajectory.domains.scenes import TrajectoryScenes


def _line(start, step, n):
    return np.asarray(start, float) + np.arange(n)[:, None] * np.asarray(step, float)


def test_constant_velocity_is_exact_on_a_straight_line():
    track = _line([1.0, 2.0], [0.3, -0.4], 20)
    history = track[None, None, :8]
    pred = ConstantVelocityPredictor().predict(history, pred_len=12, num_preds=3, dt=0.4, rng=None)
    assert pred.shape == (1, 3, 1, 12, 2)
    # ADE written out: mean over steps of ||pred - truth|| must be 0
    ade = np.mean(np.linalg.norm(pred[0, :, 0] - track[8:], axis=-1))
    assert ade == pytest.approx(0.0, abs=1e-12)
    assert isinstance(ConstantVelocityPredictor(), TrajectoryPredictor)


def test_velocity_bridges_missing_steps():
    # observed at steps 0, 1, 3 (2 missing), 4 missing: last at x=3, previous at x=1 two steps back -> 1 m/step
    history = np.array([[[[0.0, 0.0], [1.0, 0.0], [np.nan, np.nan], [3.0, 0.0], [np.nan, np.nan]]]])
    p, v, lag = last_position_and_velocity(history)
    assert p[0, 0].tolist() == [3.0, 0.0] and v[0, 0].tolist() == [1.0, 0.0] and lag[0, 0] == 1
    pred = ConstantVelocityPredictor().predict(history, pred_len=2, num_preds=1, dt=0.4, rng=None)
    # steps 5 and 6 -> x = 3 + 2, 3 + 3
    assert pred[0, 0, 0, :, 0].tolist() == [5.0, 6.0]
    single = np.array([[[[np.nan, np.nan], [2.0, 1.0]]]])  # one observation: standing still
    assert (
        ConstantVelocityPredictor().predict(single, pred_len=2, num_preds=1, dt=0.4, rng=None)[0, 0, 0].tolist()
        == [[2.0, 1.0]] * 2
    )


def test_cv_noise_is_seeded_centred_and_exact_without_noise():
    track = _line([0.0, 0.0], [1.0, 0.0], 20)
    history = np.repeat(track[None, None, :8], 2, axis=1)
    quiet = ConstantVelocityNoisePredictor(0.0, 0.0, 0.0).predict(
        history, pred_len=12, num_preds=4, dt=0.4, rng=np.random.default_rng(0)
    )
    np.testing.assert_allclose(quiet[0, :, 0], np.broadcast_to(track[8:], (4, 12, 2)), atol=1e-12)
    noisy = ConstantVelocityNoisePredictor(0.1, 0.1, 0.0)
    a = noisy.predict(history, pred_len=12, num_preds=200, dt=0.4, rng=np.random.default_rng(1))
    b = noisy.predict(history, pred_len=12, num_preds=200, dt=0.4, rng=np.random.default_rng(1))
    np.testing.assert_array_equal(a, b)
    assert a[0, :, 0, -1, 0].std() > 0.1  # samples spread
    # each step length is speed * exp(random walk): the first step has median length 1 m
    first = np.linalg.norm(a[0, :, 0, 0] - track[7], axis=-1)
    assert np.median(first) == pytest.approx(1.0, abs=0.05)


def test_knn_returns_the_future_of_the_matching_training_history():
    # training: a straight walker (1 m/step along +x) and one turning left after the history
    straight = _line([0, 0], [1, 0], 6)
    turn = np.concatenate([_line([0, 0], [1, 0], 4), _line([3, 1], [0, 1], 2)])
    hist = np.stack([straight[:4], turn[:4]])[:, None]
    fut = np.stack([straight[4:], turn[4:]])[:, None]
    train = TrajectoryScenes(hist, fut, 0.4, np.array(["a", "b"]), np.array([0, 0]))
    knn = KnnFuturesPredictor(mirror=False)
    knn.fit(train, rng=np.random.default_rng(0))
    # query: the same walker shifted to (10, 5) and rotated to walk along +y at 2 m/step
    q = np.array([10.0, 5.0]) + np.arange(4)[:, None] * np.array([0.0, 2.0])
    pred = knn.predict(q[None, None], pred_len=2, num_preds=2, dt=0.4, rng=None)
    assert pred.shape == (1, 2, 1, 2, 2)
    # both training futures in the walker frame (origin = last point, x along the heading, per unit speed):
    # straight (1, 0), (2, 0); turn (0, 1), (0, 2). Scaled by 2, rotated by +90 degrees ((x, y) -> (-y, x)),
    # added to the query's last point (10, 11): straight -> (10, 13), (10, 15); turn -> (8, 11), (6, 11)
    got = {tuple(np.round(p.ravel(), 9)) for p in pred[0, :, 0]}
    assert got == {(10.0, 13.0, 10.0, 15.0), (8.0, 11.0, 6.0, 11.0)}
    # the exact match is the nearest (first) prediction
    np.testing.assert_allclose(pred[0, 0, 0], [[10, 13], [10, 15]], atol=1e-9)
    with pytest.raises(RuntimeError, match="before fit"):
        KnnFuturesPredictor().predict(q[None, None], pred_len=2, num_preds=1, dt=0.4, rng=None)


def test_cv_sampled_rotates_each_sample_by_one_angle_of_the_right_spread():
    from owl_eval.protocols.trajectory.agents.cv_sampled import ConstantVelocitySampledPredictor

    track = _line([2.0, -1.0], [0.3, 0.4], 20)  # heading atan2(0.4, 0.3), 0.5 m per step
    history = np.repeat(track[None, None, :8], 2, axis=1)  # two agents, drawn independently
    n_p, sigma = 2000, 25.0
    pred = ConstantVelocitySampledPredictor(sigma).predict(
        history, pred_len=12, num_preds=n_p, dt=0.4, rng=np.random.default_rng(5)
    )
    assert pred.shape == (1, n_p, 2, 12, 2)
    # angle of each sample's displacement from the last position, relative to the true heading, per step
    disp = pred[0] - track[7]
    angle = np.arctan2(disp[..., 1], disp[..., 0]) - np.arctan2(0.4, 0.3)
    angle = (angle + np.pi) % (2 * np.pi) - np.pi
    np.testing.assert_allclose(angle, np.broadcast_to(angle[..., :1], angle.shape), atol=1e-9)  # one angle: a line
    speeds = np.linalg.norm(disp, axis=-1)
    np.testing.assert_allclose(speeds, np.broadcast_to(0.5 * np.arange(1, 13), speeds.shape), atol=1e-9)  # speed kept
    theta = np.rad2deg(angle[..., 0]).ravel()  # 4000 angles
    n = theta.size
    # standard errors of a normal sample's mean (sigma / sqrt(n)) and standard deviation (~ sigma / sqrt(2 n))
    assert abs(theta.mean()) < 4 * sigma / np.sqrt(n)
    assert abs(theta.std(ddof=1) - sigma) < 4 * sigma / np.sqrt(2 * (n - 1))
    assert not np.allclose(angle[:, 0, 0], angle[:, 1, 0])  # agents get their own angles
    again = ConstantVelocitySampledPredictor(sigma).predict(
        history, pred_len=12, num_preds=n_p, dt=0.4, rng=np.random.default_rng(5)
    )
    np.testing.assert_array_equal(pred, again)


def test_cv_sampled_without_spread_is_constant_velocity_exactly():
    from owl_eval.protocols.trajectory.agents.cv_sampled import ConstantVelocitySampledPredictor

    rng = np.random.default_rng(0)
    history = rng.normal(size=(3, 4, 8, 2)).cumsum(2)
    history[0, 1, [2, 7]] = np.nan  # a gap and a missing last step: the lag is bridged as CV does
    history[1, 2, :7] = np.nan  # a single point: standing still
    cv = ConstantVelocityPredictor().predict(history, pred_len=12, num_preds=5, dt=0.4, rng=None)
    pred = ConstantVelocitySampledPredictor(0.0).predict(
        history, pred_len=12, num_preds=5, dt=0.4, rng=np.random.default_rng(1)
    )
    np.testing.assert_array_equal(pred, cv)


def test_cv_sampled_setting_is_typed():
    from owl_eval.errors import ConfigError
    from owl_eval.protocols.trajectory.agents.cv_sampled import ConstantVelocitySampledPredictor

    with pytest.raises(ConfigError, match="agent.sigma_degrees"):
        ConstantVelocitySampledPredictor(-5.0)
    with pytest.raises(ConfigError, match="agent.sigma_degrees"):
        ConstantVelocitySampledPredictor("wide")
