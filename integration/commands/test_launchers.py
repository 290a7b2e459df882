"""The launchers that start worker processes of their own, from the command line: joblib's (the README's sweep
line against its basic-launcher twin; SIGTERM to a joblib sweep; a killed joblib worker) and submitit's local one.
Each costs new interpreters (the workers) and tens of seconds: in the integration suite
(``.ci/full``). Ray's is ``.ci/ray``'s, also run by ``.ci/full`` (tests/runner/test_sweeps_ray.py).
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from owl_eval.tracking.runs import TrackedRun
from tests.runner.test_faults import (
    child_env,
    marking_agent,
    runner_cmd,
    runs_in_store,
    settings_of,
    wait_for_marks,
    wait_for_running,
)
from tests.runner.test_sweeps import (
    AGENTS,
    SMALL,
    comparable,
    jobs_by_config,
    only_parent,
    readme_sweep_lines,
    same_history,
    snapshot,
    sweep,
)


def test_the_readme_joblib_sweep_loses_nothing_and_matches_its_basic_launcher_line(tmp_path):
    """The README's two sweep lines as a user types them (small trials): joblib's workers run the six jobs in parallel
    and log exactly what the basic launcher's line logs, and the command ends without leaked semaphores."""
    from tests.inprocess import run_words
    from tests.runner.test_readme import OND_SMALL, _environment

    env = _environment(tmp_path)
    store = {"uri": f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}", "artifacts": str(tmp_path / "outputs")}
    names = {}
    for launcher, line in zip(("basic", "joblib"), readme_sweep_lines()):
        names[launcher] = f"{launcher}-{uuid.uuid4().hex[:8]}"
        words = [
            *shlex.split(line),
            *OND_SMALL,
            "figures=false",
            "progress=false",
            f"experiment_name={names[launcher]}",
        ]
        if launcher == "joblib":  # a new interpreter: its stderr shows what the workers' resource tracker reports
            done = subprocess.run(words, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
        else:
            done = run_words(words, cwd=tmp_path, env=env, timeout=600)
        assert done.returncode == 0, done.stderr[-4000:]
    # each job's process releases what it created (tqdm's multiprocessing lock): no "leaked semaphore" report
    assert "leaked" not in done.stderr and "resource_tracker" not in done.stderr, done.stderr[-2000:]
    runs_p, runs_s = snapshot(store, names["joblib"]), snapshot(store, names["basic"])
    assert len(runs_p) == len(runs_s) == 7  # 6 children + 1 parent, nothing lost, nothing doubled
    jobs_p, jobs_s = jobs_by_config(runs_p), jobs_by_config(runs_s)
    assert sorted(jobs_p) == sorted(jobs_s) == sorted((a, s) for a in AGENTS for s in range(3))
    for (parent_id, parent), jobs in ((only_parent(runs_p), jobs_p), (only_parent(runs_s), jobs_s)):
        assert parent["status"] == "FINISHED"
        assert all(j["status"] == "FINISHED" and j["tags"]["mlflow.parentRunId"] == parent_id for j in jobs.values())
    for config, run_s in jobs_s.items():
        params_p, metrics_p = comparable(jobs_p[config])
        params_s, metrics_s = comparable(run_s)
        assert params_p == params_s, config
        assert len(params_s) > 30  # the whole flattened config
        assert sorted(metrics_p) == sorted(metrics_s), config
        assert all(same_history(metrics_p[k], metrics_s[k]) for k in metrics_s), config
        # the per-batch series is complete: a trial of 20 + 40 samples in batches of 10
        assert len(metrics_s["detail/top1_batch"]) == 6
    # Each job's own log file is attached to its run (in the parallel sweep too).
    artifacts = Path(store["artifacts"])
    for run_id, run in runs_p.items():
        if run["tags"].get("owl_eval.kind") != "job":
            continue
        (log_file,) = artifacts.glob(f"**/{run_id}/artifacts/logs/*.log")
        text = log_file.read_text()
        assert f"MLflow run {run_id}" in text
        assert not any(f"MLflow run {other}" in text for other in runs_p if other != run_id)


def test_submitit_local_sweep_nests_children_and_matches_in_process_run(mlflow_store, tmp_path):
    """``hydra/launcher=submitit_local`` (hydra-submitit-launcher, the ``submitit`` extra): each job is its own
    process started by submitit; children nest under the parent and numbers equal an in-process run."""
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher", reason="hydra-submitit-launcher is not installed")
    from owl_eval.runner.api import run

    name = f"submitit-{uuid.uuid4().hex[:8]}"
    sweep(
        mlflow_store,
        name,
        tmp_path / "sweep",
        f"agent={','.join(AGENTS)}",
        "seed=1",
        *SMALL,
        "hydra/launcher=submitit_local",
        "hydra.launcher.timeout_min=10",
    )
    runs = snapshot(mlflow_store, name)
    parent_id, parent = only_parent(runs)
    jobs = jobs_by_config(runs)
    assert parent["status"] == "FINISHED" and sorted(jobs) == [("ond/closed_world", 1), ("ond/knn_novelty", 1)]
    assert all(j["status"] == "FINISHED" and j["tags"]["mlflow.parentRunId"] == parent_id for j in jobs.values())
    local = run(
        [
            "+experiment=ond_system_detection",
            f"tracking.uri={mlflow_store['uri']}",
            f"tracking.artifact_location={mlflow_store['artifacts']}",
            f"experiment_name={name}-local",
            "agent=ond/closed_world",
            "seed=1",
            *SMALL,
        ],
        output_dir=tmp_path / "local",
    )
    logged = jobs[("ond/closed_world", 1)]["metrics"]
    assert logged["top1"][0][1] == local["top1"] and logged["oscr"][0][1] == local["oscr"]


def test_sigterm_to_a_joblib_sweep_ends_its_jobs_killed_and_leaves_no_process(
    experiment, client, start_background, tmp_path
):
    """The jobs run in joblib's worker processes: SIGTERM to the command reaches them, each running job ends
    KILLED with its completed trials, the parent run KILLED, exit 143, and no process of the command is left."""
    proc = start_background(
        runner_cmd(
            experiment,
            "-m",
            "+experiment=ond_given_detection",
            *marking_agent(tmp_path / "marks"),
            "seed=0,1,2",
            "protocol.num_trials=1500",
            "figures=false",
            "hydra/launcher=joblib",
            "hydra.launcher.n_jobs=2",
        ),
        log_name="sweep.log",
        env=child_env(),
        cwd=tmp_path,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        jobs = [r for r in runs_in_store(experiment).values() if r["tags"].get("owl_eval.kind") == "job"]
        if len(jobs) == 2 and all(r["status"] == "RUNNING" for r in jobs):
            break
        assert proc.poll() is None, (tmp_path / "sweep.log").read_text()[-3000:]
        time.sleep(0.2)
    wait_for_marks(tmp_path / "marks", 2, proc, tmp_path / "sweep.log")  # both running jobs completed 2 trials
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=90) == 143, (tmp_path / "sweep.log").read_text()[-3000:]
    runs = runs_in_store(experiment)
    jobs = [r for r in runs.values() if r["tags"].get("owl_eval.kind") == "job"]
    (parent,) = [r for r in runs.values() if r["tags"].get("owl_eval.kind") == "sweep"]
    assert len(jobs) == 2  # the third job never started
    for job in jobs:
        assert job["status"] == "KILLED" and job["tags"]["error"] == "terminated (SIGTERM)"
        assert job["tags"]["partial_record"] == "true" and job["metrics"] > 0
    assert parent["status"] == "KILLED"
    gone = time.monotonic() + 15
    while time.monotonic() < gone:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        pytest.fail("processes of the sweep were left behind")


def test_killed_joblib_worker_leaves_no_run_running(experiment, client, start_command, tmp_path):
    proc = start_command(
        runner_cmd(
            experiment,
            "-m",
            "+experiment=ond_given_detection",
            "seed=0,1",
            "protocol.num_trials=400",
            "figures=false",
            "hydra/launcher=joblib",
            "hydra.launcher.n_jobs=2",
        ),
        log_name="sweep.log",
        env=child_env(),
        cwd=tmp_path,
    )
    run_id, job = wait_for_running(experiment, proc)
    worker = int(job["tags"]["owl_eval.pid"])
    assert worker != proc.pid  # the job runs in a loky worker, not in the launching process
    # The worker resolved the same unique sweep dir as the launching process: its job dir is inside it.
    (sweep_dir,) = (tmp_path / "outputs" / "multiruns").glob("*/*")
    assert (sweep_dir / job["tags"]["mlflow.runName"].split("-", 1)[0]).is_dir()
    os.kill(worker, signal.SIGKILL)
    assert proc.wait(timeout=120) != 0
    (parent,) = [r for r in runs_in_store(experiment).values() if r["tags"]["owl_eval.kind"] == "sweep"]
    assert parent["status"] == "FAILED", (tmp_path / "sweep.log").read_text()[-3000:]  # ended by the CLI
    assert parent["tags"]["owl_eval.sweep_dir"] == str(sweep_dir)
    assert parent["tags"][
        "error"
    ].strip()  # the reason the CLI gave (owl_eval.runner.sweeps.callbacks.abort_open_sweep)
    TrackedRun.start(settings_of(experiment), run_name="next launch", tags={"owl_eval.kind": "job"}).end()
    after = runs_in_store(experiment)
    assert after[run_id]["status"] == "KILLED"
    assert after[run_id]["tags"]["owl_eval.killed_reason"].startswith(f"process {worker} on host ")
    assert not [k for k, r in after.items() if r["status"] == "RUNNING"]
