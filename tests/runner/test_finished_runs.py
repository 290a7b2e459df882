"""Runs created FINISHED in one transaction (a resumed sweep's stand-ins) read back through ``MlflowClient`` exactly as
the same runs made with MLflow's own calls (create_run, log_batch, set_terminated), the reference here."""

from __future__ import annotations

import math
import uuid

import pytest

from owl_eval.tracking.finished_runs import FinishedRun, insert_finished_runs, log_finished_run

MAX_FLOAT = 1.7976931348623157e308  # what MLflow's SQL store keeps for +inf (SQL has no inf)


def _runs(experiment_id: str) -> list[FinishedRun]:
    return [
        FinishedRun(
            experiment_id,
            "seed=0,agent=a",
            {"agent": "a", "seed": "0", "owl_eval.kind": "reused", "mlflow.user": "someone", "long": "x" * 5000},
            {"protocol.batch_size": "32", "agent.k": "3"},
            {"top1": 0.1 + 0.2, "m1": math.nan, "big": math.inf, "small": -math.inf, "zero": 0.0},
        ),
        FinishedRun(experiment_id, "seed=1", {"agent": "b"}, {}, {"top1": 0.75}),
    ]


def _read(client, run_id: str) -> dict:
    run = client.get_run(run_id)
    history = client.get_metric_history(run_id, "top1")
    return {
        "status": run.info.status,
        "name": run.info.run_name,
        "stage": run.info.lifecycle_stage,
        "user": run.info.user_id,
        "artifacts": run.info.artifact_uri,
        "ended": run.info.end_time is not None and run.info.end_time >= run.info.start_time,
        "params": run.data.params,
        "tags": run.data.tags,
        # NaN != NaN: compared as text
        "metrics": {k: repr(v) for k, v in run.data.metrics.items()},
        "history": [(m.step, m.value) for m in history],
    }


@pytest.fixture()
def experiment_id(client) -> str:
    return client.create_experiment(f"finished-runs-{uuid.uuid4().hex[:8]}")


def test_one_transaction_gives_the_runs_mlflows_calls_give(client, experiment_id):
    same_as_mlflows_calls(client, experiment_id)


def same_as_mlflows_calls(client, experiment_id: str) -> None:
    """The check, for any SQL store (the integration suite runs it on PostgreSQL)."""
    specs = _runs(experiment_id)
    inserted = insert_finished_runs(client, specs)
    logged = [log_finished_run(client, spec) for spec in specs]
    assert inserted is not None and len(inserted) == 2
    location = client.get_experiment(experiment_id).artifact_location
    for new, reference, spec in zip(inserted, logged, specs, strict=True):
        got, want = _read(client, new), _read(client, reference)
        assert (
            got["artifacts"] == f"{location}/{new}/artifacts"
            and want["artifacts"] == f"{location}/{reference}/artifacts"
        )
        got.pop("artifacts"), want.pop("artifacts")
        assert got == want
        assert got["status"] == "FINISHED" and got["name"] == spec.name and got["tags"]["mlflow.runName"] == spec.name
    first = _read(client, inserted[0])
    assert first["user"] == "someone"
    assert first["metrics"] == {
        "top1": repr(0.1 + 0.2),
        "m1": "nan",
        "big": repr(MAX_FLOAT),
        "small": repr(-MAX_FLOAT),
        "zero": "0.0",
    }
    # the latest values are there too: a metric filter finds the inserted runs as it finds the logged ones
    found = client.search_runs([experiment_id], filter_string="metrics.top1 > 0.5")
    assert sorted(r.info.run_id for r in found) == sorted([inserted[1], logged[1]])


def test_a_failed_transaction_writes_nothing(client, experiment_id):
    good, _ = _runs(experiment_id)
    bad = FinishedRun(experiment_id, "bad", {}, {"p": None}, {})  # type: ignore[dict-item] # a param needs a value
    assert insert_finished_runs(client, [good, bad]) is None
    assert client.search_runs([experiment_id]) == []


def test_a_deleted_experiment_is_left_to_mlflows_calls(client, experiment_id):
    client.delete_experiment(experiment_id)
    assert insert_finished_runs(client, _runs(experiment_id)) is None


def test_a_tracking_server_is_left_to_mlflows_calls():
    from mlflow.tracking import MlflowClient

    # nothing listens there, and nothing is sent: the store's kind alone decides
    assert insert_finished_runs(MlflowClient(tracking_uri="http://127.0.0.1:9"), _runs("1")) is None
