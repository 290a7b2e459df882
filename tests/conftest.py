"""Shared fixtures: one real SQLite MLflow store per test session (creating one costs ~8 s), a fresh
experiment per test, and the shared data folder when it is present."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

# Bytecode caches are written even where PYTHONDONTWRITEBYTECODE is set (existing ones are read either way): else
# every test worker rewrites the test modules' asserts and compiles owl-eval from source again (about 7 s of each
# worker's collection), and so does every interpreter a test starts (about 0.4 s each). The caches are
# ``__pycache__`` folders beside the sources, which git ignores.
sys.dont_write_bytecode = False

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.pop("MLFLOW_TRACKING_URI", None)
os.environ.pop("MLFLOW_RUN_ID", None)

import matplotlib  # noqa: E402

matplotlib.use("Agg")

PROJECT_ROOT = Path(__file__).resolve().parent.parent
SHARED_DIR = PROJECT_ROOT.parent / "shared"


def _test_outputs() -> set[str]:
    """The Hydra output folders of test runs in the checkout's outputs/ (a job's folder name holds its experiment
    name, which is the test's name)."""
    return {str(p) for p in (PROJECT_ROOT / "outputs").glob("*/*/*") if "test_" in p.name}


@pytest.fixture(scope="session", autouse=True)
def no_outputs_in_the_checkout():
    """A test runs its commands from a folder of its own: none leaves Hydra output folders in the checkout."""
    before = _test_outputs()
    yield
    left = sorted(_test_outputs() - before)
    assert not left, f"tests left Hydra output folders in the checkout (run them from tmp_path): {left[:5]}"


@pytest.fixture(scope="session", autouse=True)
def session_temp_folder(tmp_path_factory):
    """The temp folder of this session's processes (and of the commands they start) is one of pytest's, which pytest
    removes after a few sessions: what agents and libraries leave in a temp folder does not pile up in /tmp."""
    import tempfile

    from owl_eval.runner.process.short_tmp import fit_socket_paths

    folder = str(tmp_path_factory.mktemp("temp", numbered=False))
    before = tempfile.tempdir, os.environ.get("TMPDIR")
    tempfile.tempdir, os.environ["TMPDIR"] = folder, folder
    # pytest's temp root can be long (PYTEST_DEBUG_TEMPROOT, a CI system's): the sockets of this process's
    # forkserver (tests/forked.py) and of Ray go where their path fits, as a sweep's do
    fit_socket_paths()
    yield folder
    tempfile.tempdir = before[0]
    if before[1] is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = before[1]


@pytest.fixture(scope="session")
def mlflow_store(tmp_path_factory) -> dict:
    """A real MLflow SQLite store with artifacts beside it, shared by the whole test session."""
    root = tmp_path_factory.mktemp("mlflow_store")
    return {"uri": f"sqlite:///{root / 'mlflow.db'}", "artifacts": str(root / "mlartifacts"), "root": root}


@pytest.fixture()
def experiment(mlflow_store, request, tmp_path) -> dict:
    """A fresh experiment name in the session store, plus the overrides that point a run at it (no figures), and
    ``cwd``: a launch folder of the test's own (Hydra's outputs/ go there, not into the checkout)."""
    safe = re.sub(r"[^0-9A-Za-z_-]", "_", request.node.name)[:40]
    name = f"{safe}-{uuid.uuid4().hex[:8]}"
    overrides = [
        f"tracking.uri={mlflow_store['uri']}",
        f"tracking.artifact_location={mlflow_store['artifacts']}",
        f"experiment_name={name}",
        "progress=false",
        # drawing a run's figures costs about a second: the tests that check figures put figures=true after these
        "figures=false",
    ]
    launch = tmp_path / "launch"
    launch.mkdir(exist_ok=True)
    return {"name": name, "overrides": overrides, "cwd": launch, **mlflow_store}


@pytest.fixture()
def client(mlflow_store):
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=mlflow_store["uri"])


@pytest.fixture()
def shared_dir() -> Path:
    if not SHARED_DIR.is_dir():
        pytest.skip(f"the shared folder {SHARED_DIR} is absent (it sits beside the clone in CI only)")
    return SHARED_DIR


