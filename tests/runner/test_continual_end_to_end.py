"""Continual experiments end to end into a real SQLite MLflow store, read back through MlflowClient, with
every logged number recomputed by plain loops from the downloaded record."""

from __future__ import annotations

import json

import pytest

from owl_eval.runner.api import run
from tests.fixtures.searchpath import TEST_AGENTS

METRICS = (
    "average_accuracy",
    "micro_average_accuracy",
    "forgetting",
    "backward_transfer",
    "forward_transfer",
    "forgetting_avalanche",
    "forgetting_since_learned",
    "forward_transfer_avalanche",
)
FAST = ["agent.epochs=2"]


def key(name: str) -> str:
    """The MLflow key of a reported continual metric: headline plain, the rest under detail/."""
    from owl_eval.metrics.keys import MetricKey
    from owl_eval.tracking.keys import mlflow_key

    return mlflow_key(MetricKey(name), "continual")


def _only_run(client, experiment_name):
    exp = client.get_experiment_by_name(experiment_name)
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1
    return runs[0]


def plain_renate(A, b, n, t):
    """Renate's five metrics at step t as loops over the Renate results dict (METRICS.md section 2)."""
    out = {
        "average_accuracy": sum(A[t][i] for i in range(t + 1)) / (t + 1),
        "micro_average_accuracy": sum(A[t][i] * n[i] for i in range(t + 1)) / sum(n[: t + 1]),
    }
    if t == 0:
        return out | {"forgetting": 0.0, "backward_transfer": 0.0, "forward_transfer": 0.0}
    return out | {
        "forgetting": sum(max(A[k][i] for k in range(t)) - A[t][i] for i in range(t)) / t,
        "backward_transfer": sum(A[t][i] - A[i][i] for i in range(t)) / t,
        "forward_transfer": sum(A[i - 1][i] - b[i] for i in range(1, t + 1)) / t,
    }


def _download_results(client, run_id, tmp_path):
    path = client.download_artifacts(run_id, "record/renate_results.json", str(tmp_path))
    with open(path) as f:
        results = json.load(f)
    return results["accuracy"], results["accuracy_init"][0], results["num_instances"]


@pytest.mark.parametrize(
    "experiment_file, domain, num_tasks",
    [("continual_split_digits", "split_digits", 5), ("continual_permuted_digits", "permuted_digits", 5)],
)
def test_experiment_logs_everything(experiment_file, domain, num_tasks, experiment, client, tmp_path):
    returned = run(
        [f"+experiment={experiment_file}", *experiment["overrides"], *FAST, "figures=true"], output_dir=tmp_path
    )
    r = _only_run(client, experiment["name"])
    assert r.info.status == "FINISHED"
    tags, metrics = r.data.tags, r.data.metrics
    assert (tags["protocol"], tags["domain"], tags["agent"], tags["scenario"], tags["baseline"]) == (
        "continual",
        domain,
        "continual/finetune",
        "class_incremental",
        "none",
    )
    assert r.data.params["agent.epochs"] == "2" and r.data.params["protocol.scenario"] == "class_incremental"

    A, b, n = _download_results(client, r.info.run_id, tmp_path)
    T = len(A)
    assert T == num_tasks and all(len(row) == T for row in A) and len(b) == T == len(n)
    expected = plain_renate(A, b, n, T - 1)
    for name in METRICS:
        assert key(name) in metrics, name
        history = client.get_metric_history(r.info.run_id, f"detail/by_task/{name}")
        assert sorted(m.step for m in history) == list(range(T)), name
        assert [m.step for m in client.get_metric_history(r.info.run_id, key(name))] == [0]  # the final value alone
    for name, value in expected.items():
        assert metrics[key(name)] == pytest.approx(value, abs=1e-12), name
        assert returned[name] == metrics[key(name)]
        by_step = {m.step: m.value for m in client.get_metric_history(r.info.run_id, f"detail/by_task/{name}")}
        for t in range(T):
            assert by_step[t] == pytest.approx(plain_renate(A, b, n, t)[name], abs=1e-12), (name, t)
    for i in range(T):  # each task's accuracy over the sequence: column i of A
        history = sorted(
            (m.step, m.value) for m in client.get_metric_history(r.info.run_id, f"detail/task/{i}/accuracy")
        )
        assert history == [(j, A[j][i]) for j in range(T)]
    # a learner of 2 epochs still learns each task it is given: the diagonal is far above chance (1/10)
    assert min(A[j][j] for j in range(T)) > 0.5

    artifacts = {
        a.path for folder in ("plots", "record", "config") for a in client.list_artifacts(r.info.run_id, folder)
    }
    for path in (
        "plots/accuracy_matrix.png",
        "plots/task_accuracy.png",
        "plots/metrics_by_task.png",
        "record/accuracy_matrix.csv",
        "record/continual_record.npz",
        "record/renate_results.json",
        "config/config.yaml",
    ):
        assert path in artifacts, path
    csv = client.download_artifacts(r.info.run_id, "record/accuracy_matrix.csv", str(tmp_path))
    rows = [line.split(",") for line in open(csv).read().splitlines()]
    assert rows[0] == ["after_task"] + [f"task_{i}" for i in range(T)]
    assert [[float(v) for v in row[1:]] for row in rows[1:]] == A


