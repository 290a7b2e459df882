"""Baseline continual learners: the protocol behaviour they are there to show, determinism, and the pieces."""

from __future__ import annotations

import numpy as np
import pytest

from owl_eval.protocols.continual.agents import ContinualLearner, Finetune, Joint, Replay, ReservoirBuffer
from owl_eval.protocols.continual.agents._linear import SoftmaxRegression
from owl_eval.protocols.continual.domains import PermutedDigits, SplitDigits

LEARNERS = {"finetune": Finetune, "replay": Replay, "joint": Joint}


def run_protocol(domain, learner, seed, task_incremental=False):
    """The continual protocol in miniature: b before any update, then learn task j and fill row A[j]."""
    rng = np.random.default_rng(seed)
    tasks = domain.tasks(rng)
    learner.setup(domain.num_features, domain.num_classes, rng)
    if task_incremental:
        for t in tasks:
            learner.classes_for_task(t.task_id, t.classes)

    def evaluate():
        return [
            float(np.mean(learner.predict(t.X_test, t.task_id if task_incremental else None) == t.y_test))
            for t in tasks
        ]

    T = len(tasks)
    b = np.array(evaluate())
    A = np.zeros((T, T))
    for j, t in enumerate(tasks):
        learner.learn(t.task_id, t.X_train, t.y_train)
        A[j] = evaluate()
    return A, b


def _final_acc(A):
    return float(A[-1].mean())  # average accuracy at t = T-1, all tasks learned


def _forgetting(A):
    # Renate's forgetting at t = T-1, written out: mean_i<T-1 of max_{k<T-1} A[k][i] - A[T-1][i]
    T = A.shape[0]
    return float(np.mean([A[: T - 1, i].max() - A[T - 1, i] for i in range(T - 1)]))


@pytest.fixture(scope="module")
def split_cil():
    return {name: run_protocol(SplitDigits(), cls(), seed=0) for name, cls in LEARNERS.items()}


def test_replay_forgets_less_than_finetune_on_split_class_incremental(split_cil):
    f_ft, f_rp = _forgetting(split_cil["finetune"][0]), _forgetting(split_cil["replay"][0])
    # measured at seed 0: finetune ~0.26, replay ~0.06
    assert f_ft > 0.15
    assert f_rp < f_ft - 0.1


def test_joint_has_the_highest_final_average_accuracy(split_cil):
    acc = {name: _final_acc(A) for name, (A, _) in split_cil.items()}
    assert acc["joint"] > acc["replay"] > acc["finetune"], acc
    assert acc["joint"] > 0.9


def test_class_incremental_accuracy_matrix_is_plausible(split_cil):
    A, b = split_cil["finetune"]
    assert np.all(np.diag(A) > 0.9)  # each task is learned
    assert np.all(b < 0.5)  # a random linear model before training
    # tasks not yet learned: only the random initial weights can pick their (unseen) labels
    assert np.all(A[np.triu_indices(5, k=1)] < 0.2)


def test_joint_beats_finetune_on_permuted_digits():
    A_ft, _ = run_protocol(PermutedDigits(num_tasks=3), Finetune(), seed=0)
    A_jt, _ = run_protocol(PermutedDigits(num_tasks=3), Joint(), seed=0)
    assert _final_acc(A_jt) > _final_acc(A_ft)
    assert _forgetting(A_ft) > _forgetting(A_jt)


def test_task_incremental_predictions_stay_in_the_task():
    learner = Finetune()
    tasks = SplitDigits().tasks(np.random.default_rng(0))
    learner.setup(64, 10, np.random.default_rng(0))
    for t in tasks[:2]:
        learner.learn(t.task_id, t.X_train, t.y_train)
    assert set(np.unique(learner.predict(tasks[0].X_test, task_id=0))) <= {0, 1}
    assert set(np.unique(learner.predict(tasks[1].X_test, task_id=1))) <= {2, 3}
    # unknown task: all classes allowed; after learning task 1 most task-0 images go to 2 or 3
    assert set(np.unique(learner.predict(tasks[0].X_test))) - {0, 1}
    # declared classes take precedence over the labels seen
    learner.classes_for_task(4, [8, 9])
    assert set(np.unique(learner.predict(tasks[4].X_test, task_id=4))) <= {8, 9}
    learner.classes_for_task(0, [5])
    assert set(np.unique(learner.predict(tasks[0].X_test, task_id=0))) == {5}


def test_task_incremental_split_is_easy_for_every_learner():
    for cls in LEARNERS.values():
        A, _ = run_protocol(SplitDigits(), cls(), seed=1, task_incremental=True)
        assert _final_acc(A) > 0.95, cls.__name__


@pytest.mark.parametrize("name", sorted(LEARNERS))
def test_same_seed_same_predictions(name):
    d = SplitDigits()
    A1, b1 = run_protocol(d, LEARNERS[name](), seed=4)
    A2, b2 = run_protocol(d, LEARNERS[name](), seed=4)
    np.testing.assert_array_equal(A1, A2)
    np.testing.assert_array_equal(b1, b2)

    def final_predictions(seed):
        rng = np.random.default_rng(seed)
        tasks = d.tasks(np.random.default_rng(0))  # same data, different learner seeds
        learner = LEARNERS[name]()
        learner.setup(64, 10, rng)
        for t in tasks:
            learner.learn(t.task_id, t.X_train, t.y_train)
        X = np.concatenate([t.X_test for t in tasks])
        return learner.predict(X), learner.model.W.copy()

    p1, w1 = final_predictions(9)
    p2, w2 = final_predictions(9)
    p3, w3 = final_predictions(10)
    np.testing.assert_array_equal(p1, p2)
    np.testing.assert_array_equal(w1, w2)
    assert not np.array_equal(w1, w3)
    assert p1.dtype == np.int64


