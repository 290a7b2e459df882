"""OND experiments end to end into a real SQLite MLflow store, read back through MlflowClient."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from owl_eval.runner.api import run
from tests.fixtures.searchpath import TEST_AGENTS

PROJECT_ROOT = Path(__file__).resolve().parents[2]

ALWAYS = [
    "m1_mean_fn_cdt",
    "m2_cdt_pct",
    "detail/m2_cdt_pct_all",
    "m21_fp_pct",
    "top1",
    "top3",
    "detail/top1_pre",
    "detail/top1_post",
    "detail/top3_pre",
    "detail/top3_post",
    "m5_opti_top1",
    "m6_apti_top1",
    "auroc_novel",
    "detail/aupr_novel",
    "detail/fpr_at_95tpr",
    "oscr",
    "baseline/top1",
    "time/total_s",
]


def _only_run(client, experiment_name):
    exp = client.get_experiment_by_name(experiment_name)
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1
    return runs[0]


@pytest.mark.parametrize(
    "experiment_file, condition, nrp",
    [
        # the given condition's run from the command line: test_summary.py
        pytest.param("ond_given_detection", "given", "m4", marks=pytest.mark.slow),
        ("ond_system_detection", "system", "m3"),
    ],
)
def test_experiment_logs_everything(experiment_file, condition, nrp, experiment, client, tmp_path):
    returned = run(
        [f"+experiment={experiment_file}", *experiment["overrides"], "protocol.num_trials=6", "figures=true"],
        output_dir=tmp_path,
    )
    r = _only_run(client, experiment["name"])
    assert r.info.status == "FINISHED"
    metrics = r.data.metrics
    detection = {"m1_mean_fn_cdt", "m2_cdt_pct", "detail/m2_cdt_pct_all", "m21_fp_pct"}
    for name in ALWAYS + [f"{nrp}_nrp_top1", f"detail/{nrp}_nrp_top3"]:
        if condition == "given" and name in detection:
            # Told the red light, the agent's detection is not measured by design: not logged (metrics_na.json
            # keeps the reason).
            assert name not in metrics and f"na.{name}" not in r.data.tags, name
            na = json.loads(
                Path(client.download_artifacts(r.info.run_id, "metrics_na.json", str(tmp_path))).read_text()
            )
            assert "red light is given" in na[name.removeprefix("detail/")], name
        else:
            assert name in metrics, name
    assert not any(k.startswith(("m4_", "detail/m4_") if nrp == "m3" else ("m3_", "detail/m3_")) for k in metrics)
    assert metrics["top1"] == pytest.approx(returned["top1"])
    # Params are the flattened resolved config; tags name the parts.
    assert r.data.params["protocol.condition"] == condition
    assert r.data.params["protocol.num_trials"] == "6"
    assert r.data.params["agent._target_"] == "owl_eval.protocols.ond.agents.knn_novelty.KnnNoveltyAgent"
    tags = r.data.tags
    assert (tags["protocol"], tags["domain"], tags["agent"], tags["condition"], tags["seed"]) == (
        "ond",
        "digits",
        "ond/knn_novelty",
        condition,
        "0",
    )
    assert "git_commit" in tags
    # Per-batch series: 200 samples in batches of 10 = 20 steps.
    history = client.get_metric_history(r.info.run_id, "detail/top1_batch")
    assert sorted(m.step for m in history) == list(range(20))
    artifacts = {
        a.path for folder in ("", "plots", "config", "record") for a in client.list_artifacts(r.info.run_id, folder)
    }
    for path in (
        "plots/detection_timeline.png",
        "plots/top1_per_batch.png",
        "plots/detection_vs_threshold.png",
        "config/config.yaml",
        "record/ond_record.npz",
    ):
        assert path in artifacts, path
    local = client.download_artifacts(r.info.run_id, "record/ond_record.npz", str(tmp_path))
    from owl_eval.protocols.ond.record import OndRecord

    record = OndRecord.load(local)
    assert len(record.trials) == 6 and len(record.baseline_trials) == 6
    # The top-1 logged equals a plain recount from the saved record.
    per_trial = [np.mean(np.argmax(t.p_class, 1) == t.gt_class) for t in record.trials]
    assert metrics["top1"] == pytest.approx(np.mean(per_trial), abs=1e-12)


@pytest.mark.slow
def test_same_config_and_seed_give_identical_numbers(experiment, client, tmp_path):
    first = run(
        [
            "+experiment=ond_system_detection",
            *experiment["overrides"],
            "protocol.num_trials=5",
            "seed=7",
            "figures=false",
        ],
        output_dir=tmp_path / "a",
    )
    second = run(
        [
            "+experiment=ond_system_detection",
            *experiment["overrides"],
            "protocol.num_trials=5",
            "seed=7",
            "figures=false",
        ],
        output_dir=tmp_path / "b",
    )
    strip = lambda d: {k: v for k, v in d.items() if not k.startswith("time/")}  # noqa: E731
    assert strip(first) == strip(second)
    third = run(
        [
            "+experiment=ond_system_detection",
            *experiment["overrides"],
            "protocol.num_trials=5",
            "seed=8",
            "figures=false",
        ],
        output_dir=tmp_path / "c",
    )
    assert strip(third) != strip(first)


def test_crashing_agent_leaves_failed_run_with_completed_trials(experiment, client, tmp_path):
    from tests.fixtures.agents.ond.crashing import AgentCrash

    with pytest.raises(AgentCrash):
        run(
            [
                "+experiment=ond_system_detection",
                *experiment["overrides"],
                TEST_AGENTS,
                "agent=ond/crashing",
                "agent.crash_at_trial=3",
                "protocol.num_trials=6",
            ],
            output_dir=tmp_path,
        )
    r = _only_run(client, experiment["name"])
    assert r.info.status == "FAILED"
    assert r.data.tags["partial_record"] == "true"
    assert "deliberate crash" in r.data.tags["error"]
    assert "top1" in r.data.metrics and "protocol.num_trials" in r.data.params
    local = client.download_artifacts(r.info.run_id, "record/ond_record.npz", str(tmp_path))
    from owl_eval.protocols.ond.record import OndRecord

    assert len(OndRecord.load(local).trials) == 3  # trials 0, 1, 2 completed before the crash
    assert "error.txt" in {a.path for a in client.list_artifacts(r.info.run_id)}


def test_unknown_option_lists_the_valid_ones():
    from owl_eval.runner.config.groups import unknown_option_message, unknown_sweep_choice

    args = ["-m", "+experiment=ond_system_detection", "agent=ond/closed_world,ond/nope", "seed=0"]
    message = unknown_option_message("agent/ond/nope", args)
    assert message.startswith("unknown agent option 'ond/nope' in 'agent=ond/closed_world,ond/nope'")
    assert "ond/knn_novelty" in message and "ond/closed_world" in message
    assert "ond_given_detection" in unknown_option_message("experiment/ond_typo", ["+experiment=ond_typo"])
    assert unknown_sweep_choice(args[1:]) == message  # a sweep's list is read with Hydra's override parser
    assert unknown_sweep_choice(["+experiment=ond_system_detection", "agent=ond/knn_novelty", "seed=1"]) is None


def test_test_only_agents_are_not_user_options_but_the_test_searchpath_adds_them():
    from owl_eval.paths import group_options

    assert not [o for o in group_options("agent") if "crashing" in o]

    from tests.inprocess import run_module  # python -m owl_eval, in the test process

    def error(*args):
        proc = run_module(
            "owl_eval", ["progress=false", "tracking.uri=sqlite:///:memory:", *args], cwd=PROJECT_ROOT, timeout=120
        )
        return proc.stderr.strip().splitlines()[-1] if proc.returncode else None

    assert "unknown agent option 'ond/crashing'" in error("agent=ond/crashing", "--cfg", "job")
    assert error(TEST_AGENTS, "agent=ond/crashing", "--cfg", "job") is None  # the test searchpath adds it
    nope = error("-m", TEST_AGENTS, "agent=ond/crashing,ond/nope")
    assert nope.startswith("error: unknown agent option 'ond/nope'") and "ond/crashing" in nope
    help_text = run_module("owl_eval", ["--help"], cwd=PROJECT_ROOT, timeout=120).stdout
    assert "agent/ond: closed_world, knn_novelty" in help_text and "crashing" not in help_text


def test_cli_rejects_unknown_option_with_one_line():
    from tests.inprocess import run_module  # python -m owl_eval, in the test process

    proc = run_module("owl_eval", ["domain=imagenet"], cwd=PROJECT_ROOT, timeout=60)
    assert proc.returncode != 0
    assert "unknown domain option 'imagenet'" in proc.stderr and "digits" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_unknown_metric_name_lists_valid_names(experiment, tmp_path):
    with pytest.raises(ValueError, match=r"metrics.names: unknown metric\(s\) \['m9'\].*valid names: .*m2_cdt_pct"):
        run(
            [
                "+experiment=ond_system_detection",
                *experiment["overrides"],
                "protocol.num_trials=3",
                "metrics.names=[top1,m9]",
                "figures=false",
            ],
            output_dir=tmp_path,
        )


def test_metric_selection_keeps_only_listed(experiment, client, tmp_path):
    run(
        [
            "+experiment=ond_system_detection",
            *experiment["overrides"],
            "protocol.num_trials=3",
            "metrics.names=[top1,m2_cdt_pct]",
            "figures=false",
        ],
        output_dir=tmp_path,
    )
    names = set(_only_run(client, experiment["name"]).data.metrics)
    assert {"top1", "m2_cdt_pct", "baseline/top1"} <= names
    assert "oscr" not in names and "m21_fp_pct" not in names


@pytest.mark.slow
def test_multirun_parent_children_and_failed_propagation(mlflow_store, client, tmp_path):
    from tests.inprocess import run_module

    name = f"sweep-test-{os.getpid()}"
    args = [
        "-m",
        "+experiment=ond_system_detection",
        TEST_AGENTS,
        "agent=ond/closed_world,ond/crashing",
        "seed=0,1",
        f"tracking.uri={mlflow_store['uri']}",
        f"tracking.artifact_location={mlflow_store['artifacts']}",
        f"experiment_name={name}",
        "protocol.num_trials=4",
        "figures=false",
        "progress=false",
        f"hydra.sweep.dir={tmp_path}/sweep",
    ]
    proc = run_module(
        "owl_eval",
        args,
        cwd=PROJECT_ROOT,
        env={"MLFLOW_DISABLE_TELEMETRY": "true"},
        unset=("OWL_EVAL_PARENT_RUN_ID",),
        timeout=300,
    )  # in the test process (tests/inprocess.py)
    assert proc.returncode != 0, "a failing job must fail the sweep command"
    exp = client.get_experiment_by_name(name)
    runs = client.search_runs([exp.experiment_id])
    parents = [r for r in runs if r.data.tags.get("owl_eval.kind") == "sweep"]
    children = [r for r in runs if r.data.tags.get("owl_eval.kind") == "job"]
    assert len(parents) == 1
    parent = parents[0]
    assert parent.info.status == "FAILED"
    # The basic launcher runs jobs in order: closed_world seed 0 and 1 finish, then crashing seed 0 fails.
    assert all(c.data.tags["mlflow.parentRunId"] == parent.info.run_id for c in children)
    statuses = sorted((c.data.tags["agent"], c.data.tags["seed"], c.info.status) for c in children)
    assert ("ond/closed_world", "0", "FINISHED") in statuses and ("ond/closed_world", "1", "FINISHED") in statuses
    assert ("ond/crashing", "0", "FAILED") in statuses
