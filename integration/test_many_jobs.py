"""A 200-job joblib sweep into one SQLite store: 201 runs (200 jobs and the sweep's parent), all FINISHED, each
config once, every job nested under the parent. Part of the integration suite (``.ci/full`` runs it after
``.ci/run``; a contributor runs it before touching tracking or launchers)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]


def test_two_hundred_job_joblib_sweep_loses_nothing_and_doubles_nothing(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "OWL_EVAL_PARENT_RUN_ID")}
    env |= {"MLFLOW_DISABLE_TELEMETRY": "true", "PYTHONPATH": str(PROJECT_ROOT)}
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "owl_eval",
            "-m",
            "+experiment=ond_given_detection",
            "seed=range(0,100)",
            "agent=ond/knn_novelty,ond/closed_world",
            "protocol.num_trials=2",
            "figures=false",
            "progress=false",
            "tracking.log_record=false",
            "hydra/launcher=joblib",
            "hydra.launcher.n_jobs=2",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    seconds = time.monotonic() - started
    print(f"200-job joblib sweep: {seconds:.0f} s")
    assert done.returncode == 0, done.stderr[-3000:]
    con = sqlite3.connect(tmp_path / "outputs" / "mlflow.db")
    try:
        runs = con.execute("select run_uuid, status from runs").fetchall()
        tags = {
            run: dict(con.execute("select key, value from tags where run_uuid = ?", (run,)).fetchall())
            for run, _ in runs
        }
    finally:
        con.close()
    assert len(runs) == 201 and {status for _, status in runs} == {"FINISHED"}
    kinds = Counter(t.get("owl_eval.kind") for t in tags.values())
    assert kinds == {"job": 200, "sweep": 1}
    (parent,) = [run for run, t in tags.items() if t.get("owl_eval.kind") == "sweep"]
    jobs = [t for t in tags.values() if t.get("owl_eval.kind") == "job"]
    assert all(t["mlflow.parentRunId"] == parent for t in jobs)
    configs = Counter((t["agent"], t["seed"]) for t in jobs)
    assert len(configs) == 200 and set(configs.values()) == {1}
