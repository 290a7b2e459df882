"""A resumed sweep reuses a finished run only when the job it would run now is the same job: the config as it
resolves now (an environment variable it reads included), not as it was written."""

from __future__ import annotations

import time

import pytest
from mlflow.tracking import MlflowClient

from tests.runner.test_sweeps import SMALL, sweep

pytestmark = pytest.mark.slow  # sweeps run twice each

NT = "OWL_EVAL_TEST_NUM_TRIALS"


def _job_runs(client: MlflowClient, name: str) -> list:
    experiment = client.get_experiment_by_name(name)
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    return [r for r in runs if r.data.tags.get("owl_eval.kind") == "job"]


def test_a_changed_environment_variable_is_a_new_job(mlflow_store, experiment, tmp_path, monkeypatch):
    client = MlflowClient(mlflow_store["uri"])
    args = [
        *(a for a in SMALL if not a.startswith("protocol.num_trials")),
        "agent=ond/closed_world",
        "seed=0,1",
        f"protocol.num_trials=${{oc.env:{NT}}}",
    ]

    monkeypatch.setenv(NT, "2")
    sweep(mlflow_store, experiment["name"], tmp_path / "first", *args)
    first = _job_runs(client, experiment["name"])
    assert sorted(r.data.params["protocol.num_trials"] for r in first) == ["2", "2"]

    # The same command line, the variable changed: both jobs run again with 3 trials, none is reused.
    monkeypatch.setenv(NT, "3")
    sweep(mlflow_store, experiment["name"], tmp_path / "second", *args)
    runs = _job_runs(client, experiment["name"])
    assert sorted(r.data.params["protocol.num_trials"] for r in runs) == ["2", "2", "3", "3"]

    # And unchanged, the sweep is resumed: nothing new runs.
    sweep(mlflow_store, experiment["name"], tmp_path / "third", *args)
    assert len(_job_runs(client, experiment["name"])) == 4


def test_a_reused_run_is_shown_finished_and_named_at_the_sweep_end(mlflow_store, experiment, tmp_path):
    """A single run, then a sweep over the same config and one more seed: the sweep reuses the run, its stand-in
    under the sweep's parent is FINISHED and owned by the sweep's process (a stand-in carrying the original's
    owner tags, a dead process, was ended KILLED by any launch reaping dead runs while it was filled), and the
    sweep's end names what it reused."""
    from tests.inprocess import run_module

    client = MlflowClient(mlflow_store["uri"])
    args = [*SMALL, "agent=ond/closed_world"]
    single = run_module(
        "owl_eval",
        ["+experiment=ond_system_detection", *experiment["overrides"], *SMALL[:3], "agent=ond/closed_world", "seed=0"],
        cwd=tmp_path,
        in_process=False,
        timeout=600,
    )
    assert single.returncode == 0, single.stderr[-3000:]
    (original,) = _job_runs(client, experiment["name"])

    proc = sweep(mlflow_store, experiment["name"], tmp_path / "sweep", *args, "seed=0,1", "hydra/launcher=basic")
    day = time.strftime("%Y-%m-%d", time.localtime(original.info.start_time / 1000))
    assert f"reused 1 finished run from {day} " in proc.stdout
    assert "KILLED" not in proc.stdout + proc.stderr
    experiment_id = original.info.experiment_id
    (standin,) = [r for r in client.search_runs([experiment_id]) if r.data.tags.get("owl_eval.kind") == "reused"]
    assert standin.info.status == "FINISHED"
    assert standin.data.tags["owl_eval.reused_run"] == original.info.run_id
    assert standin.data.tags["owl_eval.pid"] != original.data.tags["owl_eval.pid"]
    assert standin.data.metrics == original.data.metrics
