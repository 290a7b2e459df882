"""The continual protocol drives a learner as Renate's evaluation prescribes: init evaluation first, task j's
training rows only at step j, every task evaluated after every update; checked with a spy learner on a
tagged toy domain (every row says which task, which split and which sample it is)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from owl_eval.datasets.classification import DigitsDomain
from owl_eval.errors import ConfigError
from owl_eval.evaluation import evaluation_for
from owl_eval.protocols.base import AgentOutputError, partial_record
from owl_eval.protocols.continual.domains import ContinualTask, SplitDigits
from owl_eval.protocols.continual.driver import ContinualDriver
from owl_eval.protocols.continual.metrics import SPECS
from owl_eval.protocols.continual.record import ContinualRecord

TRAIN_SIZES = (5, 7, 4)
TEST_SIZES = (3, 6, 5)
TRAIN, TEST = 0.0, 1.0


class TaggedDomain:
    """3 tasks; task t holds classes {2t, 2t+1}. Feature columns: task id, split (0 train / 1 test), row number."""

    name = "tagged"
    num_features = 3
    num_classes = 6

    def tasks(self, rng):
        out = []
        for t, (n_train, n_test) in enumerate(zip(TRAIN_SIZES, TEST_SIZES)):

            def split(n, tag, t=t):
                rows = np.arange(n)
                return np.column_stack([np.full(n, t), np.full(n, tag), rows]).astype(float), 2 * t + rows % 2

            X_tr, y_tr = split(n_train, TRAIN)
            X_te, y_te = split(n_test, TEST)
            out.append(ContinualTask(t, X_tr, y_tr, X_te, y_te, (2 * t, 2 * t + 1)))
        return out


def true_label(x_row) -> int:
    """The toy domain's label of a row, from its tags: 2 * task + row % 2."""
    return 2 * int(x_row[0]) + int(x_row[2]) % 2


class SpyLearner:
    """Records every call; predicts a label that depends on the row and on how many tasks it has learned,
    so different cells of A get different accuracies."""

    def __init__(self, crash_at_learn=None, crash_at_predict=None, with_classes_for_task=True):
        self.events = []
        self.learned = 0
        self.crash_at_learn, self.crash_at_predict = crash_at_learn, crash_at_predict
        if not with_classes_for_task:
            self.classes_for_task = None  # not callable: the protocol must not call it

    def setup(self, num_features, num_classes, rng):
        self.events.append(("setup", num_features, num_classes))
        self.num_classes = num_classes

    def classes_for_task(self, task_id, classes):
        self.events.append(("classes_for_task", task_id, tuple(classes)))

    def learn(self, task_id, X, y):
        if task_id == self.crash_at_learn:
            raise RuntimeError(f"spy crash at learn {task_id}")
        self.events.append(("learn", task_id, X.copy(), y.copy()))
        self.learned += 1

    def predict(self, X, task_id=None):
        if (
            self.crash_at_predict is not None
            and self.learned == self.crash_at_predict[0]
            and X[0, 0] == self.crash_at_predict[1]
        ):
            raise RuntimeError("spy crash in predict")
        pred = (X[:, 2].astype(int) * (self.learned + 1) + X[:, 0].astype(int)) % self.num_classes
        self.events.append(("predict", X.copy(), task_id, pred.copy()))
        return pred


def run(spy, scenario="class_incremental", seed=0, domain=None):
    proto = ContinualDriver(scenario=scenario)
    return proto, proto.run(domain=domain or TaggedDomain(), agent=spy, rng=np.random.default_rng(seed), progress=False)


def recount(event) -> tuple[int, float]:
    """(task evaluated, accuracy) of one predict event, counted by hand from the row tags."""
    _, X, _, pred = event
    correct = 0
    for x_row, p in zip(X, pred):
        correct += int(p == true_label(x_row))
    return int(X[0, 0]), correct / len(X)


def kinds(spy):
    return [e[0] for e in spy.events]


