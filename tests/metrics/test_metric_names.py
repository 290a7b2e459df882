"""Every name a protocol can report has exactly one declaration, found again from its MLflow key.

Two parts, like sklearn's ``test_common.py``: (1) for every protocol of the registry, every declared name and
every name made from it (``baseline.``, ``@threshold``, ``task/<task>/``, ``by_task/``, per-K, series,
``time/``) resolves to that declaration, by name and by MLflow key; (2) each protocol's ``evaluate`` on a
small real record reports only declared names, and every finite value lies within its declared bounds.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from owl_eval.errors import ConfigError
from owl_eval.evaluation import evaluation_for
from owl_eval.evaluation.registry import (
    base_name,
    is_series_key,
    metric_key,
    spec_for,
    spec_for_key,
    specs,
)
from owl_eval.evaluation.selection import check_names, select
from owl_eval.metrics.results import MetricResults

PROTOCOLS = sorted(("ond", "continual", "trajectory", "lifelong_rl"))  # the shipped protocols
ODD_TASKS = ("cartpole_default", "frozen lake@v1", "3")  # task parts are data: any characters


def variants(protocol: str, name: str) -> list[str]:
    """The names a protocol makes from a declared name (each must resolve to the same declaration)."""
    out = [name]
    if protocol == "ond":
        out.append(f"baseline.{name}")
    if protocol == "continual":
        out += [f"by_task/{name}", *(f"task/{t}/{name}" for t in ODD_TASKS)]
    if protocol == "lifelong_rl":
        out += [f"task/{t}/{name}" for t in ODD_TASKS]
    return out


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_declared_name_survives_the_round_trip(protocol):
    declared = specs(protocol)
    assert declared and all(s.protocol == protocol for s in declared.values())
    keys = {metric_key(n) for n in declared}
    assert len(keys) == len(declared), "two declared names share one MLflow key"
    for name, spec in declared.items():
        assert spec.direction in ("maximize", "minimize", "none") and spec.bounds[0] <= spec.bounds[1], name
        for reported in variants(protocol, name):
            assert spec_for(protocol, reported) is spec, reported
            assert spec_for_key(protocol, metric_key(reported)) is spec, (reported, metric_key(reported))


def test_names_that_were_lost_on_the_way_back():
    # fpr_at_95tpr once became "fpr@95tpr" and then "fpr"; a threshold variant keeps its own declaration
    assert spec_for_key("ond", "fpr_at_95tpr").name == "fpr_at_95tpr"
    assert spec_for_key("ond", "fpr_at_95tpr").direction == "minimize"
    assert spec_for_key("ond", "baseline.fpr_at_95tpr").name == "fpr_at_95tpr"
    assert spec_for_key("ond", "m2_cdt_pct_at_0.3").name == "m2_cdt_pct@0.3"
    assert spec_for_key("ond", "unknown_score_f1_post_at_0.175").name == "unknown_score_f1_post@0.175"
    for protocol, key in (
        ("ond", "fpr"),
        ("ond", "m2_cdt_pct_at_0.42"),
        ("continual", "baseline.forgetting"),
        ("trajectory", "min_ade_0_marginal"),
        ("lifelong_rl", "task/a/b/saturation"),
        ("ond", "time/"),
    ):
        assert spec_for_key(protocol, key) is None, key


@pytest.mark.parametrize("k", [1, 5, 20, 50, 100])
def test_trajectory_per_k_names_for_any_k(k):
    for template in (
        "ade_{k}_marginal",
        "fde_{k}_joint",
        "min_ade_{k}_marginal",
        "min_fde_{k}_joint",
        "miss_rate_{k}_joint",
    ):
        name = template.format(k=k)
        spec = spec_for("trajectory", name)
        assert spec is not None and spec.name == name and spec.direction == "minimize", name
        assert spec_for_key("trajectory", metric_key(name)) == spec


def test_series_are_recognised():
    assert is_series_key("ond", "top1_batch") and spec_for_key("ond", "top1_batch").name == "top1"
    assert (
        is_series_key("ond", "m21_fp_pct_vs_threshold")
        and spec_for_key("ond", "m21_fp_pct_vs_threshold").direction == "minimize"
    )
    assert is_series_key("continual", "by_task/forgetting") and is_series_key("continual", "task/2/accuracy")
    assert is_series_key("trajectory", "displacement_by_step_marginal") and is_series_key("lifelong_rl", "reward")
    assert not is_series_key("ond", "top1") and not is_series_key("lifelong_rl", "task/a/saturation")


# -- (2) what evaluate really reports ----------------------------------------------------------------------
@functools.cache
def ond_results() -> list[MetricResults]:
    from owl_eval.domains.classification import DigitsDomain
    from owl_eval.protocols.ond.agents.closed_world import ClosedWorldAgent
    from owl_eval.protocols.ond.agents.knn_novelty import KnnNoveltyAgent
    from owl_eval.protocols.ond.driver import OndProtocol

    out = []
    for condition, agent in (
        ("system", KnnNoveltyAgent()),
        ("given", KnnNoveltyAgent()),
        ("system", ClosedWorldAgent()),
    ):
        protocol = OndProtocol(
            condition=condition,
            known_classes=6,
            num_trials=4,
            trials_without_novelty=1,
            pre_novelty=20,
            post_novelty=30,
            batch_size=10,
        )
        record = protocol.run(
            domain=DigitsDomain(),
            agent=agent,
            baseline=ClosedWorldAgent(),
            rng=np.random.default_rng(3),
            progress=False,
        )
        out.append(
            evaluation_for("ond").evaluate(record, {"threshold": 0.5, "asymptotic_width": 20, "threshold_grid": True})
        )
    return out


def continual_results() -> list[MetricResults]:

    from owl_eval.protocols.continual.record import ContinualRecord

    A = np.array([[0.9, 0.1, 0.2], [0.6, 0.8, 0.3], [0.5, 0.7, 0.95]])
    full = ContinualRecord(
        "class_incremental", A, np.array([0.1, 0.15, 0.05]), np.array([30, 50, 20]), ((0, 1), (2, 3), (4, 5))
    )
    partial = ContinualRecord(
        "class_incremental", A[:0], np.array([0.1, 0.15, 0.05]), np.array([30, 50, 20]), ((0, 1), (2, 3), (4, 5))
    )
    return [evaluation_for("continual").evaluate(full), evaluation_for("continual").evaluate(partial)]


def trajectory_results() -> list[MetricResults]:
    from owl_eval.protocols.trajectory.agents.cv_noise import ConstantVelocityNoisePredictor
    from owl_eval.protocols.trajectory.domains.crowd_sim import CrowdSimDomain
    from owl_eval.protocols.trajectory.driver import TrajectoryProtocol

    record = TrajectoryProtocol(num_preds=30).run(
        domain=CrowdSimDomain(num_train_scenes=2, num_test_scenes=5, max_agents=4),
        agent=ConstantVelocityNoisePredictor(),
        rng=np.random.default_rng(4),
        progress=False,
    )
    return [evaluation_for("trajectory").evaluate(record, {"k_values": [5, 20]})]


def lifelong_rl_results() -> list[MetricResults]:
    pytest.importorskip("gymnasium")
    from owl_eval.formats.l2logger import EpisodeLog
    from owl_eval.protocols.lifelong_rl.record import RLRecord

    rng = np.random.default_rng(5)
    blocks = [
        ("test", "cartpole_default", 3),
        ("train", "cartpole_default", 20),
        ("test", "frozen lake@v1", 3),
        ("train", "frozen lake@v1", 20),
        ("test", "cartpole_default", 3),
        ("train", "cartpole_default", 20),
        ("test", "cartpole_default", 3),
        ("test", "frozen lake@v1", 3),
    ]

    def log_of(blocks):
        cols = {"block_num": [], "block_type": [], "task_name": [], "reward": []}
        for i, (kind, task, n) in enumerate(blocks):
            cols["block_num"] += [i] * n
            cols["block_type"] += [kind] * n
            cols["task_name"] += [task] * n
            cols["reward"] += list(np.cumsum(rng.random(n)))
        return EpisodeLog.from_columns(
            block_num=np.array(cols["block_num"]),
            block_type=np.array(cols["block_type"], dtype=object),
            task_name=np.array(cols["task_name"], dtype=object),
            reward=np.array(cols["reward"]),
        )

    record = RLRecord(
        log=log_of(blocks),
        ste_logs={"cartpole_default": log_of([("train", "cartpole_default", 30)])},
        ste_status={"cartpole_default": "reused", "frozen lake@v1": "missing"},
        timings={"syllabus_s": 1.5},
    )
    return [evaluation_for("lifelong_rl").evaluate(record, {})]


RECORDS = {
    "ond": ond_results,
    "continual": continual_results,
    "trajectory": trajectory_results,
    "lifelong_rl": lifelong_rl_results,
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_reported_name_is_declared_and_within_bounds(protocol):
    assert set(RECORDS) == set(PROTOCOLS)  # a new protocol needs a record here
    for results in RECORDS[protocol]():
        names = [*results.values, *results.na, *results.series]
        assert names
        for name in names:
            spec = spec_for(protocol, name)
            assert spec is not None, f"{protocol}: {name!r} is reported but not declared"
            assert spec_for_key(protocol, metric_key(name)) is not None, name
            assert is_series_key(protocol, metric_key(name)) == (name in results.series), name
            assert check_names(protocol, [base_name(name, protocol)]) == [base_name(name, protocol)], name
        for name, value in results.values.items():
            low, high = spec_for(protocol, name).bounds
            assert math.isfinite(value) and low <= value <= high, (name, value, (low, high))
        for name, series in results.series.items():
            low, high = spec_for(protocol, name).bounds
            finite = series.values[np.isfinite(series.values)]
            assert ((finite >= low) & (finite <= high)).all(), name
        assert all(reason.strip() for reason in results.na.values())


def test_constant_by_construction_values_are_not_numbers():
    system, given, closed = ond_results()
    # the closed-world baseline's novelty score is 0 everywhere: no AUROC/AP/FPR of it (the OND evaluation
    # leaves the baseline's N/A values out), nor of the closed-world agent itself
    for results in (system, given):
        for name in ("baseline.auroc_novel", "baseline.aupr_novel", "baseline.fpr_at_95tpr"):
            assert name not in results.values, name
    assert "is 0 for all" in closed.na["auroc_novel"] and "auroc_novel" in system.values
    for results in (system, given):
        assert "unknown_score_precision_pre" in results.na and "unknown_score_accuracy_pre" in results.values
    assert "m2_cdt_pct" in system.values and "m2_cdt_pct" in given.na and "red light is given" in given.na["m2_cdt_pct"]
    # the closed-world agent against the closed-world baseline: M5/M6 by construction
    assert "the agent is the baseline" in closed.na["m5_opti_top1"] and "m6_apti_top1" in closed.na
    assert "m5_opti_top1" in system.values


# -- metrics.names before a run exists --------------------------------------------------------------------
def test_check_names_validates_against_declarations_only():
    assert check_names("ond", None) is None
    assert check_names("ond", ["top1", "fpr_at_95tpr", "m2_cdt_pct@0.3", "baseline.top1", "top1_batch"]) == [
        "top1",
        "fpr_at_95tpr",
        "m2_cdt_pct@0.3",
        "baseline.top1",
        "top1_batch",
    ]
    assert check_names("trajectory", ["min_ade_5_marginal"]) == ["min_ade_5_marginal"]
    assert check_names("lifelong_rl", ("saturation", "ste/missing", "time/syllabus_s")) == [
        "saturation",
        "ste/missing",
        "time/syllabus_s",
    ]
    cases = [
        ("ond", "top1", "expected a list of metric names or null, got str"),
        ("ond", 3, "expected a list of metric names or null, got int"),
        ("ond", [], "the list is empty"),
        ("ond", ["top1", 7], r"metrics.names\[1\]: expected a metric name"),
        ("ond", ["top1", "m9"], r"unknown metric\(s\) \['m9'\] for protocol 'ond'; valid names: .*'m2_cdt_pct'"),
        ("ond", ["fpr"], r"unknown metric\(s\) \['fpr'\]"),
        ("continual", ["baseline.forgetting"], "unknown metric"),
        ("nope", ["top1"], "protocol 'nope' is not installed"),
    ]
    for protocol, names, message in cases:
        with pytest.raises(ConfigError, match=message) as info:
            check_names(protocol, names)
        assert str(info.value).startswith("metrics.names"), str(info.value)


def test_select_keeps_a_name_and_the_names_made_from_it():
    results = MetricResults(
        values={
            "top1": 0.5,
            "baseline.top1": 0.4,
            "m2_cdt_pct@0.3": 50.0,
            "m2_cdt_pct": 40.0,
            "fpr_at_95tpr": 0.2,
            "oscr": 0.7,
        }
    )
    kept = select(results, "ond", ["top1", "m2_cdt_pct@0.3", "fpr_at_95tpr"])
    assert kept.values == {"top1": 0.5, "baseline.top1": 0.4, "m2_cdt_pct@0.3": 50.0, "fpr_at_95tpr": 0.2}
    assert select(results, "ond", ["m2_cdt_pct"]).values == {"m2_cdt_pct@0.3": 50.0, "m2_cdt_pct": 40.0}
    with pytest.raises(ConfigError, match="metrics.names: unknown metric"):
        select(results, "ond", ["m9"])
