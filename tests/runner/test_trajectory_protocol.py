"""Trajectory protocol: output validation, turn classes by hand, record round trip, log-prob hook."""

from __future__ import annotations

import numpy as np
import pytest

from owl_eval.errors import ConfigError
from owl_eval.evaluation import evaluation_for
from owl_eval.protocols.base import AgentOutputError, partial_record
from owl_eval.protocols.trajectory.agents.constant_velocity import ConstantVelocityPredictor
from owl_eval.protocols.trajectory.domains.crowd_sim import CrowdSimDomain
from owl_eval.protocols.trajectory.domains.scenes import TrajectoryScenes, TrajectorySplits
from owl_eval.protocols.trajectory.driver import TrajectoryDriver
from owl_eval.protocols.trajectory.record import TrajectoryRecord


class FixedDomain:
    name = "fixed"

    def __init__(self, scenes):
        self.scenes = scenes

    def load(self, rng):
        return TrajectorySplits(self.scenes, self.scenes)


def _scenes():
    """Two scenes, two agent slots, 3 observed + 2 future steps (1 m per step).
    Scene 0: agent 0 walks +x straight; agent 1 walks +x then turns to +y (left).
    Scene 1: agent 0 walks +y then turns to +x (right); agent 1 is padding (NaN)."""
    h = np.full((2, 2, 3, 2), np.nan)
    f = np.full((2, 2, 2, 2), np.nan)
    h[0, 0] = [[0, 0], [1, 0], [2, 0]]
    f[0, 0] = [[3, 0], [4, 0]]
    h[0, 1] = [[0, 5], [1, 5], [2, 5]]
    f[0, 1] = [[2, 6], [2, 7]]
    h[1, 0] = [[0, 0], [0, 1], [0, 2]]
    f[1, 0] = [[1, 2], [2, 2]]
    return TrajectoryScenes(h, f, 0.4, np.array(["t", "t"]), np.array([0, 10]))


class Returns:
    def __init__(self, fn):
        self.fn = fn

    def fit(self, train, *, rng):
        pass

    def predict(self, history, *, pred_len, num_preds, dt, rng):
        return self.fn(history, pred_len, num_preds)


def _cv(history, pred_len, num_preds):
    return ConstantVelocityPredictor().predict(history, pred_len=pred_len, num_preds=num_preds, dt=0.4, rng=None)


def test_bad_outputs_raise_agent_output_error_naming_the_array():
    proto = TrajectoryDriver(num_preds=3)
    dom = FixedDomain(_scenes())
    with pytest.raises(AgentOutputError, match=r"shape \(2, 2, 2, 2, 2\), expected .*\(2, 3, 2, 2, 2\)"):
        proto.run(
            domain=dom,
            agent=Returns(lambda h, n_o, n_p: np.zeros((2, 2, 2, n_o, 2))),
            rng=np.random.default_rng(0),
            progress=False,
        )

    def nan_for_valid(h, n_o, n_p):
        out = _cv(h, n_o, n_p)
        out[0, 1, 1, 0] = np.nan  # scene 0, prediction 1, agent 1 (observed), step 0
        return out

    with pytest.raises(AgentOutputError, match="NaN/inf for an observed agent .*prediction 1, agent 1, future step 0"):
        proto.run(domain=dom, agent=Returns(nan_for_valid), rng=np.random.default_rng(0), progress=False)
    # NaN for the padding agent of scene 1 is fine
    record = proto.run(domain=dom, agent=Returns(_cv), rng=np.random.default_rng(0), progress=False)
    assert np.isnan(record.path_pred[1, :, 1]).all()