@pytest.fixture()
def shared_dir_or_none() -> Path | None:
    return SHARED_DIR if SHARED_DIR.is_dir() else None


@pytest.fixture()
def free_port() -> int:
    """A free TCP port on the loopback interface."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_process_group(proc: subprocess.Popen, grace: float = 30) -> None:
    """SIGTERM a process group started with ``start_new_session``; SIGKILL whatever is still there after ``grace``."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        proc.poll()
        try:
            os.killpg(proc.pid, 0)  # anyone left in the group?
        except ProcessLookupError:
            return
        time.sleep(0.5)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


@pytest.fixture()
def start_background(tmp_path):
    """Start a command in its own process group, output to ``tmp_path/<log_name>``; at teardown every group
    started here is stopped, so no server or cluster outlives its test."""
    started: list[tuple[subprocess.Popen, object]] = []

    def start(cmd: list[str], *, log_name: str, env: dict | None = None, cwd=None) -> subprocess.Popen:
        log = open(tmp_path / log_name, "w")
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True)
        started.append((proc, log))
        return proc

    yield start
    for proc, log in started:
        stop_process_group(proc)
        log.close()


@pytest.fixture()
def start_command(tmp_path):
    """Start an owl-eval command line (``python -m owl_eval ...``) in a process and process group of its own,
    forked from a warm interpreter (``tests/forked.py``), output to ``tmp_path/<log_name>``; at teardown every
    group started here is stopped."""
    from tests import forked

    started = []

    def start(cmd: list[str], *, log_name: str, env: dict, cwd) -> forked.Forked:
        proc = forked.start(cmd, cwd=cwd, env=env, stdout=tmp_path / log_name, new_session=True)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        forked.stop(proc)


def pytest_collection_finish(session):
    """What collection imported (owl-eval, MLflow, Hydra, scikit-learn, torch: most of a worker's heap) is moved out
    of the garbage collector's reach: the runs of the tests allocate heavily, and each full collection would walk
    those objects again (about a tenth of a catalogue case's time)."""
    import gc

    gc.collect()
    gc.freeze()


# -- the fast set (`python -m pytest`: pyproject's addopts hold -m "not slow") ---------------------------------
# The reliability catalogue runs the CLI once per case (in-process, tests/inprocess.py: ~0.5 s; a case marked
# `subprocess` starts a new interpreter: ~5 s). Its first case in each file stays in the
# fast set (one CLI failure of every kind: config, command line, each source format), and so does the crashing
# agent (a job that fails mid-run); every other catalogue case is marked slow here.
CATALOGUE_DIR = Path(__file__).resolve().parent / "reliability"
CATALOGUE_FAST = {"test_crashing_agent_leaves_one_failed_run_with_the_completed_trials"}


# Files whose tests take ten seconds and more (sweeps in joblib's workers, signals and their grace periods, a disk
# filled for real, the reference CVM runs): started first, so that a run on two workers does not end with one of
# them alone on a long test (the slow set's tail).
LONG_FIRST = frozenset(
    {
        "test_reuse_first.py",
        "test_sweep_processes.py",
        "test_terminal_interrupt.py",
        "test_sweeps.py",
        "test_concurrent_sweeps.py",
        "test_full_disk.py",
        "test_error_file.py",
        "test_cvm_reference.py",
        "test_resume_identity.py",
        "test_lost_work.py",
        "test_sigterm_hosts.py",
        "test_trajectory_files.py",
        "test_torch_adapters_end_to_end.py",
    }
)


def start_order(item) -> int:
    """When ``item`` starts: 0 the tests of :data:`LONG_FIRST`, 1 the others."""
    return 0 if Path(str(item.path)).name in LONG_FIRST else 1


def pytest_collection_modifyitems(config, items):
    files_seen: set[str] = set()
    for item in items:
        path = Path(str(item.path))
        if path.parent != CATALOGUE_DIR:
            continue
        if path.name in files_seen and item.originalname not in CATALOGUE_FAST:
            item.add_marker(pytest.mark.slow)
        files_seen.add(path.name)
    items.sort(key=start_order)  # stable: each module keeps its order
