"""A store on a (nearly) full disk: one ``error:`` line naming the store and the space free there, no traceback,
and the run ended FAILED, or, when even that status cannot be written, ended by the next launch.

The store is put on a real small file system (tmpfs, mounted by the test: it needs root or CAP_SYS_ADMIN, as in
CI; elsewhere the tests are skipped, saying why). A test agent (tests/fixtures/agents/ond/filling.py) fills that
file system once the run has started logging, leaving a few KiB free, so the run's own writes meet the full
disk. The commands run as real processes: a run left RUNNING is ended by a later launch only once its process is
gone.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from tests.fixtures.searchpath import TEST_AGENTS
from tests.inprocess import PROJECT_ROOT, run_module

OND = ["+experiment=ond_given_detection", "progress=false", "figures=false"]
LEAKS = ("Traceback", "[SQL:", "sqlalche.me", "autoflush", "OperationalError")


@pytest.fixture
def small_disk(tmp_path):
    """A 4 MiB tmpfs mounted at ``tmp_path/disk`` (unmounted afterwards); skipped where mounting is not allowed."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4096k", f"owl-eval-test-{uuid.uuid4().hex[:8]}", str(disk)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root or CAP_SYS_ADMIN): {mounted.stderr.strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)


def _owl_eval(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``python -m owl_eval <args>`` as its own process (the tests' fixtures importable)."""
    return run_module("owl_eval", args, cwd=cwd, env={"PYTHONPATH": str(PROJECT_ROOT)}, in_process=False, timeout=300)


def _error_line(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-3000:])
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr[-3000:]
    for leak in LEAKS:
        assert leak not in proc.stdout + proc.stderr, (leak, proc.stderr[-3000:])
    return errors[0]


def _runs(store: Path) -> dict[str, str]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    experiments = [e.experiment_id for e in client.search_experiments()]
    return {r.info.run_id: r.info.status for r in client.search_runs(experiments)} if experiments else {}


# 120 first: the catalogue's first case in a file is in the fast set (tests/conftest.py), and 120 runs one command
@pytest.mark.parametrize("leave_kb", [120, 0])
def test_a_disk_that_fills_during_a_run(tmp_path, small_disk, leave_kb):
    """0 KiB left: not even the FAILED status fits, so the next launch ends the run; 120 KiB: the run ends FAILED
    itself. Either way one line names the store and the space free, and nothing else reaches the terminal."""
    launch = tmp_path / "launch"
    launch.mkdir()
    agent = [TEST_AGENTS, "agent=ond/filling", f"agent.fill_dir={small_disk}", f"agent.leave_kb={leave_kb}"]
    proc = _owl_eval([*OND, "protocol.num_trials=6", f"tracking.store_dir={small_disk}", *agent], launch)
    line = _error_line(proc)
    assert f"the disk of MLflow store {small_disk / 'mlflow.db'} is full" in line, line
    assert "free of 4.0 MiB" in line and "tracking.store_dir" in line, line

    (small_disk / "filler").unlink()
    (run_id, status), *others = _runs(small_disk).items()
    assert not others
    if status == "RUNNING":
        assert f"run {run_id} could not be marked FAILED" in line and "next launch" in line, line
        after = _owl_eval([*OND, "protocol.num_trials=2", f"tracking.store_dir={small_disk}"], launch)
        assert after.returncode == 0, after.stderr[-3000:]
        statuses = _runs(small_disk)
        assert statuses.pop(run_id) == "KILLED"  # found and ended: its process is gone
        assert list(statuses.values()) == ["FINISHED"]
    else:
        assert status == "FAILED" and f"run {run_id} ended FAILED" in line, (status, line)


def test_a_store_on_a_full_disk_starts_no_run(tmp_path, small_disk):
    """Under 1 MiB free before the run: refused at once with what is free and what a run needs; no store made."""
    from tests.fixtures.agents.ond.filling import fill

    fill(small_disk / "other", leave_kb=200)
    launch = tmp_path / "launch"
    launch.mkdir()
    proc = _owl_eval([*OND, "protocol.num_trials=2", f"tracking.store_dir={small_disk}"], launch)
    line = _error_line(proc)
    assert f"tracking.store_dir: the disk of MLflow store {small_disk / 'mlflow.db'} has" in line, line
    assert "free (of 4.0 MiB); a run needs at least 1.0 MiB there" in line, line
    assert not (small_disk / "mlflow.db").exists()


@pytest.mark.parametrize("leave_kb", [0, 12])
def test_a_disk_that_fills_before_the_sweeps_comparison(tmp_path, small_disk, leave_kb):
    """Two jobs finish; the disk fills as the sweep ends. The command exits 1 with one line naming the store and
    the command that makes the comparison again, and the parent is not left RUNNING past the next launch."""
    launch = tmp_path / "launch"
    launch.mkdir()
    filler = [
        "+hydra.callbacks.fill._target_=tests.fixtures.fill_at_sweep_end.FillAtSweepEnd",
        f"+hydra.callbacks.fill.fill_dir={small_disk}",
        f"+hydra.callbacks.fill.leave_kb={leave_kb}",
    ]
    sweep_dir = tmp_path / "sweep"
    args = [*OND, "protocol.num_trials=2", f"tracking.store_dir={small_disk}", f"hydra.sweep.dir={sweep_dir}"]
    proc = _owl_eval(["--multirun", *args, "seed=0,1", *filler], launch)
    line = _error_line(proc)
    assert f"the disk of MLflow store {small_disk / 'mlflow.db'} is full" in line, line
    statuses = _runs(small_disk)
    (parent,) = [run_id for run_id in statuses if f"sweep parent run {run_id}" in line]
    assert f"owl-eval-compare --sweep {parent} --out {sweep_dir} --store-dir {small_disk}`" in line, line
    assert sorted(s for r, s in statuses.items() if r != parent) == ["FINISHED", "FINISHED"]
    (small_disk / "filler").unlink()
    if statuses[parent] == "RUNNING":
        assert "could not be marked FAILED: the next launch on this host ends it" in line, line
        after = _owl_eval([*OND, "protocol.num_trials=2", f"tracking.store_dir={small_disk}"], launch)
        assert after.returncode == 0, after.stderr[-3000:]
        assert _runs(small_disk)[parent] == "KILLED"
    else:
        assert statuses[parent] == "FAILED" and f"sweep parent run {parent} ended FAILED" in line, line
    # the command the line gives makes the comparison, once there is room
    compare = [a.strip("`") for a in line.split("`")[1].split()][1:]
    redo = run_module("owl_eval.comparison.cli", compare, cwd=launch)
    assert redo.returncode == 0, redo.stderr[-3000:]
    assert (sweep_dir / "comparison.md").is_file()