def test_turn_classes_and_probabilities_by_hand():
    proto = TrajectoryDriver(num_preds=2, class_smoothing=0.5)
    record = proto.run(domain=FixedDomain(_scenes()), agent=Returns(_cv), rng=np.random.default_rng(0), progress=False)
    names = [str(n) for n in record.class_names]
    assert names == ["straight", "left", "right", "stop"]
    # classified agents in order: (0,0) straight, (0,1) left (D = (0, 2) vs heading +x: +90 deg), (1,0) right
    assert record.class_index.tolist() == [[0, 0], [0, 1], [1, 0]]
    np.testing.assert_array_equal(record.p_true, np.eye(4)[[0, 1, 2]])
    # constant velocity predicts "straight" twice for everyone: (2 + 0.5) / (2 + 4 * 0.5) = 0.625, others 0.125
    np.testing.assert_allclose(record.p_pred, np.tile([0.625, 0.125, 0.125, 0.125], (3, 1)))
    res = evaluation_for("trajectory").evaluate(record, {"k_values": [20], "kde": False})
    # ADE by hand: agent (0,0) exact = 0; (0,1) CV (3,5),(4,5) vs (2,6),(2,7): sqrt2, sqrt8; (1,0) CV (0,3),(0,4)
    # vs (1,2),(2,2): sqrt2, sqrt8 -> mean over 3 agents of (sqrt2 + sqrt8)/2 for two of them
    expected = (0 + 2 * (np.sqrt(2) + np.sqrt(8)) / 2) / 3
    assert res.values["ade_marginal"] == pytest.approx(expected, abs=1e-12)
    assert res.values["num_agents"] == 3 and res.values["num_classified_agents"] == 3
    # TNR-PR for "straight": threshold = 0.625 (the positive's score), negatives also 0.625 -> none below: 0
    assert res.values["tnr_pr"] == 0.0


def test_record_round_trip_in_general_framework_shapes(tmp_path):
    dom = CrowdSimDomain(num_train_scenes=2, num_test_scenes=7, max_agents=5)
    proto = TrajectoryDriver(num_preds=4, batch_size=3)
    record = proto.run(domain=dom, agent=ConstantVelocityPredictor(), rng=np.random.default_rng(1), progress=False)
    record.save(tmp_path)
    with np.load(tmp_path / "trajectory_record.npz", allow_pickle=False) as d:
        assert d["Path_true"].shape == (7, 1, 5, 12, 2)
        assert d["Path_pred"].shape == (7, 4, 5, 12, 2)
        assert d["Pred_steps"].shape == (7, 5, 12) and d["Pred_steps"].dtype == bool
        assert d["Path_history"].shape == (7, 5, 8, 2)
    back = TrajectoryRecord.load(tmp_path)
    np.testing.assert_array_equal(back.path_pred, record.path_pred)
    assert back.class_index.tolist() == record.class_index.tolist()  # re-based over the 3 batches
    assert back.class_index[:, 0].max() > 3
    # the saved file streams through the table's npz reader with the same numbers
    from owl_eval.protocols.trajectory.evaluation import trajectory_table_npz

    a = evaluation_for("trajectory").evaluate(back, {"kde": False})
    b = trajectory_table_npz(
        tmp_path / "trajectory_record.npz", rng=np.random.default_rng(back.metric_seed), kde=False, chunk_size=2
    )
    assert a.values["min_ade_20_marginal"] == pytest.approx(b.values["min_ade_20_marginal"], rel=1e-12)


def test_predictor_log_probs_are_used_and_checked():
    class WithLogProb(Returns):
        def log_prob(self, history, futures, *, dt):
            s, k, a = futures.shape[:3]
            return -np.arange(k, dtype=float)[None, :, None] * np.ones((s, k, a))  # truth (last) least likely

    proto = TrajectoryDriver(num_preds=2)
    record = proto.run(
        domain=FixedDomain(_scenes()), agent=WithLogProb(_cv), rng=np.random.default_rng(0), progress=False
    )
    assert record.log_probs.shape == (2, 3, 2)
    res = evaluation_for("trajectory").evaluate(record, {"kde": True})
    assert res.values["kde_nll_marginal"] == pytest.approx(2.0)  # -log p(truth) = 2 for every agent

    class BadLogProb(Returns):
        def log_prob(self, history, futures, *, dt):
            return np.zeros((1, 1, 1))

    with pytest.raises(AgentOutputError, match=r"log_prob returned shape \(1, 1, 1\), expected \[S, N_P \+ 1, N_A\]"):
        proto.run(domain=FixedDomain(_scenes()), agent=BadLogProb(_cv), rng=np.random.default_rng(0), progress=False)


