"""A password in ``tracking.uri`` stays secret on a real PostgreSQL store (docs/TEAM.md, "Things to know").

The throwaway cluster of ``integration/conftest.py`` trusts local connections, so a URI may carry any password and
still connect: a sweep of two jobs runs straight to the database with the password in each of the forms SQLAlchemy
reads (in the user part with ``#``, ``/`` and ``?``; as ``?password=``; percent-encoded), and the password, made of the
marker ``zq7K``, is then searched for in the output, in every file under the launch folder (Hydra's files, the job
logs) and the artifact folder (``config/config.yaml``, the logs attached to the runs), and in a ``pg_dump`` of the
whole database (params, tags, every table). A second sweep loses its database mid-run (the database stops taking
connections): its ``error:`` line, which quotes the job's overrides, shows no password either.

Run: ``.ci/team-store``, or ``python -m pytest integration/test_team_secrets.py -n 0``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from integration.conftest import postgres_bindir

PROJECT_ROOT = Path(__file__).resolve().parent.parent
MARKER = "zq7K"


@pytest.fixture(autouse=True)
def drivers():
    pytest.importorskip("psycopg", reason="psycopg 3 is not installed: pip install -e '.[team]' (docs/TEAM.md)")


def with_password(uri: str, form: str) -> str:
    """The cluster's ``postgresql://postgres@127.0.0.1:<port>/mlflow`` with a password in the given form."""
    head, rest = uri.split("@", 1)
    if form == "user-part":
        return f"{head}:{MARKER}a#{MARKER}b/{MARKER}c?{MARKER}d@{rest}"
    if form == "query":
        return f"{uri}?password={MARKER}a"
    assert form == "percent-encoded"
    return f"postgresql+psycopg://postgres:{MARKER}a%23{MARKER}b%40{MARKER}c@{rest}"


def where_marker(root: Path) -> list[str]:
    found = []
    for folder, _, files in os.walk(root):
        for name in files:
            path = Path(folder, name)
            if MARKER.encode() in path.read_bytes():
                found.append(str(path))
    return found


@pytest.mark.parametrize("form", ["user-part", "query", "percent-encoded"])
def test_a_postgresql_sweep_keeps_the_password_out_of_output_files_and_database(postgres, tmp_path, form):
    from mlflow.tracking import MlflowClient

    uri = with_password(postgres["uri"], form)
    launch, artifacts = tmp_path / "launch", tmp_path / "artifacts"
    launch.mkdir()
    experiment = f"secrets-{form}-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "OWL_EVAL_PARENT_RUN_ID")}
    done = subprocess.run(
        [sys.executable, "-m", "owl_eval", "-m", "+experiment=ond_given_detection", "seed=0,1"]
        + ["protocol.num_trials=2", "figures=false", "progress=false", f"experiment_name={experiment}"]
        + [f'tracking.uri="{uri}"', f"tracking.artifact_location={artifacts}"],
        cwd=launch,
        env=env | {"MLFLOW_DISABLE_TELEMETRY": "true", "PYTHONPATH": str(PROJECT_ROOT)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    assert MARKER not in output, output[-3000:]
    assert "mlflow ui --backend-store-uri" in output and "***" in output  # the closing line, password hidden
    assert not where_marker(launch) and not where_marker(artifacts)
    assert list(launch.rglob(".hydra/overrides.yaml")) and list(artifacts.rglob("config.yaml"))  # were searched

    client = MlflowClient(tracking_uri=postgres["uri"])
    runs = client.search_runs([client.get_experiment_by_name(experiment).experiment_id])
    jobs = [r for r in runs if r.data.tags.get("owl_eval.kind") == "job"]
    assert len(jobs) == 2 and all(r.info.status == "FINISHED" for r in runs)
    assert all("***" in r.data.params["tracking.uri"] for r in jobs)

    dump = subprocess.run(
        [
            str(postgres_bindir() / "pg_dump"),
            "-h",
            "127.0.0.1",
            "-p",
            str(postgres["port"]),
            "-U",
            "postgres",
            "mlflow",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dump.returncode == 0, dump.stderr
    assert experiment in dump.stdout  # the dump holds this sweep's rows
    assert MARKER not in dump.stdout, [line for line in dump.stdout.splitlines() if MARKER in line][:5]


def psql(postgres: dict, sql: str, database: str = "postgres") -> None:
    done = subprocess.run(
        [str(postgres_bindir() / "psql"), "-h", "127.0.0.1", "-p", str(postgres["port"]), "-U", "postgres"]
        + ["-d", database, "-v", "ON_ERROR_STOP=1", "-c", sql],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr


def test_a_database_lost_mid_sweep_gives_an_error_line_without_the_password(postgres, tmp_path):
    """The database stops taking connections while the sweep's job runs (``ALLOW_CONNECTIONS false``, its sessions
    ended): the job fails, and neither the ``error:`` line (which quotes the job's overrides) nor any file shows the
    password."""
    from tests.fixtures.searchpath import TEST_AGENTS

    database = f"lost_{uuid.uuid4().hex[:8]}"
    psql(postgres, f"CREATE DATABASE {database}")
    head, rest = postgres["uri"].rsplit("/", 1)[0].split("@", 1)
    uri = f"{head}:{MARKER}a#{MARKER}b/{MARKER}c@{rest}/{database}"
    launch, artifacts, marks = tmp_path / "launch", tmp_path / "artifacts", tmp_path / "marks"
    launch.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "OWL_EVAL_PARENT_RUN_ID")}
    log = tmp_path / "sweep.log"
    try:
        with open(log, "w") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "owl_eval", "-m", "+experiment=ond_given_detection", "seed=0", TEST_AGENTS]
                + ["agent=ond/marking", f"agent.marker_dir={marks}", "protocol.num_trials=300", "figures=false"]
                + ["progress=false", f'tracking.uri="{uri}"', f"tracking.artifact_location={artifacts}"],
                cwd=launch,
                env=env | {"MLFLOW_DISABLE_TELEMETRY": "true", "PYTHONPATH": str(PROJECT_ROOT)},
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
            try:
                deadline = time.monotonic() + 300
                while not list(marks.glob("*")):
                    assert proc.poll() is None, log.read_text()[-3000:]
                    assert time.monotonic() < deadline, "the job did not start its trials within 300 s"
                    time.sleep(0.2)
                psql(postgres, f"ALTER DATABASE {database} ALLOW_CONNECTIONS false")
                psql(postgres, f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{database}'")
                code = proc.wait(timeout=600)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(timeout=30)
        output = log.read_text()
        assert code != 0, output[-3000:]
        errors = [line for line in output.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "***" in errors[0], output[-3000:]
        assert MARKER not in output, [line for line in output.splitlines() if MARKER in line][:5]
        assert not where_marker(launch) and not where_marker(artifacts)
    finally:
        psql(postgres, f"ALTER DATABASE {database} ALLOW_CONNECTIONS true")
        psql(postgres, f"DROP DATABASE {database} WITH (FORCE)")