# ------------------------------------------------------------------------------------------ ordering
def test_init_evaluation_happens_before_any_learning():
    spy = SpyLearner()
    _, record = run(spy)
    first_learn = kinds(spy).index("learn")
    assert kinds(spy)[:first_learn] == ["setup"] + ["predict"] * 3
    init = [recount(e) for e in spy.events[1:first_learn]]
    assert [task for task, _ in init] == [0, 1, 2]
    np.testing.assert_array_equal(record.init_accuracy, [acc for _, acc in init])
    # with 0 tasks learned the spy predicts (row + task) % 6; task 0 test rows 0,1,2 -> 0,1,2 vs labels 0,1,0
    assert record.init_accuracy[0] == pytest.approx(2 / 3)


def test_learner_only_receives_task_js_training_rows_at_step_j():
    spy = SpyLearner()
    run(spy)
    learns = [e for e in spy.events if e[0] == "learn"]
    assert [e[1] for e in learns] == [0, 1, 2]
    for j, (_, task_id, X, y) in enumerate(learns):
        assert np.all(X[:, 0] == j) and np.all(X[:, 1] == TRAIN)  # task j's training rows, nothing else
        assert sorted(X[:, 2].astype(int).tolist()) == list(range(TRAIN_SIZES[j]))  # all of them, once
        assert [true_label(r) for r in X] == y.tolist()
        # everything before this learn call saw no row of a later task's training data
        before = spy.events[: spy.events.index(learns[j])]
        assert not any(e[0] == "learn" and e[1] > j for e in before)
    # predictions are only ever asked on test rows
    assert all(np.all(e[1][:, 1] == TEST) for e in spy.events if e[0] == "predict")


def test_every_cell_of_A_is_filled_and_equals_a_recount():
    spy = SpyLearner()
    _, record = run(spy)
    assert record.accuracy.shape == (3, 3) and record.complete
    assert np.all(np.isfinite(record.accuracy))
    expected = np.full((3, 3), np.nan)
    j = -1
    for e in spy.events:
        if e[0] == "learn":
            j = e[1]
        elif e[0] == "predict" and j >= 0:
            task, acc = recount(e)
            assert np.isnan(expected[j, task]), "each task is evaluated once per row"
            expected[j, task] = acc
    np.testing.assert_array_equal(record.accuracy, expected)
    # one hand-checked cell: after learning 2 tasks the spy predicts (3*row + 1) % 6 on task 1's test rows
    # 0..5 -> 1,4,1,4,1,4 against labels 2,3,2,3,2,3: none right
    assert record.accuracy[1, 1] == 0.0
    np.testing.assert_array_equal(record.num_instances, TEST_SIZES)
    assert record.task_classes == ((0, 1), (2, 3), (4, 5))


def test_class_incremental_withholds_the_task_id():
    spy = SpyLearner()
    proto, record = run(spy, "class_incremental")
    assert all(e[2] is None for e in spy.events if e[0] == "predict")
    assert "classes_for_task" not in kinds(spy)
    assert proto.tags() == {"scenario": "class_incremental"} and record.scenario == "class_incremental"


def test_task_incremental_tells_the_task_and_declares_classes_right_after_setup():
    spy = SpyLearner()
    proto, record = run(spy, "task_incremental")
    assert spy.events[1:4] == [
        ("classes_for_task", 0, (0, 1)),
        ("classes_for_task", 1, (2, 3)),
        ("classes_for_task", 2, (4, 5)),
    ]
    assert kinds(spy)[4] == "predict"
    for e in spy.events:
        if e[0] == "predict":
            assert e[2] == int(e[1][0, 0])  # told the task whose test rows these are
    assert proto.tags() == {"scenario": "task_incremental"}
    # a learner without classes_for_task is run all the same
    plain = SpyLearner(with_classes_for_task=False)
    run(plain, "task_incremental")
    assert "classes_for_task" not in kinds(plain)


def test_data_does_not_depend_on_the_learner():
    """The learner's generator is spawned apart from the data's: another learner sees the same tasks."""
    seen = {}
    for name in ("spy", "other"):
        spy = SpyLearner()
        run(spy, domain=SplitDigits(), seed=5)
        seen[name] = [e[2] for e in spy.events if e[0] == "learn"]
    for a, b in zip(seen["spy"], seen["other"]):
        np.testing.assert_array_equal(a, b)
    spy = SpyLearner()
    run(spy, domain=SplitDigits(), seed=6)
    assert not np.array_equal(seen["spy"][0], [e[2] for e in spy.events if e[0] == "learn"][0])


