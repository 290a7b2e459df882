"""The adapter agents on their own: a bad object is one ConfigError naming the key, the object and the missing
method before any run; a bad output is one AgentOutputError naming the method, shape or dtype; the drivers of
every protocol refuse strings, Python objects, complex numbers and masked arrays; a tiny scene counted by hand."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from sklearn.ensemble import IsolationForest
from sklearn.linear_model import LinearRegression, LogisticRegression, SGDClassifier
from sklearn.neighbors import KNeighborsClassifier, LocalOutlierFactor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC, OneClassSVM

from owl_eval.datasets.classification import DigitsDomain
from owl_eval.errors import ConfigError
from owl_eval.protocols.base import AgentOutputError, real_array
from owl_eval.protocols.continual.agents.sklearn_model import SklearnContinualLearner
from owl_eval.protocols.continual.domains import SplitDigits
from owl_eval.protocols.continual.driver import ContinualDriver
from owl_eval.protocols.ond.agents.sklearn_model import SklearnNoveltyAgent
from owl_eval.protocols.ond.driver import OndDriver
from owl_eval.protocols.trajectory.agents.callable_model import CallablePredictor
from owl_eval.protocols.trajectory.domains.crowd_sim import CrowdSimDomain
from owl_eval.protocols.trajectory.driver import TrajectoryDriver
from tests.fixtures.agents.trajectory import callables

SMALL_OND = {"num_trials": 2, "trials_without_novelty": 1, "pre_novelty": 20, "post_novelty": 40}


# ------------------------------------------------------------------------------------- bad objects: one line
@pytest.mark.parametrize(
    "build, message",
    [
        (
            lambda: SklearnNoveltyAgent(SVC()),
            "agent.classifier (sklearn.svm._classes.SVC) has no predict_proba() method",
        ),
        (lambda: SklearnNoveltyAgent(LinearRegression()), "has no predict_proba() method"),
        (lambda: SklearnNoveltyAgent("abc"), "agent.classifier: expected a scikit-learn classifier"),
        (lambda: SklearnNoveltyAgent(LogisticRegression(), novelty="odin"), "agent.novelty: expected one of"),
        (
            lambda: SklearnNoveltyAgent(make_pipeline(StandardScaler(), SVC()), novelty="max_softmax"),
            "agent.classifier (sklearn.pipeline.Pipeline) has no predict_proba() method",
        ),
        (
            lambda: SklearnNoveltyAgent(LogisticRegression(), novelty=LocalOutlierFactor()),
            "agent.novelty (sklearn.neighbors._lof.LocalOutlierFactor) has no score_samples() or "
            "decision_function() method",
        ),
        (
            lambda: SklearnNoveltyAgent(KNeighborsClassifier(), novelty="energy"),
            "agent.classifier (sklearn.neighbors._classification.KNeighborsClassifier) has no decision_function() "
            "method; agent.novelty=energy needs the classifier's logits",
        ),
        (lambda: SklearnContinualLearner(LogisticRegression()), "agent.estimator (sklearn.linear_model._logistic."),
        (
            lambda: SklearnContinualLearner(make_pipeline(StandardScaler(), SGDClassifier())),
            "has no partial_fit() method",
        ),
        (lambda: SklearnContinualLearner(SGDClassifier(), replay={"size": 10, "every": 2}), "agent.replay"),
        (lambda: SklearnContinualLearner(SGDClassifier(), replay={"size": 0}), "agent.replay.size"),
        (lambda: SklearnContinualLearner(SGDClassifier(), replay=[200]), "agent.replay: expected null or"),
        (lambda: CallablePredictor(callables.takes_one_argument), "cannot be called as predictor(observed, agent_mask"),
        (lambda: CallablePredictor(42), "agent.predictor (builtins.int) is neither callable"),
        (lambda: CallablePredictor(callables.constant_velocity, layout="time_first"), "agent.layout"),
        (
            lambda: CallablePredictor(callables.constant_velocity, log_prob=3),
            "agent.log_prob (builtins.int) is not callable",
        ),
        (lambda: CallablePredictor("tests.fixtures.agents.trajectory.nowhere.f"), "agent.predictor: cannot import"),
    ],
)
def test_a_bad_object_is_one_config_error_naming_the_key_and_the_method(build, message):
    with pytest.raises(ConfigError) as info:
        build()
    text = str(info.value)
    assert message in text and "\n" not in text, text


def test_policy_objects_are_checked():
    pytest.importorskip("gymnasium")
    from owl_eval.protocols.lifelong_rl.agents.policy import PolicyAgent
    from tests.fixtures.agents.lifelong_rl.policies import NoPolicy, Sb3StylePolicy, balance

    with pytest.raises(
        ConfigError, match=r"agent.policy \(tests.fixtures.agents.lifelong_rl.policies.NoPolicy\) is neither"
    ):
        PolicyAgent(NoPolicy())
    with pytest.raises(ConfigError, match=r"cannot be called as policy\(observation\)"):
        PolicyAgent(lambda: 0)
    assert PolicyAgent(Sb3StylePolicy()).wanted == {"state", "episode_start", "deterministic"}
    assert PolicyAgent("tests.fixtures.agents.lifelong_rl.policies.balance").policy is balance


def test_every_detector_kind_and_score_runs_on_digits():
    """IsolationForest, LocalOutlierFactor(novelty=True), OneClassSVM (decision_function only), max_softmax and
    energy each run: p_class rows sum to 1, the same seed gives the same numbers."""
    for novelty in (
        IsolationForest(n_estimators=20),
        LocalOutlierFactor(novelty=True),
        OneClassSVM(gamma="scale"),
        "max_softmax",
        "energy",
    ):
        agent = SklearnNoveltyAgent(make_pipeline(StandardScaler(), LogisticRegression(max_iter=500)), novelty=novelty)
        protocol = OndDriver(**SMALL_OND)
        first = protocol.run(domain=DigitsDomain(), agent=agent, rng=np.random.default_rng(3), progress=False)
        for a in first.trials:
            np.testing.assert_allclose(a.p_class.sum(1), 1.0)
        if isinstance(novelty, IsolationForest):  # its seed is drawn from the run's: the same seed, the same numbers
            again = protocol.run(domain=DigitsDomain(), agent=agent, rng=np.random.default_rng(3), progress=False)
            for a, b in zip(first.trials, again.trials):
                np.testing.assert_array_equal(a.p_class, b.p_class)
        if novelty == "max_softmax":  # the one that separates digits' novel classes well (AUROC 0.91 on 6 trials)
            novel = np.concatenate([t.gt_novel for t in first.trials]).astype(bool)
            unknown = np.concatenate([t.p_class[:, 0] for t in first.trials])
            assert unknown[novel].mean() > 2 * unknown[~novel].mean()


def test_isolation_forest_seed_comes_from_the_run_unless_set():
    agent = SklearnNoveltyAgent(LogisticRegression(max_iter=500), novelty=IsolationForest(n_estimators=5))
    X = np.random.default_rng(0).normal(size=(40, 3))
    y = np.repeat([1, 2], 20)
    agent.fit(X, y, num_known=2, rng=np.random.default_rng(1))
    assert isinstance(agent.detector.random_state, int)
    kept = SklearnNoveltyAgent(
        LogisticRegression(max_iter=500), novelty=IsolationForest(n_estimators=5, random_state=7)
    )
    kept.fit(X, y, num_known=2, rng=np.random.default_rng(1))
    assert kept.detector.random_state == 7


# ------------------------------------------------------------------------------------- bad outputs: one line
class _Shape:
    def __init__(self, out):
        self.out = out

    def fit(self, X, y):
        self.classes_ = np.unique(y)
        return self

    def predict_proba(self, X):
        return self.out(len(X), len(self.classes_))


@pytest.mark.parametrize(
    "out, message",
    [
        (lambda n, k: np.full((n, k + 1), 1.0 / (k + 1)), "predict_proba(X) returned shape"),
        (lambda n, k: np.full((n, k), "0.5"), "dtype <U3 (strings)"),
        (lambda n, k: np.full((n, k), 1.0 / k, dtype=complex), "dtype complex128 (complex numbers)"),
    ],
)
def test_a_classifier_with_bad_probabilities_is_one_output_error(out, message):
    agent = SklearnNoveltyAgent(_Shape(out), novelty="max_softmax")
    with pytest.raises(AgentOutputError) as info:
        OndDriver(**SMALL_OND).run(domain=DigitsDomain(), agent=agent, rng=np.random.default_rng(0), progress=False)
    assert message in str(info.value) and "agent.classifier.predict_proba(X)" in str(info.value)


@pytest.mark.parametrize(
    "value, dtype_words",
    [
        (np.array(["0.5", "0.5"]), "dtype <U3 (strings)"),
        (np.array([b"1", b"0"]), "dtype |S1 (bytes)"),
        (np.array([0.5, None], dtype=object), "dtype object (Python objects)"),
        (np.array([0.5, 0.5], dtype=object), "dtype object (Python objects)"),
        (np.array([0.5 + 0j, 0.5]), "dtype complex128 (complex numbers)"),
        (["0.5", 0.5], "dtype <U32 (strings)"),
        ([[0.5], [0.5, 0.5]], "not an array of real numbers"),
    ],
)
def test_real_array_refuses_what_would_be_silently_converted(value, dtype_words):
    with pytest.raises(AgentOutputError) as info:
        real_array(value, "p_class", where="agent output for trial 't', batch 0")
    assert str(info.value).startswith("agent output for trial 't', batch 0: p_class ") and dtype_words in str(
        info.value
    )


def test_real_array_refuses_masked_and_keeps_real_numbers():
    with pytest.raises(AgentOutputError, match=r"p_class is a masked array \(numpy.ma.MaskedArray\)"):
        real_array(np.ma.masked_invalid([0.5, np.nan]), "p_class", where="x")
    for ok in ([True, False], np.arange(3, dtype=np.uint8), np.ones(2, dtype=np.float32), [1, 2.5]):
        assert real_array(ok, "a", where="x").dtype.kind in "biuf"


class _OndReturning:
    """An OND agent whose outputs are the right numbers in the wrong container."""

    def __init__(self, wrap):
        self.wrap = wrap

    def fit(self, features, labels, *, num_known, rng):
        self.k = num_known

    def start_trial(self, trial_id, num_samples):
        pass

    def predict_batch(self, batch):
        n = len(batch.sample_index)
        return np.zeros(n), self.wrap(np.full((n, self.k + 1), 1.0 / (self.k + 1)))


@pytest.mark.parametrize(
    "wrap, words",
    [
        (lambda p: p.astype(str), "p_class has dtype <U"),
        (lambda p: p.astype(object), "p_class has dtype object (Python objects)"),
        (lambda p: p.astype(complex), "p_class has dtype complex128"),
        (lambda p: np.ma.masked_array(p), "p_class is a masked array"),
    ],
)
def test_ond_driver_refuses_strings_objects_complex_and_masked(wrap, words):
    with pytest.raises(AgentOutputError) as info:
        OndDriver(**SMALL_OND).run(
            domain=DigitsDomain(), agent=_OndReturning(wrap), rng=np.random.default_rng(0), progress=False
        )
    assert "agent output for trial 'trial000', batch 0" in str(info.value) and words in str(info.value)


class _ContinualReturning:
    def __init__(self, wrap):
        self.wrap = wrap

    def setup(self, num_features, num_classes, rng):
        pass

    def learn(self, task_id, X, y):
        pass

    def predict(self, X, task_id=None):
        return self.wrap(np.zeros(len(X), dtype=np.int64))


@pytest.mark.parametrize(
    "wrap, words",
    [
        (lambda p: p.astype(str), "dtype <U21 (strings)"),
        (lambda p: p.astype(object), "dtype object (Python objects)"),
        (lambda p: p.astype(complex), "dtype complex128 (complex numbers)"),
        (lambda p: np.ma.masked_array(p, mask=True), "masked array"),
    ],
)
def test_continual_driver_refuses_strings_objects_complex_and_masked(wrap, words):
    with pytest.raises(AgentOutputError) as info:
        ContinualDriver().run(
            domain=SplitDigits(), agent=_ContinualReturning(wrap), rng=np.random.default_rng(0), progress=False
        )
    assert "agent predictions for task 0 (before any training)" in str(info.value) and words in str(info.value)


class _TrajectoryReturning:
    def __init__(self, wrap, where="predict"):
        self.wrap, self.where = wrap, where

    def fit(self, train, *, rng):
        pass

    def predict(self, history, *, pred_len, num_preds, dt, rng):
        s, a = history.shape[:2]
        out = np.zeros((s, num_preds, a, pred_len, 2))
        return self.wrap(out) if self.where == "predict" else out

    def log_prob(self, history, futures, *, dt):
        out = np.zeros(futures.shape[:3])
        return self.wrap(out) if self.where == "log_prob" else out


@pytest.mark.parametrize("where", ["predict", "log_prob"])
@pytest.mark.parametrize(
    "wrap, words",
    [
        (lambda p: p.astype(str), "(strings)"),
        (lambda p: p.astype(object), "(Python objects)"),
        (lambda p: p.astype(complex), "(complex numbers)"),
        (lambda p: np.ma.masked_array(p), "masked array"),
    ],
)
def test_trajectory_driver_refuses_strings_objects_complex_and_masked(where, wrap, words):
    domain = CrowdSimDomain(num_train_scenes=2, num_test_scenes=3, min_agents=2, max_agents=3)
    with pytest.raises(AgentOutputError) as info:
        TrajectoryDriver(num_preds=2).run(
            domain=domain, agent=_TrajectoryReturning(wrap, where), rng=np.random.default_rng(0), progress=False
        )
    text = str(info.value)
    assert text.startswith("predictor output for scenes 0..2: ") and words in text
    assert ("futures" if where == "predict" else "log_prob") in text


def test_rl_driver_refuses_masked_complex_and_float_actions():
    pytest.importorskip("gymnasium")
    from owl_eval.protocols.lifelong_rl.episodes import _check_action
    from owl_eval.protocols.lifelong_rl.syllabus import Block

    block = Block("train", "cartpole", "default", 1)
    for action, words in (
        (np.ma.masked_array(np.array(1), mask=False), "masked array"),
        (np.complex128(1.0), "complex128"),
        (np.array(1, dtype=object), "(ndarray)"),
        ("1", "'1' (str)"),
        (0.7, "0.7 (float)"),
    ):
        with pytest.raises(AgentOutputError) as info:
            _check_action(action, 2, 0, block, 0, 0)
        assert "expected an int in [0, 2)" in str(info.value) and words in str(info.value), (action, str(info.value))
    assert _check_action(np.array(1), 2, 0, block, 0, 0) == 1  # Stable-Baselines3's 0-d action


# ------------------------------------------------------------------------------------- trajectory by hand
def test_callable_on_a_tiny_scene_counted_by_hand():
    """Two pedestrians, three observed steps: A walks +1 m/step in x from (0, 0); B is missing at the middle step
    and goes from (0, 0) to (0, 4) over 2 steps (2 m/step in y); a padding agent is never observed.
    Constant velocity, 2 future steps: A at (3, 0), (4, 0); B at (0, 6), (0, 8)."""
    nan = np.nan
    history = np.array([[[[0, 0], [1, 0], [2, 0]], [[0, 0], [nan, nan], [0, 4]], [[nan, nan]] * 3]], dtype=float)
    expected = np.array([[[3, 0], [4, 0]], [[0, 6], [0, 8]]], dtype=float)
    for predictor in (
        CallablePredictor(callables.constant_velocity),
        CallablePredictor(callables.ConstantVelocityModel(batch_size=1)),
        CallablePredictor(callables.SingleAgentConstantVelocityModel(batch_size=1)),
        CallablePredictor(functools.partial(callables.constant_velocity_samples, rng=np.random.default_rng(0))),
    ):
        out = predictor.predict(history, pred_len=2, num_preds=3, dt=0.4, rng=np.random.default_rng(0))
        assert out.shape == (1, 3, 3, 2, 2)  # [S, N_P, N_A, N_O, 2]
        noisy = isinstance(predictor.predictor, functools.partial)  # N(0, 0.1^2) around the same futures
        for p in range(3):
            np.testing.assert_allclose(out[0, p, :2], expected, atol=0.6 if noisy else 0.0)


def test_layouts_put_agents_and_predictions_where_they_belong():
    """A predictor whose value at [scene, agent, prediction] is 10 * agent + prediction: agents_first output is
    transposed to owl-eval's [S, N_P, N_A, ...]; preds_first is taken as it is."""
    history = np.zeros((1, 2, 3, 2))

    def agents_first(observed, agent_mask, *, num_preds, pred_len):
        a = np.arange(2)[:, None] * 10 + np.arange(num_preds)[None, :]  # [N_A, N_P]
        return np.broadcast_to(a[None, :, :, None, None], (1, 2, num_preds, pred_len, 2)).astype(float)

    def preds_first(observed, agent_mask, *, num_preds, pred_len):
        return agents_first(observed, agent_mask, num_preds=num_preds, pred_len=pred_len).transpose(0, 2, 1, 3, 4)

    for predictor in (CallablePredictor(agents_first), CallablePredictor(preds_first, layout="preds_first")):
        out = predictor.predict(history, pred_len=2, num_preds=3, dt=0.4, rng=None)
        for p in range(3):
            for a in range(2):
                assert (out[0, p, a] == 10 * a + p).all()


