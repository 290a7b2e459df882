"""A metric is added in one file (owl_eval.metrics.declare): one decorated function, computed by the protocol's
scoring and declared to the registry, with nothing else to edit.

tests/fixtures/added_metrics.py adds two OND metrics, two continual metrics and one lifelong-RL metric; :func:`added_metrics` registers
them for one test only. Expected values are counted by hand in the comments. The second part checks the
mechanism itself (order, N/A rules, families, the live ``SPECS``) on a set of its own.
"""

from __future__ import annotations

import importlib
import math
import sys
from contextlib import contextmanager

import numpy as np
import pytest

from owl_eval.evaluation import evaluation_for, registry
from owl_eval.formats.l2logger import EpisodeLog
from owl_eval.metrics.declare import MetricSet, NAIf
from owl_eval.metrics.keys import MetricKey
from owl_eval.metrics.results import NA, MetricSpec
from owl_eval.protocols.continual.metrics import CONTINUAL, continual_metrics
from owl_eval.protocols.continual.record import ContinualRecord
from owl_eval.protocols.lifelong_rl.metrics import LIFELONG_RL, evaluate_log
from owl_eval.protocols.lifelong_rl.record import RLRecord
from owl_eval.protocols.ond.metrics import OND, SPECS, OndTrial, program_metrics
from owl_eval.protocols.ond.record import OndRecord
from owl_eval.tracking.keys import mlflow_key

ADDED = "tests.fixtures.added_metrics"
ADDED_NAMES = {
    "ond": ("mean_unknown_score", "top1_gain"),
    "continual": ("learning_accuracy", "learning_gain"),
    "lifelong_rl": ("final_eval_perf",),
}


def _forget_declarations() -> None:
    # the registry caches each protocol's declarations on first use: a test that registers a metric after that
    # (or removes one) must drop them, or the next test would see a stale list
    registry.forget()


@contextmanager
def added_metrics():
    """tests/fixtures/added_metrics.py imported, its registrations undone on exit."""
    _forget_declarations()
    sys.modules.pop(ADDED, None)
    try:
        with OND.scoped(), CONTINUAL.scoped(), LIFELONG_RL.scoped():
            yield importlib.import_module(ADDED)
    finally:
        sys.modules.pop(ADDED, None)
        _forget_declarations()


@pytest.fixture
def added():
    with added_metrics() as module:
        yield module


# ---- two OND trials (K = 2 known classes; column 0 = unknown) -----------------------------------------------
# trial a: red light at 2; agent's rank of the true class: 0, 1 (0.5 > 0.3), 0, 1 (0.4 > 0.3; the tie with
# column 2 goes to the lower column 0) -> top-1 hits 1, 0, 1, 0
AGENT_A = [[0.1, 0.7, 0.2], [0.2, 0.5, 0.3], [0.6, 0.3, 0.1], [0.3, 0.4, 0.3]]
# trial b: no novelty; ranks 0, 2 -> hits 1, 0
AGENT_B = [[0.2, 0.3, 0.5], [0.4, 0.1, 0.5]]


def _one_hot(columns):
    return np.eye(3)[columns]


def ond_trials(agent: bool):
    gt_a, gt_b = [1, 2, 0, 0], [2, 1]
    if agent:
        p_a, p_b = AGENT_A, AGENT_B
    else:  # the baseline: sure of the true class on the first two samples of a, of a wrong one elsewhere -> 2 hits
        p_a, p_b = _one_hot([1, 2, 1, 1]), _one_hot([0, 2])
    return [
        OndTrial(np.array(gt_a), np.array([0, 0, 1, 1]), 2, np.array([0.1, 0.2, 0.9, 0.9]), np.array(p_a), 2, "a"),
        OndTrial(np.array(gt_b), np.array([0, 0]), None, np.array([0.0, 0.0]), np.array(p_b), 2, "b"),
    ]


def ond_record(condition="system") -> OndRecord:
    return OndRecord(
        condition=condition,
        known_classes=np.array([1, 2]),
        novel_classes=np.array([3]),
        class_names=("unknown", "one", "two"),
        trials=ond_trials(agent=True),
        baseline_trials=ond_trials(agent=False),
    )


# mean of p_class[:, 0] over the 6 samples: (0.1 + 0.2 + 0.6 + 0.3 + 0.2 + 0.4) / 6 = 1.8 / 6
MEAN_UNKNOWN = 0.3
# agent 3 hits of 6, baseline 2 of 6
TOP1_GAIN = 3 / 6 - 2 / 6