# ------------------------------------------------------------------------------------- bad output / config
class BadLearner(SpyLearner):
    def __init__(self, fault):
        super().__init__()
        self.fault = fault

    def predict(self, X, task_id=None):
        pred = super().predict(X, task_id)
        if self.learned == 1 and X[0, 0] == 2:
            if self.fault == "shape":
                return pred[:-1]
            if self.fault == "range":
                return pred + 6
            if self.fault == "fraction":
                return pred + 0.5
        return pred


@pytest.mark.parametrize(
    "fault, words",
    [
        ("shape", "predictions have shape (4,), expected (5,)"),
        ("range", "must lie in 0..5"),
        ("fraction", "whole class labels"),
    ],
)
def test_bad_predictions_name_the_task_and_the_step(fault, words):
    with pytest.raises(AgentOutputError) as info:
        run(BadLearner(fault))
    message = str(info.value)
    assert "task 2 (after learning task 0)" in message and words in message


def test_bad_config():
    with pytest.raises(
        ConfigError, match=r"protocol.scenario: expected one of \['class_incremental', 'task_incremental'\]"
    ):
        ContinualDriver(scenario="domain_incremental")
    with pytest.raises(ValueError, match="no baseline agent"):
        ContinualDriver().run(
            domain=TaggedDomain(),
            agent=SpyLearner(),
            baseline=SpyLearner(),
            rng=np.random.default_rng(0),
            progress=False,
        )


class OndLikeAgent:
    def fit(self, features, labels, *, num_known, rng): ...

    def predict_batch(self, batch): ...


@pytest.mark.parametrize(
    "kw, message",
    [
        (
            dict(baseline=SpyLearner()),
            "baseline (tests.runner.test_continual_protocol.SpyLearner): the continual protocol "
            "runs no baseline agent; choose baseline=none",
        ),
        (
            dict(agent=OndLikeAgent()),
            "agent (tests.runner.test_continual_protocol.OndLikeAgent) is not a continual learner: "
            "it has no learn(task_id, X, y) method; choose agent=continual/<option> "
            "(continual/finetune, continual/joint, continual/replay, continual/sklearn, continual/torch)",
        ),
        (
            dict(domain=DigitsDomain()),
            "domain (owl_eval.datasets.classification.DigitsDomain) is not a continual domain: it "
            "has no tasks(rng) method; choose domain=<option> (split_digits, permuted_digits, split_dataset, dataset_sequence)",
        ),
    ],
)
def test_check_rejects_a_baseline_and_parts_of_other_protocols_before_any_run(kw, message):
    parts = dict(domain=TaggedDomain(), agent=SpyLearner(), baseline=None) | kw
    with pytest.raises(ConfigError) as err:
        ContinualDriver().check(**parts)
    assert str(err.value) == message
    ContinualDriver().check(domain=SplitDigits(), agent=SpyLearner())  # the right parts pass


# ------------------------------------------------------------------------------------ interrupted runs
def plain_renate(A, b, n, t):
    """Renate's five metrics at step t, written out as loops (METRICS.md section 2)."""
    avg = sum(A[t][i] for i in range(t + 1)) / (t + 1)
    micro = sum(A[t][i] * n[i] for i in range(t + 1)) / sum(n[i] for i in range(t + 1))
    if t == 0:
        return {
            "average_accuracy": avg,
            "micro_average_accuracy": micro,
            "forgetting": 0.0,
            "backward_transfer": 0.0,
            "forward_transfer": 0.0,
        }
    fgt = sum(max(A[k][i] for k in range(t)) - A[t][i] for i in range(t)) / t
    bwt = sum(A[t][i] - A[i][i] for i in range(t)) / t
    fwt = sum(A[i - 1][i] - b[i] for i in range(1, t + 1)) / t
    return {
        "average_accuracy": avg,
        "micro_average_accuracy": micro,
        "forgetting": fgt,
        "backward_transfer": bwt,
        "forward_transfer": fwt,
    }