def test_learners_follow_the_protocol_and_reset_on_setup():
    for cls in LEARNERS.values():
        learner = cls()
        assert isinstance(learner, ContinualLearner)
        tasks = SplitDigits().tasks(np.random.default_rng(0))
        learner.setup(64, 10, np.random.default_rng(1))
        learner.learn(0, tasks[0].X_train, tasks[0].y_train)
        first = learner.predict(tasks[0].X_test)
        learner.learn(1, tasks[1].X_train, tasks[1].y_train)
        learner.setup(64, 10, np.random.default_rng(1))  # a fresh start
        assert learner.task_classes(0) is None
        learner.learn(0, tasks[0].X_train, tasks[0].y_train)
        np.testing.assert_array_equal(learner.predict(tasks[0].X_test), first)


# --------------------------------------------------------------------------------------------- pieces
def test_softmax_gradient_matches_finite_differences():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(7, 4)), rng.integers(0, 3, 7)
    m = SoftmaxRegression(4, 3, rng, init_scale=0.5)
    l2 = 0.1

    def loss(W, c):
        z = X @ W + c
        z = z - z.max(1, keepdims=True)
        logp = z - np.log(np.exp(z).sum(1, keepdims=True))
        return -logp[np.arange(7), y].mean() + 0.5 * l2 * np.sum(W**2)

    W0, c0 = m.W.copy(), m.c.copy()
    eps = 1e-6
    gW = np.zeros_like(W0)
    for idx in np.ndindex(*W0.shape):
        Wp, Wm = W0.copy(), W0.copy()
        Wp[idx] += eps
        Wm[idx] -= eps
        gW[idx] = (loss(Wp, c0) - loss(Wm, c0)) / (2 * eps)
    gc = np.array([(loss(W0, c0 + eps * e) - loss(W0, c0 - eps * e)) / (2 * eps) for e in np.eye(3)])
    m.step(X, y, learning_rate=1.0, l2=l2)  # with lr 1 the step is minus the gradient
    np.testing.assert_allclose(W0 - m.W, gW, atol=1e-7)
    np.testing.assert_allclose(c0 - m.c, gc, atol=1e-7)


def test_reservoir_keeps_capacity_and_is_uniform():
    buf = ReservoirBuffer(200, 1)
    rng = np.random.default_rng(0)
    buf.add(np.arange(1000.0)[:, None], np.arange(1000) % 10, rng)
    assert buf.size == 200 and buf.seen == 1000
    assert np.unique(buf.X[:, 0]).size == 200  # distinct samples
    np.testing.assert_array_equal(buf.y, buf.X[:, 0].astype(int) % 10)  # pairs stay together
    # each of 10 items offered one by one (in two calls) to a buffer of 5 is kept with probability 1/2
    counts = np.zeros(10)
    trials = 2000
    for _ in range(trials):
        small = ReservoirBuffer(5, 1)
        small.add(np.arange(4.0)[:, None], np.zeros(4, int), rng)
        small.add(np.arange(4.0, 10.0)[:, None], np.zeros(6, int), rng)
        counts[small.X[:, 0].astype(int)] += 1
    # binomial std of the share: sqrt(0.25 / 2000) = 0.011; allow ~4.5 std
    np.testing.assert_allclose(counts / trials, 0.5, atol=0.05)


def test_replay_buffer_holds_every_past_task():
    learner = Replay(buffer_size=100)
    tasks = SplitDigits().tasks(np.random.default_rng(0))
    learner.setup(64, 10, np.random.default_rng(0))
    assert learner.buffer.sample(5, np.random.default_rng(0)) is None
    for t in tasks:
        learner.learn(t.task_id, t.X_train, t.y_train)
    assert learner.buffer.size == 100
    assert learner.buffer.seen == sum(t.y_train.size for t in tasks)
    assert set(np.unique(learner.buffer.y)) == set(range(10))


@pytest.mark.parametrize(
    "cls,kwargs,match",
    [
        (Finetune, {"epochs": 0}, "agent.epochs"),
        (Finetune, {"batch_size": 2.5}, "agent.batch_size"),
        (Finetune, {"learning_rate": 0}, "agent.learning_rate"),
        (Joint, {"l2": -1.0}, "agent.l2"),
        (Replay, {"buffer_size": 0}, "agent.buffer_size"),
        (Replay, {"replay_batch_size": -3}, "agent.replay_batch_size"),
    ],
)
def test_bad_config(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(**kwargs)


def test_bad_calls():
    learner = Finetune()
    with pytest.raises(RuntimeError, match="before setup"):
        learner.learn(0, np.zeros((2, 64)), np.array([0, 1]))
    learner.setup(64, 10, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"\[n, 64\]"):
        learner.learn(0, np.zeros((2, 63)), np.array([0, 1]))
    with pytest.raises(ValueError, match="labels must lie in 0..9"):
        learner.learn(0, np.zeros((2, 64)), np.array([0, 10]))
    with pytest.raises(ValueError, match="shape"):
        learner.learn(0, np.zeros((2, 64)), np.array([0, 1, 1]))
    with pytest.raises(ValueError, match="finite"):
        learner.predict(np.full((1, 64), np.nan))
    with pytest.raises(ValueError, match="0..9"):
        learner.classes_for_task(0, [3, 11])
    with pytest.raises(TypeError, match="Generator"):
        learner.setup(64, 10, 0)
