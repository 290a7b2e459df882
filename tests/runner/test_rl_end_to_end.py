"""RL syllabus experiments end to end into the session's SQLite MLflow store, read back via MlflowClient."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gymnasium")

from owl_eval.formats.l2logger import read_log  # noqa: E402
from owl_eval.metrics.keys import MetricKey  # noqa: E402
from owl_eval.runner.api import run  # noqa: E402
from tests.fixtures.searchpath import TEST_AGENTS  # noqa: E402

# 2 cycles (pinned: the default is 3) x 3 variants x (30 train + 3 variants x 3 test) = 234 episodes
FROZEN_SMALL = [
    "protocol.syllabus.generate.cycles=2",
    "protocol.syllabus.generate.train_episodes=30",
    "protocol.syllabus.generate.test_episodes=3",
    "protocol.ste.episodes=20",
]
CART_SMALL = [
    "protocol.syllabus.generate.train_episodes=8",
    "protocol.syllabus.generate.test_episodes=2",
    "protocol.syllabus.generate.cycles=1",
    "protocol.ste.episodes=6",
    "figures=false",
]


def key(name) -> str:
    """The MLflow key of a reported lifelong-RL metric (a plain name or a MetricKey): headline plain, timings as they
    are, the rest detail/."""
    from owl_eval.tracking.keys import mlflow_key

    return mlflow_key(MetricKey.of(name), "lifelong_rl")


def _only_run(client, name):
    runs = client.search_runs([client.get_experiment_by_name(name).experiment_id])
    assert len(runs) == 1
    return runs[0]


def _snapshot(root: Path) -> dict:
    return {
        p.relative_to(root).as_posix(): (p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def test_frozenlake_syllabus_logs_metrics_series_figures_and_the_log(experiment, client, tmp_path):
    returned = run(
        [
            "+experiment=lifelong_rl_frozenlake_syllabus",
            *experiment["overrides"],
            "figures=true",
            *FROZEN_SMALL,
            f"protocol.ste.dir={tmp_path / 'ste'}",
        ],
        output_dir=tmp_path / "out",
    )
    r = _only_run(client, experiment["name"])
    assert r.info.status == "FINISHED"
    m = r.data.metrics
    for name in (
        "saturation",
        "time_to_saturation",
        "normalized_integral",
        "recovery_time",
        "avg_train_perf",
        "avg_eval_perf",
        "perf_maintenance_mrlep",
        "forward_transfer_ratio",
        "ste_rel_perf",
        "sample_efficiency",
        MetricKey("saturation", task="frozenlake_mirrored"),
        MetricKey("total_s", timing=True),
    ):
        assert key(name) in m, name
    assert m["detail/episodes"] == 234 and m["detail/ste/computed"] == 3
    assert m["detail/saturation"] == pytest.approx(returned["saturation"])
    assert r.data.tags["protocol"] == "lifelong_rl" and r.data.tags["syllabus_kind"] == "CL"
    assert r.data.tags["ste"] == "computed"
    assert r.data.params["protocol.syllabus.generate.train_episodes"] == "30"
    # the reward per episode as a series, step = episode number
    history = sorted(client.get_metric_history(r.info.run_id, "detail/reward"), key=lambda x: x.step)
    assert [h.step for h in history] == list(range(234))
    # the l2logger directory is the record artifact, readable by read_log with one row per episode
    arts = client.list_artifacts(r.info.run_id, "record/l2log")
    assert len(arts) == 1
    local = client.download_artifacts(r.info.run_id, arts[0].path, str(tmp_path / "dl"))
    log = read_log(local)
    assert len(log) == 234
    assert [h.value for h in history] == log["reward"].tolist()
    # frozenlake rewards are 1 at the goal else 0; the block layout is the template's
    assert set(np.unique(log["reward"])) <= {0.0, 1.0}
    assert (log["block_type"] == "train").sum() == 2 * 3 * 30
    plots = {a.path for a in client.list_artifacts(r.info.run_id, "plots")}
    assert plots == {"plots/learning_curve.png", "plots/agent_vs_ste.png", "plots/transfer_matrix.png"}
    assert {a.path for a in client.list_artifacts(r.info.run_id, "record/ste")} == {
        f"record/ste/frozenlake_{v}" for v in ("plain", "mirrored", "slippery")
    }


@pytest.mark.slow
def test_ste_experiment_then_syllabus_reuses_without_recomputing(experiment, client, tmp_path):
    ste_dir = tmp_path / "ste"
    common = [*experiment["overrides"], *CART_SMALL, f"protocol.ste.dir={ste_dir}"]
    run(["+experiment=lifelong_rl_cartpole_ste", *common], output_dir=tmp_path / "a")
    before = _snapshot(ste_dir)
    assert len([k for k in before if k.endswith("ste_info.json")]) == 3
    run(
        ["+experiment=lifelong_rl_cartpole_syllabus", *common, "experiment_name=" + experiment["name"] + "-syl"],
        output_dir=tmp_path / "b",
    )
    assert _snapshot(ste_dir) == before  # nothing rewritten: same files, same mtimes, same bytes
    ste_run = _only_run(client, experiment["name"])
    syl_run = _only_run(client, experiment["name"] + "-syl")
    assert ste_run.data.tags["rl_mode"] == "ste" and ste_run.data.tags["ste"] == "computed"
    assert ste_run.data.metrics["detail/episodes"] == 3 * 6 and ste_run.data.metrics["detail/ste/computed"] == 3
    assert syl_run.data.tags["ste"] == "reused" and syl_run.data.tags["ste.not_stored"] == "none"
    assert syl_run.data.metrics["detail/ste/reused"] == 3 and syl_run.data.metrics["detail/ste/computed"] == 0
    assert "ste_rel_perf" in syl_run.data.metrics


def test_missing_ste_in_skip_mode_is_na_with_the_command(experiment, client, tmp_path):
    run(
        [
            "+experiment=lifelong_rl_cartpole_syllabus",
            *experiment["overrides"],
            *CART_SMALL,
            f"protocol.ste.dir={tmp_path / 'empty'}",
            "protocol.ste.missing=skip",
        ],
        output_dir=tmp_path / "o",
    )
    r = _only_run(client, experiment["name"])
    assert r.info.status == "FINISHED" and r.data.tags["ste"] == "missing"
    assert "ste_rel_perf" not in r.data.metrics and r.data.metrics["detail/ste/missing"] == 3
    reason = r.data.tags["na.ste_rel_perf"]
    assert "no STE reference for cartpole_" in reason and "protocol.mode=ste" in reason
    assert not (tmp_path / "empty").exists() or not any((tmp_path / "empty").rglob("ste_info.json"))


def test_frozenlake_ste_experiment_runs(experiment, client, tmp_path):
    run(
        [
            "+experiment=lifelong_rl_frozenlake_ste",
            *experiment["overrides"],
            *FROZEN_SMALL,
            "figures=false",
            f"protocol.ste.dir={tmp_path / 'ste'}",
        ],
        output_dir=tmp_path / "o",
    )
    r = _only_run(client, experiment["name"])
    assert r.info.status == "FINISHED" and r.data.metrics["detail/episodes"] == 3 * 20
    assert "detail/task/frozenlake_slippery/saturation" in r.data.metrics


def test_crashing_agent_leaves_a_failed_run_with_the_logged_episodes(experiment, client, tmp_path):
    from tests.fixtures.agents.lifelong_rl.crashing import AgentCrash

    with pytest.raises(AgentCrash):
        run(
            [
                "+experiment=lifelong_rl_frozenlake_syllabus",
                *experiment["overrides"],
                *FROZEN_SMALL,
                TEST_AGENTS,
                "agent=lifelong_rl/crashing",
                "agent.crash_at_episode=45",
                f"protocol.ste.dir={tmp_path / 'ste'}",
            ],
            output_dir=tmp_path / "o",
        )
    r = _only_run(client, experiment["name"])
    assert r.info.status == "FAILED" and r.data.tags["partial_record"] == "true"
    # block 0: 30 train, blocks 1-3: 3 x 3 test, block 4: the 45th training episode is its 15th -> 14 logged
    assert r.data.metrics["detail/episodes"] == 30 + 9 + 14
    arts = client.list_artifacts(r.info.run_id, "record/l2log")
    log = read_log(client.download_artifacts(r.info.run_id, arts[0].path, str(tmp_path / "dl")))
    assert len(log) == 53


@pytest.mark.parametrize("name, kind", [("lifelong_rl_ant_a", "ANT_A"), ("lifelong_rl_ant_b", "ANT_B")])
@pytest.mark.slow
def test_ant_experiments_interleave_two_task_families(name, kind, experiment, client, tmp_path):
    small = ["protocol.ste.episodes=10", "figures=false"]
    if name == "lifelong_rl_ant_b":
        small += [
            "protocol.syllabus.generate.train_episodes=10",
            "protocol.syllabus.generate.test_episodes=2",
            "protocol.syllabus.generate.cycles=1",
        ]
    run(
        [f"+experiment={name}", *experiment["overrides"], *small, f"protocol.ste.dir={tmp_path / 'ste'}"],
        output_dir=tmp_path / "out",
    )
    r = _only_run(client, experiment["name"])
    assert r.info.status == "FINISHED" and r.data.tags["syllabus_kind"] == kind
    (scenario,) = client.list_artifacts(r.info.run_id, "record/l2log")
    log = read_log(client.download_artifacts(r.info.run_id, scenario.path, str(tmp_path / "dl")))
    tasks = {str(t).split("_")[0] for t in np.unique(log["task_name"])}
    assert tasks == {"cartpole", "frozenlake"}
    # Evaluation blocks are mandatory in ANT syllabi: every task is evaluated before any training.
    first_train = int(np.argmax(log["block_type"] == "train"))
    assert {str(t).split("_")[0] for t in log["task_name"][:first_train]} == {"cartpole", "frozenlake"}
    # Transfer between the two families is defined (train one, evaluate the other).
    assert "forward_transfer_ratio" in r.data.metrics or "na.forward_transfer_ratio" in r.data.tags