def test_an_added_ond_metric_is_computed_by_the_scoring(added):
    evaluation = evaluation_for("ond")
    results = evaluation.score(ond_record(), evaluation.options({}), figures=False).results
    assert results["mean_unknown_score"] == pytest.approx(MEAN_UNKNOWN, abs=1e-12)
    assert results["top1_gain"] == pytest.approx(TOP1_GAIN, abs=1e-12)
    # the baseline scored on its own reports what needs no baseline, and not the comparison with itself
    assert results["baseline.mean_unknown_score"] == pytest.approx(1 / 6, abs=1e-12)  # p_0 = 1 on 1 sample of 6
    assert "baseline.top1_gain" not in results
    # reported after the built-in metrics (its module is not one of OND's): the built-in order is untouched
    assert list(results.values)[list(results.values).index("oscr") + 1 :][:2] == ["mean_unknown_score", "top1_gain"]


def test_an_added_ond_metric_keeps_its_na_rules(added):
    given = program_metrics(ond_trials(True), ond_trials(False), condition="given")
    assert given["mean_unknown_score"] == NA("a diagnostic of the system condition only")
    alone = program_metrics(ond_trials(True))
    assert alone["top1_gain"] == NA("needs a baseline agent's trials (baseline=None)")
    assert alone["mean_unknown_score"] == pytest.approx(MEAN_UNKNOWN, abs=1e-12)


def test_an_added_ond_metric_is_declared(added):
    assert registry.spec_for("ond", "mean_unknown_score").direction == "none"
    assert registry.spec_for("ond", "top1_gain").direction == "maximize"
    assert registry.spec_for("ond", "top1_gain").bounds == (-1.0, 1.0)
    assert registry.spec_for("ond", MetricKey("mean_unknown_score", agent="baseline")).name == "mean_unknown_score"
    assert mlflow_key(MetricKey("top1_gain"), "ond") == "detail/top1_gain"
    # metrics.names accepts it with no other change (no YAML, no options field)
    assert evaluation_for("ond").options({"names": ["top1_gain"]}).names == ["top1_gain"]


# ---- a continual record of 3 tasks -------------------------------------------------------------------------
A = np.array([[0.9, 0.1, 0.2], [0.7, 0.8, 0.3], [0.6, 0.5, 0.7]])
B = np.array([0.1, 0.2, 0.3])
# learning_accuracy: diag 0.9, 0.8, 0.7 -> means 0.9, 0.85, 0.8
LEARNING_ACCURACY = [0.9, 0.85, 0.8]
# learning_gain: diag - b = 0.8, 0.6, 0.4 -> means 0.8, 0.7, 0.6
LEARNING_GAIN = [0.8, 0.7, 0.6]


def test_an_added_continual_metric_is_computed_by_the_scoring(added):
    record = ContinualRecord("class_incremental", A, B, np.array([10.0, 10.0, 10.0]), ((1,), (2,), (3,)))
    evaluation = evaluation_for("continual")
    results = evaluation.score(record, evaluation.options({}), figures=False).results
    assert results["learning_accuracy"] == pytest.approx(0.8, abs=1e-12)
    assert results["learning_gain"] == pytest.approx(0.6, abs=1e-12)
    np.testing.assert_allclose(results.series["by_task/learning_accuracy"].values, LEARNING_ACCURACY, atol=1e-12)
    np.testing.assert_array_equal(results.series["by_task/learning_gain"].steps, [0, 1, 2])
    np.testing.assert_allclose(results.series["by_task/learning_gain"].values, LEARNING_GAIN, atol=1e-12)
    # without b, the metric that needs it is N/A with the reason the continual set gives for a missing b
    without_b = continual_metrics(A)
    assert without_b["learning_gain"] == NA("init_accuracy (accuracy on every task before any update) was not given")
    assert without_b["learning_accuracy"] == pytest.approx(0.8, abs=1e-12)


def test_an_added_continual_metric_is_declared(added):
    spec = registry.spec_for("continual", "learning_accuracy")
    assert spec.direction == "maximize" and spec.bounds == (0.0, 1.0)
    by_task = MetricKey("learning_gain", axis="task")
    assert registry.spec_for("continual", by_task).name == "learning_gain"
    assert registry.is_series("continual", by_task)
    assert mlflow_key(by_task, "continual") == "detail/by_task/learning_gain"
    assert mlflow_key(MetricKey("learning_gain"), "continual") == "detail/learning_gain"


