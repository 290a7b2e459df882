"""Scoring apart from running: evaluations looked up by protocol name, figure data computed once by the
evaluation (values checked by hand), plots that draw exactly those values, sources that name their protocol."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from types import SimpleNamespace

import numpy as np
import pytest

from owl_eval.errors import ConfigError
from owl_eval.evaluation import Scored, evaluation_for
from owl_eval.evaluation.options import options_class
from owl_eval.metrics.results import MetricResults, Series
from owl_eval.protocols.ond.metrics import OndTrial

PROTOCOLS = ("ond", "continual", "trajectory", "lifelong_rl")


def test_an_unknown_protocol_name_lists_the_four():
    with pytest.raises(ConfigError) as err:
        evaluation_for("ond2")
    head, _, known = str(err.value).partition("; known protocols: ")
    assert head == "protocol 'ond2' is not installed"
    assert {"ond", "continual", "trajectory", "lifelong_rl"} <= set(known.split(", "))


@pytest.mark.parametrize("name", PROTOCOLS)
def test_each_protocol_has_its_evaluation_with_its_typed_options(name):
    evaluation = evaluation_for(name)
    assert evaluation.name == name
    assert type(evaluation.options({})) is options_class(name)
    assert options_class(name).__module__ == f"owl_eval.protocols.{name}.options"
    with pytest.raises(ConfigError, match=r"^metrics.bogus: unknown key"):
        evaluation.options({"bogus": 1})


def test_no_source_module_defines_a_protocol():
    """Sources return (protocol name, record, tags); none subclasses Protocol (a run() that only raises)."""
    import owl_eval.sources
    from owl_eval.protocols.base import ProtocolDriver as Protocol

    for info in pkgutil.iter_modules(owl_eval.sources.__path__):
        module = importlib.import_module(f"owl_eval.sources.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            assert not issubclass(cls, Protocol), f"owl_eval.sources.{info.name}.{cls.__name__}"


# ------------------------------------------------------------------------------------------------ OND


def trial(novel, unknown, trial_id="t"):
    novel = np.asarray(novel)
    unknown = np.asarray(unknown, dtype=float)
    p_class = np.column_stack([unknown, 1 - unknown])
    first = int(np.argmax(novel)) if novel.any() else None
    return OndTrial(
        gt_class=np.where(novel == 1, 0, 1),
        gt_novel=novel,
        red_light=first,
        p_world_changed=unknown,
        p_class=p_class,
        batch_size=2,
        trial_id=trial_id,
    )


def test_ond_roc_points_by_hand():
    from owl_eval.protocols.ond.evaluation import roc_points

    # scores 0.9 (novel), 0.6 (known), 0.4 (novel), 0.1 (known), taken from the top:
    fpr, tpr = roc_points([trial([1, 0], [0.9, 0.6]), trial([1, 0], [0.4, 0.1])])
    assert fpr.tolist() == [0.0, 0.0, 0.5, 0.5, 1.0]
    assert tpr.tolist() == [0.0, 0.5, 0.5, 1.0, 1.0]
    assert roc_points([trial([0, 0], [0.2, 0.3])]) is None  # no novel sample: no curve


def test_ond_figures_draw_the_figure_data_and_nothing_else():
    from owl_eval.protocols.ond.figures import ond_figures

    data = {
        "threshold": 0.3,
        "timeline": [
            {
                "trial_id": "a",
                "p_world_changed": np.array([0.1, 0.7]),
                "p_unknown": np.array([0.2, 0.4]),
                "red_light": 1,
            }
        ],
        "detection_vs_threshold": {"threshold": np.array([0.2, 0.5]), "m2_cdt_pct": np.array([50.0, 25.0])},
        "roc": [
            {"label": "agent", "fpr": np.array([0.0, 1.0]), "tpr": np.array([0.0, 1.0]), "auroc_key": "auroc_novel"}
        ],
    }
    results = MetricResults(
        values={"auroc_novel": 0.5}, series={"top1_batch": Series(np.arange(2), np.array([0.5, 1.0]))}
    )
    figures = ond_figures(data, results)
    assert figures["top1_per_batch"].axes[0].lines[0].get_ydata().tolist() == [0.5, 1.0]
    timeline = figures["detection_timeline"].axes[0].lines
    assert timeline[0].get_ydata().tolist() == [0.1, 0.7] and timeline[1].get_ydata().tolist() == [0.2, 0.4]
    grid = figures["detection_vs_threshold"].axes[0].lines[0]
    assert grid.get_xdata().tolist() == [0.2, 0.5] and grid.get_ydata().tolist() == [50.0, 25.0]
    roc = figures["novelty_roc"].axes[0]
    assert roc.lines[1].get_label() == "agent (AUROC 0.500)"


# ----------------------------------------------------------------------------------------- trajectory


def test_trajectory_error_by_step_and_its_constant_velocity_reference_by_hand():
    from owl_eval.protocols.trajectory.evaluation import error_by_step

    # one agent at (0, 0) then (1, 0): constant velocity goes on to (2, 0), (3, 0); the truth is (2, 0), (3, 1)
    history = np.array([[[[0.0, 0.0], [1.0, 0.0]]]])  # [S, A, N_I, 2]
    truth = np.array([[[[[2.0, 0.0], [3.0, 1.0]]]]])  # [S, 1, A, N_O, 2]
    preds = np.array([[[[[2.0, 0.0], [3.0, 0.0]]], [[[2.0, 1.0], [3.0, 1.0]]]]])  # [S, 2, A, N_O, 2]
    record = SimpleNamespace(
        path_history=history, path_true=truth, path_pred=preds, dt=0.4, pred_steps=np.ones((1, 1, 2), bool)
    )
    data = error_by_step(record)
    assert data["constant_velocity"].tolist() == [0.0, 1.0]  # |(3, 0) - (3, 1)| at step 2
    assert data["best"].tolist() == [0.0, 0.0]  # prediction 0 at step 1, prediction 1 at step 2
    assert data["horizon"] == pytest.approx([0.4, 0.8]) and data["num_preds"] == 2


def test_trajectory_class_reliability_bins_by_hand():
    from owl_eval.protocols.trajectory.evaluation import class_reliability

    record = SimpleNamespace(
        p_true=np.array([[1.0, 0.0], [0.0, 1.0]]),
        p_pred=np.array([[0.8, 0.2], [0.4, 0.6]]),
        class_names=np.array(["go", "stop"]),
    )
    data = class_reliability(record, bins=2)
    # probabilities sorted 0.2, 0.4 | 0.6, 0.8 with truths 0, 0 | 1, 1
    assert data["predicted"] == pytest.approx([0.3, 0.7]) and data["observed"].tolist() == [0.0, 1.0]
    assert data["class_names"] == ["go", "stop"]


# ----------------------------------------------------------------------------------------- lifelong RL


def test_lifelong_rl_log_is_evaluated_once_for_metrics_and_figures(monkeypatch):
    """The figures draw what score computed: evaluate_log runs once (the plots used to run it again)."""
    from owl_eval.protocols.lifelong_rl import evaluation as lifelong_rl
    from tests.metrics.test_lifelong_rl import HAND, make_log

    calls = []
    original = lifelong_rl.evaluate_log
    monkeypatch.setattr(lifelong_rl, "evaluate_log", lambda *a, **k: calls.append(1) or original(*a, **k))
    record = SimpleNamespace(
        log=make_log(HAND), mode="syllabus", ste_logs={}, ste_reasons={}, ste_status={}, timings={}
    )
    evaluation = evaluation_for("lifelong_rl")
    options = evaluation.options({"normalization": "none"})
    scored = evaluation.score(record, options)
    figures = evaluation.figures(scored, options)
    assert calls == [1] and set(figures) == {"learning_curve", "transfer_matrix"}
    assert scored.results.values["forward_transfer_ratio"] == pytest.approx(1.25)  # tests/metrics/test_lifelong_rl.py
    curve = scored.figure_data["learning_curve"]
    assert curve["reward"].tolist() == record.log["reward"].astype(float).tolist()


def test_a_log_without_a_reward_column_has_no_figures():
    evaluation = evaluation_for("lifelong_rl")
    assert evaluation.figures(Scored(MetricResults()), evaluation.options({})) == {}