def test_task_incremental_scenario_and_every_learner_config(experiment, client, tmp_path):
    for agent in ("continual/replay", "continual/joint"):
        run(
            [
                "+experiment=continual_split_digits",
                *experiment["overrides"],
                f"agent={agent}",
                *FAST,
                "protocol.scenario=task_incremental",
                "figures=false",
            ],
            output_dir=tmp_path / agent.replace("/", "_"),
        )
    runs = client.search_runs([client.get_experiment_by_name(experiment["name"]).experiment_id])
    assert sorted(r.data.tags["agent"] for r in runs) == ["continual/joint", "continual/replay"]
    for r in runs:
        assert r.info.status == "FINISHED" and r.data.tags["scenario"] == "task_incremental"
        # told the task, a linear model separates each pair of digits almost perfectly
        assert r.data.metrics["average_accuracy"] > 0.9


@pytest.mark.slow
def test_same_config_and_seed_give_identical_numbers(experiment, tmp_path):
    args = [
        "+experiment=continual_split_digits",
        *experiment["overrides"],
        "agent=continual/replay",
        *FAST,
        "figures=false",
    ]
    first = run([*args, "seed=3"], output_dir=tmp_path / "a")
    second = run([*args, "seed=3"], output_dir=tmp_path / "b")
    strip = lambda d: {k: v for k, v in d.items() if not k.startswith("time/")}  # noqa: E731
    assert strip(first) == strip(second)
    third = run([*args, "seed=4"], output_dir=tmp_path / "c")
    assert strip(third) != strip(first)


def test_crashing_learner_leaves_failed_run_with_completed_rows(experiment, client, tmp_path):
    from tests.fixtures.agents.continual.crashing import LearnerCrash

    with pytest.raises(LearnerCrash):
        run(
            [
                "+experiment=continual_split_digits",
                *experiment["overrides"],
                TEST_AGENTS,
                "agent=continual/crashing",
                "agent.crash_at_task=3",
                "+agent.epochs=2",
            ],
            output_dir=tmp_path,
        )
    r = _only_run(client, experiment["name"])
    assert r.info.status == "FAILED"
    assert r.data.tags["partial_record"] == "true"
    assert "deliberate crash when learning task 3" in r.data.tags["error"]
    A, b, n = _download_results(client, r.info.run_id, tmp_path)
    assert len(A) == 3 and all(len(row) == 5 for row in A)  # tasks 0, 1, 2 learned and evaluated on all 5
    from owl_eval.protocols.continual.record import ContinualRecord

    local = client.download_artifacts(r.info.run_id, "record/continual_record.npz", str(tmp_path))
    assert ContinualRecord.load(local).accuracy.tolist() == A
    metrics = r.data.metrics
    assert metrics["detail/tasks_completed"] == 3
    # metrics of the completed prefix: rows and columns 0..2
    for name, value in plain_renate(A, b, n, 2).items():
        assert metrics[key(name)] == pytest.approx(value, abs=1e-12), name
        assert sorted(m.step for m in client.get_metric_history(r.info.run_id, f"detail/by_task/{name}")) == [0, 1, 2]
