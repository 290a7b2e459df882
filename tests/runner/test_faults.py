"""Trust at the boundaries: runs whose process died are ended KILLED by the next launch, a crashed launcher
does not leave its sweep RUNNING, Ctrl-C keeps what was completed, two sweeps started at once neither share
a directory nor run a config twice, and a sweep directory may hold quotes.

Real processes are killed (SIGKILL, SIGINT) and the SQLite store is read back with plain sqlite3. The command lines
run in processes of their own forked from a warm interpreter (``tests/forked.py``); joblib's workers are new
interpreters.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from owl_eval.tracking.runs import TrackedRun
from owl_eval.tracking.settings import TrackingSettings

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SMALL_SWEEP = ["-m", "+experiment=ond_given_detection", "seed=0,1", "protocol.num_trials=3", "figures=false"]


def settings_of(experiment) -> TrackingSettings:
    return TrackingSettings(
        uri=experiment["uri"], experiment_name=experiment["name"], artifact_location=experiment["artifacts"]
    )


def child_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OWL_EVAL_PARENT_RUN_ID", "MLFLOW_TRACKING_URI")}
    return env | {"MLFLOW_DISABLE_TELEMETRY": "true", "PYTHONPATH": str(PROJECT_ROOT)}


def runs_in_store(experiment) -> dict[str, dict]:
    """Every run of the test's experiment straight from the SQLite file: status, lifecycle, tags, metric count."""
    con = sqlite3.connect(experiment["uri"][len("sqlite:///") :], timeout=30)
    try:
        found = con.execute(
            "select r.run_uuid, r.status, r.lifecycle_stage from runs r join experiments e "
            "on r.experiment_id = e.experiment_id where e.name = ?",
            (experiment["name"],),
        ).fetchall()
        out = {}
        for run_id, status, stage in found:
            tags = dict(con.execute("select key, value from tags where run_uuid = ?", (run_id,)))
            (metrics,) = con.execute("select count(*) from latest_metrics where run_uuid = ?", (run_id,)).fetchone()
            out[run_id] = {"status": status, "stage": stage, "tags": tags, "metrics": metrics}
        return out
    except sqlite3.OperationalError:  # the schema is not there yet
        return {}
    finally:
        con.close()


