"""Wall time of one sweep under each launcher, and a count of everything a large parallel sweep stored.

    python benchmarks/sweep_wall_time.py [--jobs 12] [--count-jobs 40] [--trials 2]
        [--ray-python /tmp/rayvenv/bin/python --ray-address 127.0.0.1:6379]

Each sweep is the real CLI (``python -m owl_eval -m ...``): 2 agents x jobs/2 seeds of the OND experiment,
``figures=false``, into one fresh SQLite store (created before timing). Prints the wall time of the whole
command for the basic launcher, joblib with n_jobs=2 and, when a Python with hydra-ray-launcher and a running
Ray cluster are given, Ray; then a ``--count-jobs`` joblib sweep and what the store holds, read with sqlite3:
runs, their status and parent, params and metric rows per run. With the default 2 trials (both without
novelty) every run of an agent logs the same metric set, so the rows per run must be equal within an agent;
with more trials a metric can be N/A for some seeds only and the counts legitimately differ.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
AGENTS = ("ond/knn_novelty", "ond/closed_world")


def sweep(python: str, store: Path, name: str, jobs: int, trials: int, *launcher: str) -> float:
    seeds = ",".join(str(s) for s in range(jobs // len(AGENTS)))
    cmd = [
        python,
        "-m",
        "owl_eval",
        "-m",
        "+experiment=ond_system_detection",
        f"agent={','.join(AGENTS)}",
        f"seed={seeds}",
        f"protocol.num_trials={trials}",
        "figures=false",
        "progress=false",
        f"tracking.store_dir={store}",
        f"experiment_name={name}",
        f"hydra.sweep.dir={store / 'sweeps' / name}",
        *launcher,
    ]
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("OWL_EVAL_PARENT_RUN_ID", None)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"sweep {name} failed:\n{proc.stderr[-3000:]}")
    locked = (proc.stdout + proc.stderr).count("database is locked")
    if locked:
        print(f"  note: 'database is locked' appeared {locked} times in the output of {name}")
    return seconds


def count(store: Path, name: str) -> dict:
    con = sqlite3.connect(store / "mlflow.db")
    try:
        (exp_id,) = con.execute("select experiment_id from experiments where name = ?", (name,)).fetchone()
        runs = con.execute("select run_uuid, status from runs where experiment_id = ?", (exp_id,)).fetchall()
        out = {
            "runs": len(runs),
            "jobs": 0,
            "finished_jobs": 0,
            "parents": 0,
            "param_rows": 0,
            "metric_rows": 0,
            "per_agent": {},
        }
        for run_id, status in runs:
            tags = dict(con.execute("select key, value from tags where run_uuid = ?", (run_id,)))
            if tags.get("owl_eval.kind") == "sweep":
                out["parents"] += 1
                continue
            out["jobs"] += 1
            out["finished_jobs"] += status == "FINISHED" and "mlflow.parentRunId" in tags
            (params,) = con.execute("select count(*) from params where run_uuid = ?", (run_id,)).fetchone()
            (metrics,) = con.execute("select count(*) from metrics where run_uuid = ?", (run_id,)).fetchone()
            out["param_rows"] += params
            out["metric_rows"] += metrics
            out["per_agent"].setdefault(tags.get("agent"), set()).add((params, metrics))
        return out
    finally:
        con.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=12)
    ap.add_argument("--count-jobs", type=int, default=40, help="0 skips the counting sweep")
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--ray-python", help="a Python with hydra-ray-launcher installed (its own venv)")
    ap.add_argument("--ray-address", help="a running Ray cluster (ray start --head); needs RAY_AUTH_MODE=token")
    ap.add_argument("--store", help="store directory (default: a fresh temporary one)")
    args = ap.parse_args()

    store = Path(args.store or tempfile.mkdtemp(prefix="owl-eval-sweep-bench-")).resolve()
    store.mkdir(parents=True, exist_ok=True)
    from mlflow.tracking import MlflowClient

    MlflowClient(f"sqlite:///{store / 'mlflow.db'}").search_experiments()  # schema migrations, not timed
    stamp = time.strftime("%H%M%S")
    print(
        f"store: {store}\n{args.jobs}-job sweep, protocol.num_trials={args.trials}, figures=false, {os.cpu_count()} cores"
    )
    basic = sweep(sys.executable, store, f"bench-basic-{stamp}", args.jobs, args.trials)
    print(f"  basic launcher      : {basic:7.1f} s")
    joblib = sweep(
        sys.executable,
        store,
        f"bench-joblib-{stamp}",
        args.jobs,
        args.trials,
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
    )
    print(f"  joblib, n_jobs=2    : {joblib:7.1f} s   (basic / joblib = {basic / joblib:.2f})")
    if args.ray_python and args.ray_address:
        ray = sweep(
            args.ray_python,
            store,
            f"bench-ray-{stamp}",
            args.jobs,
            args.trials,
            "hydra/launcher=ray",
            f"hydra.launcher.ray.init.address={args.ray_address}",
            "+hydra.launcher.ray.init.object_store_memory=null",
        )
        print(f"  ray, existing cluster: {ray:6.1f} s   (basic / ray = {basic / ray:.2f})")
    for name in (f"bench-basic-{stamp}", f"bench-joblib-{stamp}"):
        c = count(store, name)
        assert c["finished_jobs"] == args.jobs and c["parents"] == 1, (name, c)

    if args.count_jobs <= 0:
        return
    name = f"bench-count-{stamp}"
    seconds = sweep(
        sys.executable, store, name, args.count_jobs, args.trials, "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"
    )
    c = count(store, name)
    print(f"{args.count_jobs}-job joblib sweep (n_jobs=2): {seconds:.1f} s")
    print(
        f"  runs {c['runs']} (parents {c['parents']}, jobs {c['jobs']}, FINISHED under the parent {c['finished_jobs']})"
    )
    print(f"  param rows {c['param_rows']}, metric rows {c['metric_rows']}")
    for agent, shapes in sorted(c["per_agent"].items()):
        print(
            f"  {agent}: (params, metric rows) per run = {sorted(shapes)}"
            + ("" if len(shapes) == 1 else "  <-- differs!")
        )
    complete = (
        c["finished_jobs"] == args.count_jobs
        and c["parents"] == 1
        and all(len(s) == 1 for s in c["per_agent"].values())
    )
    print("  complete: every run, param and metric is there" if complete else "  INCOMPLETE")
    sys.exit(0 if complete else 1)


if __name__ == "__main__":
    main()
