"""A tracking server that dies mid-sweep: the sweep ends within a bound, with one ``error:`` line (the first failed
job's, naming the server and why), a non-zero exit and no traceback; SIGTERM ends it too. A real ``mlflow server``
on a free port, killed once the sweep's second job has completed its first trials (the marking agent says so)."""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fixtures.searchpath import TEST_AGENTS
from tests.inprocess import PROJECT_ROOT

BOUND_S = 90  # from the server's death to the command's end (MLflow's retries bounded: ~10 s per request)
SIGTERM_BOUND_S = 45


# MLflow's job execution (a job runner and seven huey consumers, each importing MLflow: ~40 CPU-s on 2 cores, and
# /health ~14 s later) serves its GenAI scorers, which no owl-eval run calls; this test is about the tracking API
# dying. The documented server lines run with it on (test_team_store.py, test_docs_server.py, browser/).
NO_JOB_EXECUTION = {"MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}


def _server(tmp_path: Path, port: int) -> subprocess.Popen:
    """``mlflow server`` on ``port`` (its own process group, tracking only: ``NO_JOB_EXECUTION``), once it answers
    ``/health``."""
    proc = subprocess.Popen(
        [
            *(sys.executable, "-m", "mlflow", "server"),
            *("--backend-store-uri", f"sqlite:///{tmp_path / 'server.db'}"),
            *("--artifacts-destination", str(tmp_path / "server-artifacts")),
            *("--host", "127.0.0.1", "--port", str(port), "--workers", "1"),
        ],
        cwd=tmp_path,
        env=os.environ | NO_JOB_EXECUTION,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 180
    while True:
        assert proc.poll() is None, "mlflow server ended at start"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                return proc
        except OSError:
            assert time.monotonic() < deadline, "mlflow server did not answer /health within 180 s"
            time.sleep(0.5)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def _sweep_losing_its_server(tmp_path: Path, port: int, start_background) -> tuple[subprocess.Popen, float, Path]:
    """A 3-job sweep on the server, the server killed once job 2 has completed 2 trials; returns the command's
    process, when the server died (monotonic) and the command's log (stdout and stderr)."""
    server = _server(tmp_path, port)
    marks = tmp_path / "marks"
    launch = tmp_path / "launch"
    launch.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLFLOW_HTTP_REQUEST")}
    env |= {"PYTHONPATH": str(PROJECT_ROOT), "MLFLOW_TRACKING_URI": f"http://127.0.0.1:{port}"}
    args = ["+experiment=ond_given_detection", "progress=false", "figures=false", "protocol.num_trials=300"]
    agent = [TEST_AGENTS, "agent=ond/marking", f"agent.marker_dir={marks}", "seed=0,1,2"]
    proc = start_background(
        [sys.executable, "-m", "owl_eval", "--multirun", *args, *agent], log_name="sweep.log", env=env, cwd=launch
    )
    deadline = time.monotonic() + 240
    try:
        while len(list(marks.glob("*"))) < 2:
            assert proc.poll() is None, (tmp_path / "sweep.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the sweep's second job did not complete 2 trials within 240 s"
            time.sleep(0.1)
    finally:
        _kill_group(server)
    return proc, time.monotonic(), tmp_path / "sweep.log"


def _ended_within(proc: subprocess.Popen, since: float, bound: float, log: Path) -> int:
    try:
        code = proc.wait(timeout=max(since + bound - time.monotonic(), 1))
    except subprocess.TimeoutExpired:
        pytest.fail(f"the command still ran {bound} s after the server died:\n{log.read_text()[-3000:]}")
    return code


@pytest.mark.slow
def test_a_server_lost_mid_sweep_ends_the_sweep_in_bounded_time(tmp_path, free_port, start_background, timings):
    proc, died, log = _sweep_losing_its_server(tmp_path, free_port, start_background)
    code = _ended_within(proc, died, BOUND_S, log)
    timings("lost server: server killed -> sweep ended", time.monotonic() - died)
    output = log.read_text()
    print(output[-2500:])
    assert code == 1, output[-3000:]
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output[-3000:]
    assert f"127.0.0.1:{free_port}" in errors[0] and "connection refused" in errors[0], errors[0]
    assert "Traceback" not in output, output[-3000:]


@pytest.mark.slow
def test_sigterm_ends_a_sweep_whose_server_is_lost(tmp_path, free_port, start_background, timings):
    proc, died, log = _sweep_losing_its_server(tmp_path, free_port, start_background)
    time.sleep(1)  # MLflow is retrying a request of job 2 now
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code = _ended_within(proc, sent, SIGTERM_BOUND_S, log)
    timings("lost server: SIGTERM -> sweep ended", time.monotonic() - sent)
    output = log.read_text()
    assert code == 143, output[-3000:]  # stopped as SIGTERM asks
    assert "#2 :" not in output, output[-3000:]  # no job started after it
    assert "Traceback" not in output, output[-3000:]


@contextlib.contextmanager
def _own_postgres(tmp_path: Path) -> Iterator[tuple[str, Callable[[], None]]]:
    """A PostgreSQL cluster of this test's own (the session's ``postgres`` fixture must outlive its tests): its URI
    and a function that kills it (``pg_ctl stop -m immediate``)."""
    from integration.conftest import _free_port, _run, _stop, postgres_bindir, unavailable

    bindir = postgres_bindir()
    if bindir is None:
        unavailable("PostgreSQL is not installed: no /usr/lib/postgresql/<version>/bin/initdb, no initdb on PATH")
    prefix: list[str] = []
    root = Path(tempfile.mkdtemp(prefix="owl-eval-lost-postgres-"))
    if os.geteuid() == 0:
        runuser = shutil.which("runuser")
        try:
            entry = pwd.getpwnam("postgres")
        except KeyError:
            unavailable("running as root, and there is no postgres user to run PostgreSQL as")
        if runuser is None:
            unavailable("running as root, and runuser is not installed")
        prefix = [runuser, "-u", "postgres", "--"]
        os.chown(root, entry.pw_uid, entry.pw_gid)
    data, port = root / "data", _free_port()
    try:
        _run(prefix, [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust"], "initdb")
        options = f"-c listen_addresses=127.0.0.1 -c port={port} -k {root}"
        _run(
            prefix,
            [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "log"), "-w", "-o", options, "start"],
            "start",
        )
        _run(
            prefix,
            [str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "mlflow"],
            "createdb",
        )

        def kill() -> None:
            _run(prefix, [str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"], "pg_ctl stop")

        yield f"postgresql://postgres@127.0.0.1:{port}/mlflow", kill
    finally:
        _stop(prefix, bindir, data)
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
def test_a_database_store_lost_mid_sweep(tmp_path, start_background, timings):
    """The same with the sweep writing straight to PostgreSQL, which is stopped after job 2's first trials."""
    with _own_postgres(tmp_path) as (uri, kill):
        marks, launch = tmp_path / "marks", tmp_path / "launch"
        launch.mkdir()
        args = ["+experiment=ond_given_detection", "progress=false", "figures=false", "protocol.num_trials=300"]
        args += [f"tracking.uri={uri}", f"tracking.artifact_location={tmp_path / 'artifacts'}"]
        agent = [TEST_AGENTS, "agent=ond/marking", f"agent.marker_dir={marks}", "seed=0,1,2"]
        env = os.environ | {"PYTHONPATH": str(PROJECT_ROOT)}
        proc = start_background(
            [sys.executable, "-m", "owl_eval", "--multirun", *args, *agent], log_name="sweep.log", env=env, cwd=launch
        )
        log = tmp_path / "sweep.log"
        deadline = time.monotonic() + 240
        while len(list(marks.glob("*"))) < 2:
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "the sweep's second job did not complete 2 trials within 240 s"
            time.sleep(0.1)
        kill()
        died = time.monotonic()
        code = _ended_within(proc, died, BOUND_S, log)
        timings("lost database: stopped -> sweep ended", time.monotonic() - died)
    output = log.read_text()
    assert code == 1, output[-3000:]
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, output[-3000:]
    assert "127.0.0.1" in errors[0] and "[SQL:" not in errors[0], errors[0]
    assert "Traceback" not in output, output[-3000:]
