"""A store or artifact folder that cannot be written is one ``error:`` line before any run exists (owl-eval,
owl-eval-evaluate, a sweep): no MLflow traceback, no FAILED run made before the folder was looked at.

Read-only is made for real: as root (CI's ``.ci/run``), where ``chmod`` stops nothing, by a read-only bind mount
in a mount namespace of the command's own (``unshare -m``); otherwise by ``chmod``. Where neither works (root
without the right to mount), the cases are skipped, with that reason. Each case runs the real ``python -m``.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.reliability.harness import PROJECT_ROOT, CliResult, Workspace, assert_clean_failure

OND = ["+experiment=ond_given_detection", "protocol.num_trials=2", "figures=false", "progress=false"]
RECORD = PROJECT_ROOT / "examples" / "results" / "record"
AS_ROOT = os.geteuid() == 0


def _mount_works() -> bool:
    """Whether this root may make a read-only bind mount in a mount namespace of its own."""
    if shutil.which("unshare") is None or shutil.which("mount") is None:
        return False
    with tempfile.TemporaryDirectory() as folder:
        script = f"mount --bind {folder} {folder} && mount -o remount,bind,ro {folder} && ! touch {folder}/x"
        try:
            done = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.returncode == 0 and not Path(folder, "x").exists()


pytestmark = pytest.mark.skipif(
    AS_ROOT and not _mount_works(),
    reason="running as root, where chmod makes nothing read-only, and no read-only bind mount can be made here "
    "(unshare -m and mount need CAP_SYS_ADMIN)",
)


def run_count(db: Path) -> int:
    with sqlite3.connect(db) as con:
        return con.execute("select count(*) from runs").fetchone()[0]


def run_read_only(
    module: str, args: list[str], ws: Workspace, read_only: Path, *, db: Path, cwd: Path | None = None
) -> CliResult:
    """``python -m <module> <args>`` from ``cwd`` (the workspace root) with ``read_only`` (a folder or a file)
    read-only for the command: a read-only bind mount as root, else ``chmod``. ``db`` is the store whose runs are
    counted before and after."""
    before, runs_before = ws.snapshot(), run_count(db)
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", "HYDRA_FULL_ERROR")}
    env |= {"MLFLOW_DISABLE_TELEMETRY": "true", "PYTHONPATH": str(PROJECT_ROOT)}
    command = [sys.executable, "-m", module, *args]
    if AS_ROOT:
        target = shlex.quote(str(read_only))
        script = f"mount --bind {target} {target} && mount -o remount,bind,ro {target} && exec {shlex.join(command)}"
        command = ["unshare", "-m", "sh", "-c", script]
        proc = subprocess.run(command, cwd=cwd or ws.root, env=env, capture_output=True, text=True, timeout=180)
    else:
        mode = read_only.stat().st_mode
        read_only.chmod(stat.S_IMODE(mode) & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
        try:
            proc = subprocess.run(command, cwd=cwd or ws.root, env=env, capture_output=True, text=True, timeout=180)
        finally:
            read_only.chmod(stat.S_IMODE(mode))
    after = ws.snapshot()
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    return CliResult(proc.returncode, proc.stdout, proc.stderr, runs_before, run_count(db), changed)


def hydra_dirs(ws: Workspace) -> list[str]:
    """Hydra's job folders in the (writable) store folder: only the tracking store is read-only."""
    return [f"hydra.run.dir={ws.store}/hydra", f"hydra.sweep.dir={ws.store}/hydra_sweep"]


@pytest.fixture()
def ro_store(workspace) -> Path:
    """A copy of the workspace's store (one finished run) in a folder of its own, to be made read-only."""
    folder = workspace.store / "ro"
    folder.mkdir()
    shutil.copy(workspace.db, folder / "mlflow.db")
    return folder


def test_sqlite_uri_in_a_read_only_folder(workspace, ro_store):
    args = [*OND, f"tracking.uri=sqlite:///{ro_store}/mlflow.db", *hydra_dirs(workspace)]
    result = run_read_only("owl_eval", args, workspace, ro_store, db=ro_store / "mlflow.db")
    assert_clean_failure(result, "tracking.uri", str(ro_store), "not writable")


def test_read_only_database_file(workspace, ro_store):
    db = ro_store / "mlflow.db"
    args = [*OND, f"tracking.store_dir={ro_store}", "tracking.uri=null", *hydra_dirs(workspace)]
    result = run_read_only("owl_eval", args, workspace, db, db=db)
    assert_clean_failure(result, "tracking.store_dir", str(db), "read-only")


def test_default_store_in_a_read_only_launch_folder(workspace, ro_store):
    # No tracking.store_dir: the store is <launch dir>/outputs, here in a read-only launch folder.
    launch = ro_store / "launch"
    (launch / "outputs").mkdir(parents=True)
    shutil.move(ro_store / "mlflow.db", launch / "outputs" / "mlflow.db")
    db = launch / "outputs" / "mlflow.db"
    args = [*OND, "tracking.uri=null", *hydra_dirs(workspace)]
    result = run_read_only("owl_eval", args, workspace, launch / "outputs", db=db, cwd=launch)
    assert_clean_failure(result, "tracking.store_dir", f"{launch}/outputs", "not writable", "default store")


def test_read_only_artifact_folder(workspace):
    # A new experiment takes the artifact location: today the run was made, then FAILED on the first artifact.
    artifacts = workspace.store / "artifacts"
    artifacts.mkdir()
    args = [
        *OND,
        f"tracking.store_dir={workspace.store}",
        "tracking.uri=null",
        f"tracking.artifact_location={artifacts}",
        "experiment_name=read_only_artifacts",
        *hydra_dirs(workspace),
    ]
    result = run_read_only("owl_eval", args, workspace, artifacts, db=workspace.db)
    assert_clean_failure(result, "tracking.artifact_location", str(artifacts), "not writable")


def test_evaluate_with_a_read_only_artifact_folder(workspace):
    artifacts = workspace.store / "artifacts"
    artifacts.mkdir()
    args = [
        "+source=record",
        f"source.path={RECORD}",
        f"tracking.store_dir={workspace.store}",
        "tracking.uri=null",
        f"tracking.artifact_location=file://{artifacts}/sub",
        "experiment_name=read_only_artifacts",
        *hydra_dirs(workspace),
    ]
    result = run_read_only("owl_eval.runner.cli.evaluate", args, workspace, artifacts, db=workspace.db)
    assert_clean_failure(result, "tracking.artifact_location", f"{artifacts}/sub", "not writable")


def test_sweep_into_a_read_only_store(workspace, ro_store):
    # The sweep's parent run is made before its jobs: the store is looked at before that.
    args = ["-m", *OND, "seed=0,1", f"tracking.uri=sqlite:///{ro_store}/mlflow.db", *hydra_dirs(workspace)]
    result = run_read_only("owl_eval", args, workspace, ro_store, db=ro_store / "mlflow.db")
    assert_clean_failure(result, "tracking.uri", str(ro_store), "not writable")