# ---- a lifelong-RL log of 3 tasks (block, type, task, rewards) ---------------------------------------------
RL_BLOCKS = [
    ("train", "a_x", [1.0, 2.0, 3.0]),
    ("test", "a_x", [4.0, 6.0]),
    ("train", "b_y", [2.0, 2.0]),
    ("test", "a_x", [7.0, 9.0]),
    ("test", "c_z", [3.0, 5.0]),  # c_z is evaluated, never trained
]
# final_eval_perf, without normalisation: a_x's last evaluation (7 + 9) / 2 = 8, c_z's (3 + 5) / 2 = 4, b_y none
# -> lifetime mean over the two tasks that have one: 6
FINAL_EVAL = {"a_x": 8.0, "c_z": 4.0}


def rl_log() -> EpisodeLog:
    lengths = [len(rewards) for _, _, rewards in RL_BLOCKS]
    return EpisodeLog.from_columns(
        block_num=np.repeat(np.arange(len(RL_BLOCKS)), lengths),
        block_type=np.repeat(np.array([b[0] for b in RL_BLOCKS], dtype=object), lengths),
        task_name=np.repeat(np.array([b[1] for b in RL_BLOCKS], dtype=object), lengths),
        reward=np.concatenate([b[2] for b in RL_BLOCKS]),
    )


def test_an_added_lifelong_rl_metric_is_computed_per_task_by_the_scoring(added):
    evaluation = evaluation_for("lifelong_rl")
    results = evaluation.score(RLRecord(log=rl_log()), evaluation.options({"normalization": "none"}), figures=False)
    results = results.results
    for task, value in FINAL_EVAL.items():
        assert results[MetricKey("final_eval_perf", task=task)] == pytest.approx(value, abs=1e-12)
    # the rule's {task} is the task's name
    assert results.na["task/b_y/final_eval_perf"] == "task b_y has no evaluation block"
    assert results["final_eval_perf"] == pytest.approx(6.0, abs=1e-12)
    # after the built-in metrics, in a task's values (after the transfer values) and in the lifetime values
    evaluated = evaluate_log(rl_log(), normalization="none")
    assert list(evaluated["tasks"]["a_x"])[-2:] == ["backward_transfer_contrast", "final_eval_perf"]
    assert list(evaluated["lifetime"])[-2:] == ["time_to_learn", "final_eval_perf"]
    # lifetime aggregation as the built-in metrics: the median over tasks with aggregation=median; every task N/A
    # gives the first task's reason
    assert evaluate_log(rl_log(), normalization="none", aggregation="median")["lifetime"]["final_eval_perf"] == 6.0
    trained_only = EpisodeLog.from_columns(
        block_num=np.array([0, 0]), block_type="train", task_name="a_x", reward=np.array([1.0, 2.0])
    )
    assert evaluate_log(trained_only)["lifetime"]["final_eval_perf"] == NA("task a_x has no evaluation block")


def test_an_added_lifelong_rl_metric_is_declared(added):
    spec = registry.spec_for("lifelong_rl", "final_eval_perf")
    assert spec.direction == "maximize" and spec.protocol == "lifelong_rl"
    per_task = MetricKey("final_eval_perf", task="a_x")
    assert registry.spec_for("lifelong_rl", per_task).name == "final_eval_perf"
    assert mlflow_key(MetricKey("final_eval_perf"), "lifelong_rl") == "detail/final_eval_perf"
    assert evaluation_for("lifelong_rl").options({"names": ["final_eval_perf"]}).names == ["final_eval_perf"]


def test_registration_ends_with_its_scope():
    declared_before = [s.name for s in SPECS]
    with added_metrics():
        assert registry.spec_for("ond", "top1_gain") is not None
        assert "learning_accuracy" in continual_metrics(A)
        assert "final_eval_perf" in evaluate_log(rl_log())["lifetime"]
    for protocol, names in ADDED_NAMES.items():
        for name in names:
            assert registry.spec_for(protocol, name) is None, name
    assert [s.name for s in SPECS] == declared_before
    assert "top1_gain" not in program_metrics(ond_trials(True), ond_trials(False))
    assert "learning_accuracy" not in continual_metrics(A)
    evaluated = evaluate_log(rl_log())
    assert "final_eval_perf" not in evaluated["lifetime"] and "final_eval_perf" not in evaluated["tasks"]["a_x"]
    assert ADDED not in sys.modules