def test_log_prob_reaches_the_record_in_owl_evals_layout():
    domain = CrowdSimDomain(num_train_scenes=2, num_test_scenes=3, min_agents=2, max_agents=3)
    predictor = CallablePredictor(callables.constant_velocity_samples, log_prob=callables.gaussian_log_prob)
    record = TrajectoryDriver(num_preds=4).run(
        domain=domain, agent=predictor, rng=np.random.default_rng(0), progress=False
    )
    lp = record.log_probs  # [S, N_P + 1, N_A]; the last one is the true future's
    mask = np.isfinite(record.path_history[:, :, -1]).all(-1)
    assert lp.shape == (3, 5, record.path_pred.shape[2])
    truth = np.nan_to_num(record.path_true[:, 0])[:, None].transpose(0, 2, 1, 3, 4)  # [S, N_A, 1, N_O, 2]
    own = callables.gaussian_log_prob(record.path_history, mask, truth, num_steps=truth.shape[-2])[:, :, 0]
    np.testing.assert_allclose(lp[:, -1][mask], own[mask], rtol=1e-12)


def test_a_template_model_that_saves_nothing_for_some_agents_is_one_output_error():
    domain = CrowdSimDomain(num_train_scenes=2, num_test_scenes=3, min_agents=2, max_agents=3)
    with pytest.raises(AgentOutputError, match=r"predict_method\(\) saved no prediction for scene 1, agent 0"):
        TrajectoryDriver(num_preds=2).run(
            domain=domain,
            agent=CallablePredictor(callables.ForgetfulModel()),
            rng=np.random.default_rng(0),
            progress=False,
        )


def test_continual_replay_per_task_keeps_size_samples_of_every_task():
    learner = SklearnContinualLearner(SGDClassifier(), epochs=1, replay={"size": 7, "per_task": True})
    record = ContinualDriver().run(domain=SplitDigits(), agent=learner, rng=np.random.default_rng(0), progress=False)
    assert [len(y) for _, y in learner.per_task] == [7] * 5
    assert record.accuracy.shape == (5, 5)
    # untrained: uniform guesses among the 10 classes; then task 0's classes after learning task 0
    assert 0.0 < record.init_accuracy.mean() < 0.3
    assert record.accuracy[0, 0] > 0.9