def test_crash_mid_sequence_keeps_the_completed_rows_and_their_metrics():
    full_spy = SpyLearner()
    _, full = run(full_spy)
    proto = ContinualDriver()
    with pytest.raises(RuntimeError, match="spy crash at learn 2") as err:
        proto.run(
            domain=TaggedDomain(), agent=SpyLearner(crash_at_learn=2), rng=np.random.default_rng(0), progress=False
        )
    partial = partial_record(err.value)
    assert partial.num_completed == 2 and not partial.complete
    np.testing.assert_array_equal(partial.accuracy, full.accuracy[:2])  # the spy is deterministic
    np.testing.assert_array_equal(partial.init_accuracy, full.init_accuracy)
    results = evaluation_for("continual").evaluate(partial)
    assert results["tasks_completed"] == 2
    A, b, n = partial.accuracy.tolist(), partial.init_accuracy.tolist(), TEST_SIZES
    for name, value in plain_renate(A, b, n, 1).items():
        assert results[name] == pytest.approx(value, abs=1e-12), name
        assert results.series[f"by_task/{name}"].steps.tolist() == [0, 1]
    for t in (0, 1):
        for name, value in plain_renate(A, b, n, t).items():
            assert results.series[f"by_task/{name}"].values[t] == pytest.approx(value, abs=1e-12)
    assert results.series["task/2/accuracy"].values.tolist() == [A[0][2], A[1][2]]


def test_crash_inside_a_row_drops_that_row_and_before_init_leaves_nothing():
    proto = ContinualDriver()
    with pytest.raises(RuntimeError, match="spy crash in predict") as err:
        # after learning 2 tasks, while evaluating task 1: row 1 is incomplete
        proto.run(
            domain=TaggedDomain(),
            agent=SpyLearner(crash_at_predict=(2, 1)),
            rng=np.random.default_rng(0),
            progress=False,
        )
    assert partial_record(err.value).num_completed == 1
    proto = ContinualDriver()
    with pytest.raises(RuntimeError) as err:
        proto.run(
            domain=TaggedDomain(),
            agent=SpyLearner(crash_at_predict=(0, 2)),
            rng=np.random.default_rng(0),
            progress=False,
        )
    assert partial_record(err.value) is None
    proto = ContinualDriver()
    with pytest.raises(RuntimeError) as err:
        proto.run(
            domain=TaggedDomain(), agent=SpyLearner(crash_at_learn=0), rng=np.random.default_rng(0), progress=False
        )
    empty = partial_record(err.value)
    assert empty.num_completed == 0 and empty.init_accuracy.shape == (3,)
    results = evaluation_for("continual").evaluate(empty)
    assert results["tasks_completed"] == 0
    for spec in SPECS:
        assert "no task was learned" in results[spec.name].reason


# ----------------------------------------------------------------------------------------------- files
def test_record_files_round_trip(tmp_path):
    _, record = run(SpyLearner())
    record.domain = "tagged"
    record.save(tmp_path)
    back = ContinualRecord.load(tmp_path)
    np.testing.assert_array_equal(back.accuracy, record.accuracy)
    np.testing.assert_array_equal(back.init_accuracy, record.init_accuracy)
    np.testing.assert_array_equal(back.num_instances, record.num_instances)
    assert (back.task_classes, back.scenario, back.domain) == (((0, 1), (2, 3), (4, 5)), "class_incremental", "tagged")
    renate = json.loads((tmp_path / "renate_results.json").read_text())
    assert renate["accuracy"] == record.accuracy.tolist()
    assert renate["accuracy_init"] == [record.init_accuracy.tolist()]
    assert renate["num_instances"] == [3, 6, 5]
    lines = (tmp_path / "accuracy_matrix.csv").read_text().splitlines()
    assert lines[0] == "after_task,task_0,task_1,task_2"
    assert [[float(v) for v in line.split(",")[1:]] for line in lines[1:]] == record.accuracy.tolist()
    with np.load(tmp_path / "continual_record.npz", allow_pickle=False) as data:  # no pickled objects inside
        assert set(data.files) >= {"accuracy", "init_accuracy", "num_instances"}
