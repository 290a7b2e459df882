"""The store goes where the user said: a launch folder with ``?``, ``#``, ``%``, spaces or non-ASCII letters keeps its
store inside it; an artifact location with a URI scheme goes to that scheme's store, or is one error line naming
the missing library before any run; an experiment name cannot move the run folder out of the launch folder.

Command lines run through the CLI's own entry (``tests/inprocess.py``); the store is read back with ``MlflowClient``.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from owl_eval.tracking.settings import TrackingSettings, sqlite_path, sqlite_uri
from tests.inprocess import run_module

SMALL = ["+experiment=ond_given_detection", "protocol.num_trials=2", "figures=false", "progress=false"]
ODD_NAME = "we?ird #1 %41 é"


def everything_under(folder: Path) -> set[str]:
    """Every path below ``folder`` except Hydra's own run folder (``outputs/runs/...``, made before any job starts:
    it holds the job's log and the composed config, and is there after any config error)."""
    hydra_runs = folder / "outputs" / "runs"
    return {
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p not in (folder / "outputs", hydra_runs) and not p.is_relative_to(hydra_runs)
    }


@pytest.mark.parametrize("path", ["/tmp/a?b/mlflow.db", "/tmp/a%41b/x.db", "/tmp/a #b/é.db", "/tmp/%3F?/%/m.db"])
def test_sqlite_uri_is_read_back_by_sqlalchemy_as_the_same_file(path):
    from sqlalchemy.engine import make_url  # the reader MLflow's SQL store uses

    uri = sqlite_uri(Path(path))
    assert make_url(uri).database == path
    assert sqlite_path(uri) == Path(path)


def test_a_launch_folder_with_odd_characters_keeps_its_store_inside(tmp_path):
    from mlflow.tracking import MlflowClient

    launch = tmp_path / ODD_NAME / "sub"
    launch.mkdir(parents=True)
    result = run_module("owl_eval", SMALL, cwd=launch)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (launch / "outputs" / "mlflow.db").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == [ODD_NAME]  # nothing beside it (no "we%3Fird ...")
    assert sorted(p.name for p in (tmp_path / ODD_NAME).iterdir()) == ["sub"]
    printed = result.stdout.strip().splitlines()[-1]
    uri = printed.split("--backend-store-uri ", 1)[1].strip("'")
    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("ond_given_detection").experiment_id])
    assert run.info.status == "FINISHED"
    artifacts = Path(run.info.artifact_uri.removeprefix("file://"))
    from urllib.parse import unquote

    assert Path(unquote(str(artifacts))).is_relative_to(launch / "outputs" / "mlartifacts")
    assert (Path(unquote(str(artifacts))) / "config" / "config.yaml").is_file()


@pytest.mark.parametrize(
    ("location", "library"),
    [
        ("s3://bucket/x", "boto3"),
        ("gs://bucket/x", "google-cloud-storage"),
        ("wasbs://c@a.blob.core.windows.net/x", "azure-storage-blob"),
    ],
)
def test_a_cloud_artifact_location_without_its_library_is_one_error_and_no_run(tmp_path, location, library):
    module = {"boto3": "boto3", "google-cloud-storage": "google.cloud", "azure-storage-blob": "azure.storage"}[library]
    try:
        installed = importlib.util.find_spec(module) is not None
    except ImportError:
        installed = False
    if installed:
        pytest.skip(f"{library} is installed here: the location would be accepted")
    result = run_module("owl_eval", [*SMALL, f"tracking.artifact_location={location}"], cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"error: tracking.artifact_location: {location!r} needs {library} to store artifacts in "
        f"{location.split(':')[0]}://, and it is not installed (pip install {library})"
    )
    assert everything_under(tmp_path) == set()  # no store, no folder named like the URI


def test_an_artifact_location_of_an_unknown_scheme_is_refused(tmp_path):
    result = run_module("owl_eval", [*SMALL, "tracking.artifact_location=foo://bucket/x"], cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("error: tracking.artifact_location: 'foo://bucket/x' has the scheme foo://")
    assert everything_under(tmp_path) == set()


def test_a_file_uri_artifact_location_is_that_folder(tmp_path):
    from mlflow.tracking import MlflowClient

    where = tmp_path / "arts"
    result = run_module("owl_eval", [*SMALL, f"tracking.artifact_location={where.as_uri()}"], cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("ond_given_detection").experiment_id])
    # MLflow puts a run's artifacts under <experiment's artifact location>/<run id>/artifacts
    assert (where / run.info.run_id / "artifacts" / "config" / "config.yaml").is_file()
    assert (
        TrackingSettings(artifact_location=str(where)).resolved_artifact_location("sqlite:////x/m.db") == where.as_uri()
    )
    assert TrackingSettings(artifact_location=where.as_uri()).resolved_artifact_location("sqlite:////x/m.db") == (
        where.as_uri()
    )


@pytest.mark.parametrize("args", [["experiment_name=../../.."], ["-m", "experiment_name=x/../..", "seed=0,1"]])
def test_an_experiment_name_cannot_move_the_run_folder_out_of_the_launch_folder(tmp_path, args):
    launch = tmp_path / "a" / "b"
    launch.mkdir(parents=True)
    result = run_module("owl_eval", [*SMALL, *args], cwd=launch)
    assert result.returncode == 1
    name = args[-1].split("=", 1)[1] if args[0] != "-m" else args[1].split("=", 1)[1]
    assert result.stderr.strip() == (
        f"error: experiment_name: {name!r} would put the run folder outside the launch folder (a '..' component); "
        "choose a name without '..'"
    )
    assert everything_under(tmp_path) == {"a", "a/b"}


def test_a_raw_question_mark_in_a_sqlite_uri_is_refused(tmp_path):
    result = run_module("owl_eval", [*SMALL, f"tracking.uri=sqlite:///{tmp_path}/a?b.db"], cwd=tmp_path)
    assert result.returncode == 1
    assert "holds '?', which SQLAlchemy reads as the start of query options" in result.stderr
    assert everything_under(tmp_path) == set()


def test_a_sweep_with_no_server_at_its_uri_is_one_error_line_and_starts_no_job(tmp_path, free_port):
    uri = f"http://127.0.0.1:{free_port}"
    result = run_module("owl_eval", ["-m", *SMALL, "seed=1,2", f"tracking.uri={uri}"], cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"error: tracking.uri: no MLflow server answers at {uri} (connection refused); start one "
        f"(mlflow server --host 127.0.0.1 --port {free_port}) or point MLFLOW_TRACKING_URI / tracking.uri at a running one"
    )
    assert "Launching" not in result.stdout  # no job started