def wait_for_running(experiment, proc, kind: str = "job", timeout: float = 90) -> tuple[str, dict]:
    """Poll the store until a run of ``kind`` is RUNNING; fail with the process output if it exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = [
            (k, r)
            for k, r in runs_in_store(experiment).items()
            if r["status"] == "RUNNING" and r["tags"].get("owl_eval.kind") == kind
        ]
        if running:
            return running[0]
        assert proc.poll() is None, f"the process ended (code {proc.returncode}) before a {kind} run was RUNNING"
        time.sleep(0.1)
    raise AssertionError(f"no RUNNING {kind} run within {timeout} s")


def runner_cmd(experiment, *args: str) -> list[str]:
    return [sys.executable, "-m", "owl_eval", *args, *experiment["overrides"]]


def marking_agent(marker_dir: Path) -> list[str]:
    """Overrides for the test agent that writes ``marker_dir/<pid>`` once 2 trials are complete
    (tests/fixtures/agents/ond/marking.py)."""
    from tests.fixtures.searchpath import TEST_AGENTS

    return [TEST_AGENTS, "agent=ond/marking", f"agent.marker_dir={marker_dir}"]


def wait_for_marks(marker_dir: Path, count: int, proc, log: Path, timeout: float = 180) -> None:
    """Until ``count`` job processes have completed their first trials (the marking agent's files): "stopped
    mid-run with completed trials" without betting on how fast a loaded machine runs them."""
    deadline = time.monotonic() + timeout
    while len(list(marker_dir.glob("*"))) < count:
        assert proc.poll() is None, log.read_text()[-3000:]
        assert time.monotonic() < deadline, f"fewer than {count} jobs completed 2 trials within {timeout} s"
        time.sleep(0.1)


def running_job(experiment, start_command, tmp_path, *extra: str):
    """A job stopped mid-run: started, and 2 of its 1500 trials complete (the marking agent says so)."""
    marks = tmp_path / "marks"
    proc = start_command(
        runner_cmd(
            experiment,
            "+experiment=ond_given_detection",
            *marking_agent(marks),
            "protocol.num_trials=1500",
            "figures=false",
            *extra,
        ),
        log_name="job.log",
        env=child_env(),
        cwd=experiment["cwd"],
    )
    run_id, _ = wait_for_running(experiment, proc)
    wait_for_marks(marks, 1, proc, tmp_path / "job.log")
    return proc, run_id


# -- the reaper, on runs made by hand ----------------------------------------------------------------------
def test_reaper_ends_dead_and_reused_pids_of_this_host_only(experiment, client):
    from owl_eval.tracking.liveness import mark_dead_runs

    finished = subprocess.Popen(["true"])
    finished.wait()
    dead_pid, me = str(finished.pid), str(os.getpid())
    with open("/proc/self/stat") as handle:
        my_start = handle.read().rsplit(")", 1)[1].split()[19]
    host = socket.gethostname()
    exp_id = client.create_experiment(experiment["name"], artifact_location=experiment["artifacts"])
    owner = {"owl_eval.kind": "job", "owl_eval.host": host}
    made = {
        "dead": owner | {"owl_eval.pid": dead_pid, "owl_eval.pid_start": "12"},
        "pid_reused": owner | {"owl_eval.pid": me, "owl_eval.pid_start": "1"},  # my pid, an older process
        "alive": owner | {"owl_eval.pid": me, "owl_eval.pid_start": my_start},
        "other_host": owner | {"owl_eval.pid": dead_pid, "owl_eval.host": f"not-{host}"},
        "not_ours": {"owl_eval.host": host, "owl_eval.pid": dead_pid},  # no owl_eval.kind: another tool's run
        "finished": owner | {"owl_eval.pid": dead_pid},
    }
    ids = {name: client.create_run(exp_id, tags=tags).info.run_id for name, tags in made.items()}
    client.set_terminated(ids["finished"], "FINISHED")
    marked = mark_dead_runs(client, exp_id, found_by="the test")
    assert sorted(marked) == sorted([ids["dead"], ids["pid_reused"]])
    status = {name: client.get_run(run_id).info.status for name, run_id in ids.items()}
    assert status == {
        "dead": "KILLED",
        "pid_reused": "KILLED",
        "alive": "RUNNING",
        "other_host": "RUNNING",
        "not_ours": "RUNNING",
        "finished": "FINISHED",
    }
    reason = client.get_run(ids["dead"]).data.tags["owl_eval.killed_reason"]
    assert reason.startswith(f"process {dead_pid} on host {host} is gone") and "by the test" in reason
    assert mark_dead_runs(client, exp_id) == []  # nothing left to mark


def test_unique_dir_token_is_cached_per_config_and_copied_into_job_configs():
    import re

    from omegaconf import OmegaConf

    from owl_eval.runner.config.resolvers import register_resolvers

    register_resolvers()
    register_resolvers()  # idempotent
    sweep = OmegaConf.create({"run": "r_${owl_eval.unique:}", "sweep": "s_${owl_eval.unique:}"})
    token = sweep.sweep[2:]
    assert re.fullmatch(r"[0-9a-f]{6}", token) and sweep.run == f"r_{token}"
    job = OmegaConf.create({"sweep": "s_${owl_eval.unique:}"})
    OmegaConf.copy_cache(from_config=sweep, to_config=job)  # what Hydra's load_sweep_config does per job
    assert job.sweep == sweep.sweep
    others = {OmegaConf.create({"d": "${owl_eval.unique:}"}).d for _ in range(20)}
    assert len(others) > 1  # separate launches draw separate tokens


# -- skip-finished sees runs in flight -------------------------------------------------------------------------
def test_running_claim_is_reused_and_a_later_duplicate_yields(experiment, client, caplog):
    from owl_eval.tracking.reuse import reuse_finished, yield_to_earlier_claim

    settings = settings_of(experiment)
    claim = {"owl_eval.kind": "job", "owl_eval.config_hash": "feedbeef"}
    first = TrackedRun.start(settings, run_name="first", tags=claim)
    first.log_metrics({"top1": 0.5})
    parent = TrackedRun.start(settings, run_name="parent", tags={"owl_eval.kind": "sweep"})
    with caplog.at_level(logging.INFO, logger="owl_eval.tracking.reuse"):
        reused = reuse_finished(settings, ".", "feedbeef", parent_run_id=parent.run_id, job_label="seed=0")
    assert reused == {"top1": 0.5}
    assert f"running in run {first.run_id}" in caplog.text
    assert client.get_run(parent.run_id).data.tags[f"owl_eval.reused.{first.run_id}"] == "seed=0"

    # The race: a second launch found nothing and created its run too; it yields to the earlier one.
    second = TrackedRun.start(settings, run_name="second", tags=claim, parent_run_id=parent.run_id)
    assert yield_to_earlier_claim(settings, ".", first.run_id, "feedbeef") is None
    assert yield_to_earlier_claim(settings, ".", second.run_id, "feedbeef") == first.run_id
    gone = client.get_run(second.run_id)
    assert (gone.info.status, gone.info.lifecycle_stage) == ("KILLED", "deleted")

    # Same start time: the smaller run id is the earlier claim.
    exp_id = client.get_run(first.run_id).info.experiment_id
    tied = [
        client.create_run(exp_id, start_time=1_000, tags=claim | {"owl_eval.host": "elsewhere"}).info.run_id
        for _ in range(2)
    ]
    tied_hash = "0ddba11"
    for run_id in tied:
        client.set_tag(run_id, "owl_eval.config_hash", tied_hash)
    low, high = sorted(tied)
    assert yield_to_earlier_claim(settings, ".", high, tied_hash) == low
    assert yield_to_earlier_claim(settings, ".", low, tied_hash) is None

    # A RUNNING run whose process is gone is no claim: the job runs.
    client.set_tag(first.run_id, "owl_eval.pid_start", "1")
    assert reuse_finished(settings, ".", "feedbeef", parent_run_id=None, job_label="seed=0") is None
    first.end()
    parent.end()


# -- sweep bookkeeping ---------------------------------------------------------------------------------------
def test_sweep_dir_with_quotes_is_found(experiment, tmp_path):
    from owl_eval.runner.sweeps.callbacks import find_sweep_parent, start_sweep_parent

    settings = settings_of(experiment)
    for sweep_dir in (f"{tmp_path}/it's here", f"{tmp_path}/both ' and \" quotes"):
        parent = start_sweep_parent(settings, str(tmp_path), sweep_dir, experiment="x", overrides=[])
        assert find_sweep_parent(settings, str(tmp_path), sweep_dir) == parent
    assert find_sweep_parent(settings, str(tmp_path), f"{tmp_path}/never swept") is None


def test_abort_open_sweep_ends_the_parent_failed_once(experiment, client, tmp_path, monkeypatch):
    from omegaconf import OmegaConf

    from owl_eval.runner.sweeps.callbacks import MlflowSweepCallback, abort_open_sweep

    abort_open_sweep("nothing open")  # no sweep opened in this process: nothing happens
    monkeypatch.delenv("OWL_EVAL_PARENT_RUN_ID", raising=False)
    config = OmegaConf.create(
        {
            "experiment_name": "x",
            "tracking": {
                "uri": experiment["uri"],
                "experiment_name": experiment["name"],
                "artifact_location": experiment["artifacts"],
            },
            "hydra": {
                "runtime": {"cwd": str(tmp_path)},
                "sweep": {"dir": str(tmp_path / "sweep")},
                "overrides": {"task": ["seed=0,1"]},
            },
        }
    )
    MlflowSweepCallback().on_multirun_start(config)
    parent_id = os.environ["OWL_EVAL_PARENT_RUN_ID"]
    assert client.get_run(parent_id).info.status == "RUNNING"
    abort_open_sweep("the launcher died (TerminatedWorkerError: a worker was killed)")
    ended = client.get_run(parent_id)
    assert ended.info.status == "FAILED"
    assert ended.data.tags["error"] == "the launcher died (TerminatedWorkerError: a worker was killed)"
    assert "OWL_EVAL_PARENT_RUN_ID" not in os.environ
    abort_open_sweep("again")
    assert client.get_run(parent_id).data.tags["error"].startswith("the launcher died")


@pytest.mark.slow
def test_dead_sweep_parent_is_killed_and_reported_by_the_next_sweep(experiment, client, tmp_path, caplog):
    from owl_eval.runner.sweeps.callbacks import start_sweep_parent

    settings = settings_of(experiment)
    script = (
        "import os, signal\nfrom owl_eval.runner.sweeps.callbacks import start_sweep_parent\nfrom owl_eval.tracking.settings import TrackingSettings\n"
        f"s = TrackingSettings(uri={experiment['uri']!r}, experiment_name={experiment['name']!r}, "
        f"artifact_location={experiment['artifacts']!r})\n"
        f"print(start_sweep_parent(s, '.', {str(tmp_path / 'first')!r}, experiment='x', overrides=[]), flush=True)\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=child_env(), timeout=120, check=False
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    dead_parent = proc.stdout.strip().splitlines()[-1]
    assert client.get_run(dead_parent).info.status == "RUNNING"
    with caplog.at_level(logging.WARNING):
        new_parent = start_sweep_parent(settings, str(tmp_path), str(tmp_path / "second"), experiment="x", overrides=[])
    old = client.get_run(dead_parent)
    assert old.info.status == "KILLED"
    assert old.data.tags["owl_eval.killed_reason"].startswith(f"process {old.data.tags['owl_eval.pid']} on host ")
    assert client.get_run(new_parent).data.tags["owl_eval.reaped"] == dead_parent
    assert dead_parent in caplog.text


# -- real command lines killed mid-run ---------------------------------------------------------------------
@pytest.mark.slow
def test_kill_9_job_is_marked_killed_by_the_next_launch(experiment, client, start_command):
    proc = start_command(
        runner_cmd(experiment, "+experiment=ond_given_detection", "protocol.num_trials=400", "figures=false"),
        log_name="job.log",
        env=child_env(),
        cwd=experiment["cwd"],
    )
    run_id, _ = wait_for_running(experiment, proc)
    os.kill(proc.pid, signal.SIGKILL)
    time.sleep(0.2)  # not reaped by its parent (this test) yet: a zombie, which is not alive either
    assert client.get_run(run_id).info.status == "RUNNING"  # nobody ended it
    later = TrackedRun.start(settings_of(experiment), run_name="next launch", tags={"owl_eval.kind": "job"})
    later.end()
    proc.wait(timeout=30)
    killed = client.get_run(run_id)
    assert killed.info.status == "KILLED" and killed.info.end_time is not None
    assert killed.data.tags["owl_eval.pid"] == str(proc.pid)
    assert killed.data.tags["owl_eval.host"] == socket.gethostname()
    assert killed.data.tags["owl_eval.killed_reason"].startswith(
        f"process {proc.pid} on host {socket.gethostname()} is gone"
    )


@pytest.mark.slow
def test_ctrl_c_mid_protocol_ends_killed_with_the_completed_trials(experiment, client, start_command, tmp_path):
    proc, run_id = running_job(experiment, start_command, tmp_path)
    os.kill(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=60) != 0
    run = client.get_run(run_id)
    assert run.info.status == "KILLED", (tmp_path / "job.log").read_text()[-3000:]
    assert run.data.tags["error"] == "interrupted (KeyboardInterrupt)"
    assert [a.path for a in client.list_artifacts(run_id) if a.path == "error.txt"] == ["error.txt"]
    assert run.data.tags.get("partial_record") == "true"
    assert len(run.data.metrics) > 0 and "top1" in run.data.metrics
    assert 0 < len(client.get_metric_history(run_id, "detail/top1_batch"))


@pytest.mark.slow
def test_two_sweeps_at_once_get_own_dirs_and_run_each_config_once(experiment, client, tmp_path, start_command):
    """The same sweep launched twice at the same moment from one directory: two sweep dirs, each holding its
    own jobs' logs, and each config run exactly once (the second launch finds the first one's run in flight,
    or yields to it after both created one)."""
    # The store's schema exists first: two processes creating a brand-new SQLite store at once race in
    # MLflow's own migrations ("duplicate column name"), which is not what this test is about.
    client.create_experiment(experiment["name"], artifact_location=experiment["artifacts"])
    launches = [
        start_command(runner_cmd(experiment, *SMALL_SWEEP), log_name=f"sweep{i}.log", env=child_env(), cwd=tmp_path)
        for i in range(2)
    ]
    for i, proc in enumerate(launches):
        assert proc.wait(timeout=180) == 0, (tmp_path / f"sweep{i}.log").read_text()[-3000:]
    sweep_dirs = sorted(p for p in (tmp_path / "outputs" / "multiruns").glob("*/*") if p.is_dir())
    assert len(sweep_dirs) == 2
    runs = runs_in_store(experiment)
    parents = {r["tags"]["owl_eval.sweep_dir"]: k for k, r in runs.items() if r["tags"]["owl_eval.kind"] == "sweep"}
    assert sorted(parents) == [str(d) for d in sweep_dirs]
    for sweep_dir in sweep_dirs:
        assert sorted(p.name for p in sweep_dir.iterdir() if p.is_dir()) == ["0", "1"]
        for job_dir in sweep_dir.iterdir():
            for log_file in job_dir.glob("*.log") if job_dir.is_dir() else ():
                # A job's log names only runs of its own sweep (no interleaving between the two sweeps).
                for line in log_file.read_text().splitlines():
                    if "] - MLflow run " in line:
                        logged = line.split("] - MLflow run ")[1].split()[0]
                        assert runs[logged]["tags"]["mlflow.parentRunId"] == parents[str(sweep_dir)]
    active_finished = [
        r
        for r in runs.values()
        if r["tags"]["owl_eval.kind"] == "job" and r["status"] == "FINISHED" and r["stage"] == "active"
    ]
    hashes = sorted(r["tags"]["owl_eval.config_hash"] for r in active_finished)
    assert len(hashes) == 2 and len(set(hashes)) == 2  # seed 0 and seed 1, each once