def test_a_name_is_declared_once_per_protocol():
    with OND.scoped(), pytest.raises(ValueError, match=r"already declares \['top1'\]"):
        OND.metric("top1", higher_is_better=True)(lambda flat: 0.0)
    assert [e.fn.__name__ for e in OND].count("<lambda>") == 0


# ---- the mechanism on a set of its own ---------------------------------------------------------------------


def _in_module(fn, module):
    fn.__module__ = module
    return fn


def test_metrics_come_module_by_module_in_the_sets_order():
    toy = MetricSet("toy", order=("pkg.first", "pkg.second"))
    # registered second-module first, and one from a module the set does not list
    toy.metric("c", higher_is_better=True)(_in_module(lambda: 3.0, "pkg.second"))
    toy.metric("x", higher_is_better=True)(_in_module(lambda: 9.0, "elsewhere"))
    toy.metric("a", higher_is_better=True)(_in_module(lambda: 1.0, "pkg.first"))
    toy.metric("b", higher_is_better=True)(_in_module(lambda: 2.0, "pkg.first"))
    assert [s.name for s in toy.specs] == ["a", "b", "c", "x"]
    assert [(e.name, values) for e, values, _ in toy.compute({})] == [
        ("a", {"a": 1.0}),
        ("b", {"b": 2.0}),
        ("c", {"c": 3.0}),
        ("x", {"x": 9.0}),
    ]


def test_missing_inputs_and_rules_make_na_without_computing():
    toy = MetricSet("toy", missing={"w": "no weights were given"})
    calls = []

    @toy.metric("weighted", higher_is_better=None, needs=("y", "w"), na=(NAIf("y is empty", lambda y, **_: not y),))
    def weighted(y, w):
        calls.append("weighted")
        return sum(a * b for a, b in zip(y, w)) / sum(w)

    @toy.family(
        toy.spec("low", False, (0.0, 1.0)),
        toy.spec("high", True, (0.0, 1.0)),
        toy.spec("curve", True, series=True),
        needs=("y",),
        na=(NAIf("too short", lambda y: len(y) < 2), NAIf("negative", lambda y: min(y) < 0, names=("low",))),
    )
    def bounds(y):
        calls.append("bounds")
        return {"low": min(y), "high": max(y), "curve": list(y)}

    def run(**inputs):
        return {name: value for _, values, _ in toy.compute(inputs) for name, value in values.items()}

    # 0.5 * 1 + 1.0 * 3 over 4 = 0.875
    assert run(y=[0.5, 1.0], w=[1, 3]) == {"weighted": 0.875, "low": 0.5, "high": 1.0, "curve": [0.5, 1.0]}
    calls.clear()
    assert run(y=[0.5, 1.0], w=None)["weighted"] == NA("no weights were given")
    assert run(y=[], w=[1])["weighted"] == NA("y is empty")
    # a family's rule makes every declared name that is not a series N/A, or the rule's own names
    assert run(y=[0.5], w=[1]) == {"weighted": 0.5, "low": NA("too short"), "high": NA("too short")}
    assert run(y=[-1.0, 0.5], w=[1, 1])["low"] == NA("negative")
    # computed only where no input was missing and no rule held: bounds with w=None (it does not read w), weighted
    # on [0.5] and on [-1.0, 0.5]
    assert calls == ["bounds", "weighted", "weighted"]
    with pytest.raises(ValueError, match=r"needs \['w'\]"):
        list(toy.compute({"y": [1.0]}))


def test_specs_are_live_and_scoped():
    toy = MetricSet(
        "toy",
        derived=lambda entries: [
            MetricSpec(f"{s.name}@1", "toy", s.higher_is_better) for e in entries for s in e.specs
        ],
    )
    specs = toy.specs
    fn = toy.metric("m", higher_is_better=False, bounds=(0.0, math.inf), description="d")(lambda: 0.0)
    assert [(s.name, s.direction, s.bounds) for s in specs] == [
        ("m", "minimize", (0.0, math.inf)),
        ("m@1", "minimize", (-math.inf, math.inf)),
    ]
    with toy.scoped():
        toy.metric("n", higher_is_better=True)(lambda: 1.0)
        assert len(specs) == 4 and specs[1].name == "n"
    assert [s.name for s in specs] == ["m", "m@1"]
    toy.remove(fn)
    assert len(specs) == 0 and list(toy) == []
    with pytest.raises(ValueError, match="declared for 'other'"):
        toy.family(MetricSpec("z", "other", True))(lambda: {})
