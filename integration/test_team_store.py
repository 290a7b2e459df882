"""A team store on PostgreSQL, for real, with docs/TEAM.md's own command lines: a throwaway PostgreSQL cluster
(integration/conftest.py), the real ``mlflow server`` on it, and sweeps through the real command line
(``python -m owl_eval -m``, joblib launcher, two workers, each job's agent in a process of its own).

- A: TEAM.md's server line on the cluster (its placeholders filled: the cluster's URI, a temp artifact folder, a free
  port; plus ``--workers 1`` for this 2-core machine), and TEAM.md's sweep line with ``MLFLOW_TRACKING_URI`` pointing
  at that server, over 20 seeds.
- B: no server: TEAM.md's ``tracking.uri=postgresql://...`` line straight to the database, artifacts to a temp folder,
  over 6 seeds.

Each sweep gets ``protocol.num_trials=2 figures=false progress=false`` and a fresh ``experiment_name``. Both are read
back through ``MlflowClient``: 21 (7) runs, the parent and its jobs by their ``owl_eval.kind`` tag, all FINISHED, every
job nested under the parent, one set of metric keys, and every metric of every job (``time/*`` excepted) equal to the
same seed's run in the default SQLite store, computed by running the same configs with the basic launcher. Wall times
and the peak number of database connections are listed at the end of the session.

Run: ``.ci/team-store`` (installs the ``team`` extra first), or ``python -m pytest integration/test_team_store.py -n 0``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import math
import os
import shlex
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SEEDS = list(range(20))
SEEDS_DIRECT = SEEDS[:6]
EXPERIMENT = "+experiment=ond_given_detection"
SMALL = ["protocol.num_trials=2", "figures=false", "progress=false"]
AGENT = "knn_novelty"  # the comparison group of every job: the experiment's agent (the seed is not a group key)


@pytest.fixture(autouse=True)
def drivers():
    pytest.importorskip("psycopg", reason="psycopg 3 is not installed: pip install -e '.[team]' (docs/TEAM.md)")


# -- docs/TEAM.md's commands -----------------------------------------------------------------------------------
def team_block(first_line: str) -> list[list[str]]:
    """The commands (as words) of the ```bash block of docs/TEAM.md that starts with ``first_line``."""
    from tests.runner.test_docs import code_blocks, commands

    blocks = [
        b
        for b in code_blocks()
        if b.document == "TEAM.md" and b.language == "bash" and b.first_line.startswith(first_line)
    ]
    assert len(blocks) == 1, f"docs/TEAM.md: {len(blocks)} bash blocks start with {first_line!r}"
    return [shlex.split(line, comments=True) for line in commands(blocks[0])]


def with_values(words: list[str], values: dict[str, str]) -> list[str]:
    """``words`` with the value of each ``key=value`` (or ``--flag value``) of ``values`` replaced; every key must be
    in the line, once."""
    out = list(words)
    for key, value in values.items():
        if key.startswith("--"):
            places = [i + 1 for i, w in enumerate(out[:-1]) if w == key]
        else:
            places = [i for i, w in enumerate(out) if w.startswith(f"{key}=")]
            value = f"{key}={value}"
        assert len(places) == 1, f"{key} is {len(places)} times in {shlex.join(words)}"
        out[places[0]] = value
    return out


def owl_eval_command(words: list[str]) -> list[str]:
    """A documented ``python -m owl_eval ...`` line run by this interpreter, small and in its own experiment."""
    assert words[:4] == ["python", "-m", "owl_eval", "-m"] and EXPERIMENT in words, words
    return [sys.executable, *words[1:], *SMALL, f"experiment_name=team-{uuid.uuid4().hex[:8]}"]


def seeds(values: list[int]) -> str:
    return ",".join(map(str, values))


def environment(**extra: str) -> dict:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", "OWL_EVAL_PARENT_RUN_ID", "HYDRA_FULL_ERROR")
    }
    return env | {"PYTHONPATH": str(PROJECT_ROOT), "MLFLOW_DISABLE_TELEMETRY": "true", **extra}


def run_sweep(words: list[str], cwd: Path, env: dict) -> float:
    """Run the command in ``cwd``; its wall time."""
    cwd.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    proc = subprocess.run(
        words, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800, stdin=subprocess.DEVNULL
    )
    seconds = time.monotonic() - start
    assert proc.returncode == 0, f"{shlex.join(words[1:])}\n{proc.stdout[-2000:]}\n{proc.stderr[-4000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-4000:]
    return seconds


def experiment_of(words: list[str]) -> str:
    return next(w for w in words if w.startswith("experiment_name=")).partition("=")[2]


@contextlib.contextmanager
def peak_connections(uri: str) -> Iterator[dict]:
    """Samples ``pg_stat_activity`` every 0.2 s while the block runs: ``{"peak": the most connections to the database
    at once}``, this sampler's own connection not counted."""
    import psycopg

    seen = {"peak": 0}
    stop = threading.Event()
    conn = psycopg.connect(uri, autocommit=True)  # autocommit: each query sees fresh statistics

    def sample() -> None:
        while not stop.is_set():
            (n,) = conn.execute(
                "select count(*) from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid()"
            ).fetchone()
            seen["peak"] = max(seen["peak"], n)
            stop.wait(0.2)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join(timeout=10)
        conn.close()


# -- what the store must hold --------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def reference(tmp_path_factory) -> Iterator[Callable[[], dict]]:
    """A function that returns the reference run's ``{"metrics": seed -> metrics, "seconds"}`` (``reference_run``).
    The run starts in a thread when the fixture is set up: the basic launcher keeps one core busy for about a minute,
    while the test starts the MLflow server (one process waiting for ``/health``); the function waits for it."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        yield pool.submit(reference_run, tmp_path_factory.mktemp("sqlite_reference")).result


def reference_run(cwd: Path) -> dict:
    """Every seed of ``SEEDS`` run once into the default store (SQLite, ``<cwd>/outputs/mlflow.db``) with the basic
    launcher: seed -> metrics, the values the PostgreSQL runs must hold."""
    from mlflow.tracking import MlflowClient

    words = owl_eval_command(["python", "-m", "owl_eval", "-m", EXPERIMENT, f"seed={seeds(SEEDS)}"])
    seconds = run_sweep(words, cwd, environment())
    client = MlflowClient(tracking_uri=f"sqlite:///{cwd / 'outputs' / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(experiment_of(words))
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    metrics = {int(r.data.tags["seed"]): r.data.metrics for r in runs if r.data.tags.get("owl_eval.kind") == "job"}
    assert sorted(metrics) == SEEDS and all(r.info.status == "FINISHED" for r in runs)
    return {"metrics": metrics, "seconds": seconds}


def same(a: float, b: float) -> bool:
    return a == b or (math.isnan(a) and math.isnan(b))


def check_sweep(client, experiment_name: str, seed_values: list[int], reference: dict) -> list:
    """The sweep's runs as ``MlflowClient`` reads them back: one parent, one job per seed, all FINISHED and nested, one
    set of metric keys, every metric equal to the reference run of the same seed. Returns the job runs."""
    experiment = client.get_experiment_by_name(experiment_name)
    assert experiment is not None, experiment_name
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    assert len(runs) == len(seed_values) + 1, sorted(str(r.data.tags.get("owl_eval.kind")) for r in runs)
    parents = [r for r in runs if r.data.tags.get("owl_eval.kind") == "sweep"]
    jobs = [r for r in runs if r.data.tags.get("owl_eval.kind") == "job"]
    assert len(parents) == 1 and len(jobs) == len(seed_values)
    (parent,) = parents
    assert [r.info.status for r in runs] == ["FINISHED"] * len(runs)
    assert all(job.data.tags.get("mlflow.parentRunId") == parent.info.run_id for job in jobs)
    assert sorted(int(job.data.tags["seed"]) for job in jobs) == seed_values
    keys = {frozenset(job.data.metrics) for job in jobs}
    assert len(keys) == 1, "the jobs logged different metric keys"
    (job_keys,) = keys
    (reference_keys,) = {frozenset(reference["metrics"][s]) for s in seed_values}
    assert job_keys == reference_keys, set(job_keys ^ reference_keys)
    for job in jobs:
        seed = int(job.data.tags["seed"])
        expected = reference["metrics"][seed]
        assert job.data.metrics["top1"] == expected["top1"], seed
        differ = {
            k: (v, expected[k])
            for k, v in job.data.metrics.items()
            if not k.startswith("time/") and not same(v, expected[k])
        }
        assert not differ, (seed, differ)
    # the parent's comparison: over every seed, the mean of the reference top1 values
    top1 = [reference["metrics"][s]["top1"] for s in seed_values]
    assert parent.data.metrics[f"{AGENT}/n_seeds"] == len(seed_values)
    # the exact mean (rounding is for text only)
    assert parent.data.metrics[f"{AGENT}/top1"] == pytest.approx(sum(top1) / len(top1), rel=1e-9)
    return jobs


def wait_for_health(proc: subprocess.Popen, url: str, log: Path, timeout: float = 300) -> float:
    start = time.monotonic()
    while True:
        assert proc.poll() is None, f"mlflow server exited {proc.returncode}:\n{log.read_text()[-3000:]}"
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if response.status == 200:
                    return time.monotonic() - start
        except OSError:
            pass
        assert time.monotonic() - start < timeout, f"no /health within {timeout} s:\n{log.read_text()[-3000:]}"
        time.sleep(1)


# -- the tests -------------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_sweep_through_an_mlflow_server_on_postgresql(
    reference, postgres, start_background, free_port, tmp_path, timings
):
    from mlflow.tracking import MlflowClient

    url = f"http://127.0.0.1:{free_port}"
    artifacts = tmp_path / "artifacts"
    (server,) = team_block("mlflow server ")
    assert server[server.index("--host") + 1] == "127.0.0.1", server
    server = with_values(
        server,
        {"--backend-store-uri": postgres["uri"], "--artifacts-destination": str(artifacts), "--port": str(free_port)},
    )
    proc = start_background([*server, "--workers", "1"], log_name="server.log", env=environment(), cwd=tmp_path)
    timings("server up (/health)", wait_for_health(proc, url, tmp_path / "server.log"))
    expected = reference()  # before the sweep: its timing is of the sweep alone

    export, sweep = team_block("export MLFLOW_TRACKING_URI=")
    assert export[0] == "export" and export[1].startswith("MLFLOW_TRACKING_URI=http://"), export
    words = owl_eval_command(with_values(sweep, {"seed": seeds(SEEDS)}))
    assert "hydra/launcher=joblib" in words and "hydra.launcher.n_jobs=2" in words
    cwd = tmp_path / "launch"
    with peak_connections(postgres["uri"]) as connections:
        seconds = run_sweep(words, cwd, environment(MLFLOW_TRACKING_URI=url))
    timings(f"{len(SEEDS)}-job joblib sweep via the server", seconds)
    timings(f"the same {len(SEEDS)} jobs, basic launcher, default SQLite store (the reference)", expected["seconds"])
    timings("peak database connections (the server's)", connections["peak"], unit="")

    client = MlflowClient(tracking_uri=url)
    jobs = check_sweep(client, experiment_of(words), SEEDS, expected)
    # each job's log went to the server (uploaded over HTTP); nothing went to a store of the launch folder
    for job in jobs:
        logs = [a.path for a in client.list_artifacts(job.info.run_id, "logs")]
        assert len(logs) == 1 and logs[0].endswith(".log"), logs
    assert len(list(artifacts.rglob("logs/*.log"))) == len(SEEDS)
    assert not (cwd / "outputs" / "mlflow.db").exists() and not (cwd / "mlruns").exists()


@pytest.mark.slow
def test_sweep_straight_to_postgresql_without_a_server(reference, postgres, tmp_path, timings):
    from mlflow.tracking import MlflowClient

    artifacts = tmp_path / "artifacts"
    (direct,) = team_block("python -m owl_eval -m ")
    # a password in the URI (trust authentication ignores it) must reach no run
    password = f"pw-{uuid.uuid4().hex[:8]}"
    values = {
        "tracking.uri": postgres["uri"].replace("postgres@", f"postgres:{password}@", 1),
        "tracking.artifact_location": str(artifacts),
        "seed": seeds(SEEDS_DIRECT),
    }
    words = owl_eval_command(with_values(direct, values))
    cwd = tmp_path / "launch"
    with peak_connections(postgres["uri"]) as connections:
        seconds = run_sweep(words, cwd, environment())
    timings(f"{len(SEEDS_DIRECT)}-job joblib sweep straight to PostgreSQL", seconds)
    timings("peak database connections (launcher and workers)", connections["peak"], unit="")

    client = MlflowClient(tracking_uri=postgres["uri"])
    jobs = check_sweep(client, experiment_of(words), SEEDS_DIRECT, reference())
    for job in jobs:
        (log,) = (artifacts / job.info.run_id / "artifacts" / "logs").glob("*.log")
        assert f"MLflow run {job.info.run_id}" in log.read_text()
        assert job.data.params["tracking.uri"] == postgres["uri"].replace("postgres@", "postgres:***@", 1)
    (parent,) = client.search_runs([jobs[0].info.experiment_id], filter_string="tags.`owl_eval.kind` = 'sweep'")
    stored = [text for run in [parent, *jobs] for text in run.data.params.values()]
    stored += [path.read_text() for path in artifacts.rglob("*") if path.suffix in (".yaml", ".log")]
    assert not [text for text in stored if password in text]
    assert not (cwd / "outputs" / "mlflow.db").exists() and not (cwd / "mlruns").exists()


def test_stand_ins_in_one_transaction_on_postgresql(postgres):
    """A resumed sweep's stand-ins, inserted in one transaction, read back from PostgreSQL as MLflow's own calls
    write them (the SQLite case is in the fast set)."""
    from mlflow.tracking import MlflowClient

    from tests.runner.test_finished_runs import same_as_mlflows_calls

    client = MlflowClient(tracking_uri=postgres["uri"])
    same_as_mlflows_calls(client, client.create_experiment(f"finished-runs-{uuid.uuid4().hex[:8]}"))
