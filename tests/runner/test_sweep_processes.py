"""A joblib sweep as a user runs it (``python -m owl_eval -m ... hydra/launcher=joblib``, a real process in a
session of its own), with a temp folder too long for a socket path, whose agent uses a socket
(tests/fixtures/agents/ond/socket_using.py: a ``multiprocessing`` Manager, as an agent sharing state between
processes does):

- the sweep succeeds: multiprocessing's sockets go to a short private folder (``owl_eval.runner.process.short_tmp``),
  not into ``$TMPDIR`` where binding fails with ``OSError: AF_UNIX path too long``;
- after the command returns, none of its processes is left running (loky's reusable workers, the Manager's
  server, multiprocessing's resource tracker): all gone within a few seconds (tests/runner/leftovers.py records
  every process of the command's session and every descendant while it runs).
"""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path

import pytest

from tests.runner.leftovers import LONG_TMP_CHARS, long_folder, run_watched, still_running

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]
PROJECT_ROOT = Path(__file__).resolve().parents[2]
SOCKET_AGENT = "tests.fixtures.agents.ond.socket_using.SocketUsingAgent"
GRACE_S = 5.0  # an exiting process's last children (a resource tracker reading EOF) end within a second here


def statuses(db: Path) -> list[str]:
    with sqlite3.connect(db) as con:
        return sorted(status for (status,) in con.execute("select status from runs"))


@pytest.fixture(scope="module")
def joblib_sweep(tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("joblib_sweep")
    tmp = long_folder(root, LONG_TMP_CHARS)
    assert len(str(tmp)) >= LONG_TMP_CHARS and len(str(tmp)) + len("/pymp-xxxxxxxx/listener-xxxxxxxx") > 107
    store = root / "store"
    cmd = [
        sys.executable,
        "-m",
        "owl_eval",
        "-m",
        "+experiment=ond_given_detection",
        "protocol.num_trials=2",
        "agent=ond/closed_world",
        f"agent._target_={SOCKET_AGENT}",
        "seed=0,1",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        "figures=false",
        "progress=false",
        f"tracking.store_dir={store}",
        f"hydra.sweep.dir={root / 'sweep'}",
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("OWL_EVAL_PARENT_RUN_ID", "MLFLOW_TRACKING_URI")}
    env |= {"TMPDIR": str(tmp), "MLFLOW_DISABLE_TELEMETRY": "true", "PYTHONPATH": str(PROJECT_ROOT)}
    env.pop("RAY_TMPDIR", None)
    watched = run_watched(cmd, cwd=root, env=env, log_dir=root)
    return {"watched": watched, "db": store / "mlflow.db", "tmp": tmp}


def test_a_joblib_sweep_whose_agent_uses_a_socket_runs_under_a_temp_folder_too_long_for_one(joblib_sweep):
    watched = joblib_sweep["watched"]
    assert watched.returncode == 0, watched.stderr[-4000:]
    assert "AF_UNIX" not in watched.stderr
    assert statuses(joblib_sweep["db"]) == ["FINISHED"] * 3  # the parent and its two jobs


def test_a_joblib_sweep_leaves_no_process_running_after_it_returns(joblib_sweep):
    watched = joblib_sweep["watched"]
    assert watched.returncode == 0, watched.stderr[-4000:]
    names = " ".join(p.cmdline for p in watched.seen.values())
    assert "loky" in names  # the launcher's workers were seen, so their end is checked
    left = still_running(watched, GRACE_S)
    assert not left, [(p.pid, p.cmdline[:120]) for p in left]
