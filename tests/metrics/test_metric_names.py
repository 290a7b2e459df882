"""Every name a protocol can report has exactly one declaration, found from the fields of its MetricKey.

Two parts, like sklearn's ``test_common.py``: (1) for every protocol of the registry, every declared name and
every key made from it (``baseline``, a threshold, a task, a series axis, per-K, ``time/``) resolves to that
declaration by its fields; (2) each protocol's ``evaluate`` on a small real record reports only declared keys, and
every finite value lies within its declared bounds.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

from owl_eval.errors import ConfigError
from owl_eval.evaluation import evaluation_for
from owl_eval.evaluation.registry import declared_key, is_series, spec_for, specs
from owl_eval.evaluation.selection import check_names, select, selection_base
from owl_eval.metrics.keys import MetricKey
from owl_eval.metrics.results import MetricResults, Series
from owl_eval.tracking.keys import logged_key_entry, metric_key

PROTOCOLS = sorted(("ond", "continual", "trajectory", "lifelong_rl"))  # the shipped protocols
ODD_TASKS = ("cartpole_default", "frozen lake@v1", "3")  # task parts are data: any characters but '/'


def variants(protocol: str, key: MetricKey) -> list[MetricKey]:
    """The keys a protocol makes from a declared key (each must resolve to the same declaration)."""
    out = [key]
    if protocol == "ond":
        out.append(key.with_fields(agent="baseline"))
        if key.threshold is None:
            out += [key.with_fields(axis="batch"), key.with_fields(agent="baseline", axis="threshold")]
    if protocol == "continual":
        out += [key.with_fields(axis="task"), *(key.with_fields(task=t) for t in ODD_TASKS)]
    if protocol == "lifelong_rl":
        out += [key.with_fields(task=t) for t in ODD_TASKS]
    return out


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_every_declared_name_is_found_from_the_fields_of_its_keys(protocol):
    declared = specs(protocol)
    assert declared and all(s.protocol == protocol for s in declared.values())
    keys = {metric_key(str(declared_key(s))) for s in declared.values()}
    assert len(keys) == len(declared), "two declared names share one MLflow key"
    for name, spec in declared.items():
        assert spec.direction in ("maximize", "minimize", "none") and spec.bounds[0] <= spec.bounds[1], name
        assert declared_key(spec) == name
        for key in variants(protocol, declared_key(spec)):
            assert spec_for(protocol, key) is spec, key.fields()


def test_declarations_found_by_fields_never_by_a_neighbour():
    fpr = spec_for("ond", MetricKey("fpr_at_95tpr"))
    assert fpr.name == "fpr_at_95tpr" and fpr.direction == "minimize"
    assert spec_for("ond", MetricKey("fpr_at_95tpr", agent="baseline")) is fpr
    point = spec_for("ond", MetricKey("m2_cdt_pct", threshold=0.3))
    assert point.name == "m2_cdt_pct@0.3" and point is not spec_for("ond", MetricKey("m2_cdt_pct"))
    assert spec_for("ond", MetricKey("unknown_score_f1_post", threshold=0.175)).name == "unknown_score_f1_post@0.175"
    assert spec_for("ond", MetricKey("m2_cdt_pct", axis="threshold")) is spec_for("ond", MetricKey("m2_cdt_pct"))
    for protocol, key in (
        ("ond", MetricKey("fpr")),
        ("ond", MetricKey("m2_cdt_pct", threshold=0.42)),  # not a point of the grid
        ("continual", MetricKey("top1")),
        ("trajectory", MetricKey("min_ade_marginal")),
        ("trajectory", MetricKey("min_xde_{k}_marginal", k=5)),
    ):
        assert spec_for(protocol, key) is None, key.fields()
    assert spec_for("ond", MetricKey("anything", timing=True)).direction == "none"
    for bad in (
        dict(name="min_ade_{k}_marginal", k=0),
        dict(name="min_ade_{k}_marginal"),
        dict(name="saturation", task="a/b"),
        dict(name="m2_cdt_pct@0.3"),
        dict(name="top1", agent="other"),
        dict(name="top1", axis="episode"),
        dict(name="top1", threshold=0.3, axis="threshold"),
        dict(name="total_s", timing=True, agent="baseline"),
        dict(name=""),
    ):
        with pytest.raises(ValueError):
            MetricKey(**bad)


@pytest.mark.parametrize("k", [1, 5, 20, 50, 100])
def test_trajectory_per_k_names_for_any_k(k):
    for template in (
        "ade_{k}_marginal",
        "fde_{k}_joint",
        "min_ade_{k}_marginal",
        "min_fde_{k}_joint",
        "miss_rate_{k}_joint",
    ):
        key = MetricKey(template, k=k)
        spec = spec_for("trajectory", key)
        assert spec is not None and spec.name == key == template.format(k=k) and spec.direction == "minimize", key


def test_series_are_recognised():
    top1_batch = MetricKey("top1", axis="batch")
    assert is_series("ond", top1_batch) and spec_for("ond", top1_batch).name == "top1"
    m21 = MetricKey("m21_fp_pct", axis="threshold")
    assert is_series("ond", m21) and spec_for("ond", m21).direction == "minimize"
    assert is_series("continual", MetricKey("forgetting", axis="task"))
    assert is_series("continual", MetricKey("accuracy", task=2))
    assert is_series("trajectory", MetricKey("displacement_by_step_marginal"))
    assert is_series("lifelong_rl", MetricKey("reward"))
    assert not is_series("ond", MetricKey("top1")) and not is_series("lifelong_rl", MetricKey("saturation", task="a"))


# -- (2) what evaluate really reports ----------------------------------------------------------------------
@functools.cache
def ond_results() -> list[MetricResults]:
    from owl_eval.datasets.classification import DigitsDomain
    from owl_eval.protocols.ond.agents.closed_world import ClosedWorldAgent
    from owl_eval.protocols.ond.agents.knn_novelty import KnnNoveltyAgent
    from owl_eval.protocols.ond.driver import OndDriver

    out = []
    for condition, agent in (
        ("system", KnnNoveltyAgent()),
        ("given", KnnNoveltyAgent()),
        ("system", ClosedWorldAgent()),
    ):
        protocol = OndDriver(
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
    from owl_eval.protocols.trajectory.driver import TrajectoryDriver

    record = TrajectoryDriver(num_preds=30).run(
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
        assert names and all(isinstance(name, MetricKey) for name in names)
        for name in names:
            spec = spec_for(protocol, name)
            assert spec is not None, f"{protocol}: {name!r} is reported but not declared"
            assert is_series(protocol, name) == (name in results.series), name
            entry = logged_key_entry(name, protocol, series=name in results.series)
            assert entry.declared and entry.direction == spec.direction and entry.series == is_series(protocol, name)
            base = str(selection_base(name))
            assert check_names(protocol, [base]) == [base], name
            assert check_names(protocol, [str(name)]) == [name], name  # a reported name may be listed as it is
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
        ("ond", ["detail/top1_pre"], "unknown metric"),  # an MLflow key is not a metric's name
        ("trajectory", ["min_ade_0_marginal"], "unknown metric"),
        ("lifelong_rl", ["task/a/b/saturation"], "unknown metric"),
        ("nope", ["top1"], "protocol 'nope' is not installed"),
    ]
    for protocol, names, message in cases:
        with pytest.raises(ConfigError, match=message) as info:
            check_names(protocol, names)
        assert str(info.value).startswith("metrics.names"), str(info.value)


def test_select_keeps_a_name_and_the_names_made_from_it():
    results = MetricResults(
        values={
            MetricKey("top1"): 0.5,
            MetricKey("top1", agent="baseline"): 0.4,
            MetricKey("m2_cdt_pct", threshold=0.3): 50.0,
            MetricKey("m2_cdt_pct"): 40.0,
            MetricKey("fpr_at_95tpr"): 0.2,
            MetricKey("oscr"): 0.7,
        },
        series={
            MetricKey("top1", axis="batch"): Series([0], [0.5]),
            MetricKey("top1", agent="baseline", axis="batch"): Series([0], [0.4]),
        },
    )
    kept = select(results, "ond", ["top1", "m2_cdt_pct@0.3", "fpr_at_95tpr"])
    assert kept.values == {"top1": 0.5, "baseline.top1": 0.4, "m2_cdt_pct@0.3": 50.0, "fpr_at_95tpr": 0.2}
    assert not kept.series  # a series is its own name
    assert select(results, "ond", ["m2_cdt_pct"]).values == {"m2_cdt_pct@0.3": 50.0, "m2_cdt_pct": 40.0}
    assert list(select(results, "ond", ["top1_batch"]).series) == ["top1_batch", "baseline.top1_batch"]
    assert list(select(results, "ond", ["baseline.top1_batch"]).series) == ["baseline.top1_batch"]
    continual = MetricResults(
        values={MetricKey("forgetting"): 0.1},
        series={
            MetricKey("forgetting", axis="task"): Series([0], [0.1]),
            MetricKey("accuracy", task=3): Series([0], [1]),
        },
    )
    assert list(select(continual, "continual", ["forgetting"]).series) == ["by_task/forgetting"]
    assert list(select(continual, "continual", ["task/3/accuracy"]).series) == ["task/3/accuracy"]
    with pytest.raises(ConfigError, match="metrics.names: unknown metric"):
        select(results, "ond", ["m9"])