def test_same_seed_same_record_and_partial_record_on_crash():
    dom = CrowdSimDomain(num_train_scenes=2, num_test_scenes=6, max_agents=4)
    from owl_eval.protocols.trajectory.agents.cv_noise import ConstantVelocityNoisePredictor

    runs = [
        TrajectoryDriver(num_preds=3).run(
            domain=dom, agent=ConstantVelocityNoisePredictor(), rng=np.random.default_rng(9), progress=False
        )
        for _ in range(2)
    ]
    np.testing.assert_array_equal(runs[0].path_pred, runs[1].path_pred)
    calls = []

    def crash_second(h, n_o, n_p):
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("boom")
        return _cv(h, n_o, n_p)

    proto = TrajectoryDriver(num_preds=3, batch_size=4)
    with pytest.raises(RuntimeError, match="boom") as err:
        proto.run(domain=dom, agent=Returns(crash_second), rng=np.random.default_rng(0), progress=False)
    assert partial_record(err.value).num_scenes == 4


# ------------------------------------------------------------------------------ checks before any run


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"num_preds": 2.5}, "protocol.num_preds: expected an integer, got 2.5 (float)"),
        ({"batch_size": 0}, "protocol.batch_size: expected an integer >= 1, got 0"),
        ({"stop_distance": "far"}, "protocol.stop_distance: expected a number, got 'far'"),
        ({"turn_degrees": 270}, "protocol.turn_degrees: expected a number <= 180, got 270"),
        ({"class_smoothing": -0.5}, "protocol.class_smoothing: expected a number >= 0, got -0.5"),
        ({"plot_scenes": "all"}, "protocol.plot_scenes: expected an integer, got 'all'"),
    ],
)
def test_each_bad_protocol_setting_is_one_error_naming_its_key(setting, message):
    with pytest.raises(ConfigError) as err:
        TrajectoryDriver(**setting)
    assert str(err.value) == message


class OndLikeAgent:
    def fit(self, features, labels, *, num_known, rng): ...

    def predict_batch(self, batch): ...


class PositionalPredictor(Returns):
    def predict(self, history, pred_len, num_preds):  # no dt / rng keywords
        return None


@pytest.mark.parametrize(
    "kw, message",
    [
        (
            dict(baseline=Returns(_cv)),
            "baseline (tests.runner.test_trajectory_protocol.Returns): the trajectory protocol "
            "runs no baseline agent; choose baseline=none",
        ),
        (
            dict(agent=OndLikeAgent()),
            "agent (tests.runner.test_trajectory_protocol.OndLikeAgent) is not a trajectory "
            "predictor: it has no predict(history, *, pred_len, num_preds, dt, rng) method; choose "
            "agent=trajectory/<option> (trajectory/callable, trajectory/constant_velocity, trajectory/cv_noise, "
            "trajectory/cv_sampled, trajectory/knn_futures)",
        ),
        (
            dict(agent=PositionalPredictor(_cv)),
            "agent (tests.runner.test_trajectory_protocol.PositionalPredictor) is not a "
            "trajectory predictor: its predict(history, pred_len, num_preds) cannot be "
            "called as predict(history, *, pred_len, num_preds, dt, rng)",
        ),
    ],
)
def test_check_rejects_a_baseline_and_agents_of_other_protocols(kw, message):
    parts = dict(domain=FixedDomain(_scenes()), agent=Returns(_cv), baseline=None) | kw
    with pytest.raises(ConfigError) as err:
        TrajectoryDriver().check(**parts)
    assert str(err.value).startswith(message)


def test_check_reads_the_domains_data_through_its_check_hook():
    from owl_eval.protocols.trajectory.domains.eth_ucy import DataPathError, EthUcyDomain

    with pytest.raises(DataPathError, match=r"^domain.path is not set"):
        TrajectoryDriver().check(domain=EthUcyDomain(None), agent=Returns(_cv))
    TrajectoryDriver().check(domain=CrowdSimDomain(num_train_scenes=2, num_test_scenes=2), agent=Returns(_cv))
