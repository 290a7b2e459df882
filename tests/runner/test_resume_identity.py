"""A resumed sweep reuses a finished run only when the job it would run now is the same job: the config as it
resolves now (an environment variable it reads included), not as it was written."""

from __future__ import annotations

from mlflow.tracking import MlflowClient

from tests.runner.test_sweeps import SMALL, sweep

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
