"""SIGTERM to a sweep signals only processes of this host that provably run its jobs (docs: owl_eval.runner.sweeps.termination).

A sweep's RUNNING child runs name their owner by pid, host and start time. A run of another host (Slurm, Ray, a
shared server) names a pid that means nothing here, and a pid of this host may since have been given to another
process: neither is signalled, and the command does not wait for them. The sweep runs in a process of its own
(``tests/forked.py``), its job in a joblib worker; the child runs of other owners are made by hand in its parent run, naming ``sleep``
processes of this test, which must still be alive afterwards.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

from owl_eval.tracking.liveness import HOST_TAG, PID_START_TAG, PID_TAG, UNKNOWN, host_name, process_start
from tests.runner.test_faults import child_env, marking_agent, runner_cmd, wait_for_marks, wait_for_running

pytestmark = pytest.mark.subprocess

# The job runs in a joblib worker (n_jobs=1 would run it in the command's process), so that the sweep's own SIGTERM
# handler, not the single job's, is what runs.
JOBLIB = ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]
STOPPED_WITHIN = 30.0  # seconds; the old handler waited 60 s for runs it could never end


@pytest.fixture()
def sleepers():
    """Start ``sleep`` processes on demand; all are killed at teardown."""
    started: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        proc = subprocess.Popen(["sleep", "600"])
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.kill()
        proc.wait(timeout=10)


@pytest.mark.slow
def test_sigterm_to_a_sweep_spares_other_hosts_pids_and_reused_pids(
    experiment, client, start_command, tmp_path, sleepers
):
    foreign, reused = sleepers(), sleepers()
    marks = tmp_path / "marks"
    proc = start_command(
        runner_cmd(
            experiment,
            "-m",
            "+experiment=ond_given_detection",
            *marking_agent(marks),
            "protocol.num_trials=1500",
            "seed=0",
            *JOBLIB,
        ),
        log_name="sweep.log",
        env=child_env(),
        cwd=experiment["cwd"],
    )
    parent_id, _ = wait_for_running(experiment, proc, kind="sweep")
    wait_for_running(experiment, proc)
    wait_for_marks(marks, 1, proc, tmp_path / "sweep.log")
    experiment_id = client.get_experiment_by_name(experiment["name"]).experiment_id
    owners = {
        # another host's job whose pid is, here, this test's sleep
        "elsewhere": {
            HOST_TAG: "node-17.cluster",
            PID_TAG: str(foreign.pid),
            PID_START_TAG: process_start(foreign.pid),
        },
        # this host, but the pid's process started at another time than the run's owner did
        "reused": {
            HOST_TAG: host_name(),
            PID_TAG: str(reused.pid),
            PID_START_TAG: str(int(process_start(reused.pid)) - 1),
        },
    }
    for name, tags in owners.items():
        client.create_run(
            experiment_id, run_name=name, tags={"mlflow.parentRunId": parent_id, "owl_eval.kind": "job", **tags}
        )

    signalled = time.monotonic()
    os.kill(proc.pid, signal.SIGTERM)
    code = proc.wait(timeout=120)
    took = time.monotonic() - signalled
    log = (tmp_path / "sweep.log").read_text()
    assert code == 143, log[-3000:]
    assert took < STOPPED_WITHIN, f"the sweep took {took:.0f} s to stop\n{log[-3000:]}"
    assert foreign.poll() is None, "the sleep named by another host's run was signalled"
    assert reused.poll() is None, "the sleep holding a reused pid was signalled"
    assert "left to their hosts" in log and "node-17.cluster" in log, log[-3000:]
    (job,) = [
        r for r in client.search_runs([experiment_id]) if r.info.run_id != parent_id and r.info.run_name not in owners
    ]
    assert job.info.status == "KILLED", "the sweep's own job was stopped"


def test_own_process_needs_this_host_and_the_start_time_or_descent():
    from owl_eval.tracking.liveness import own_process

    child = subprocess.Popen(["sleep", "600"])
    try:
        me = host_name()
        started = process_start(child.pid)
        assert own_process({HOST_TAG: me, PID_TAG: str(child.pid), PID_START_TAG: started}) == child.pid
        assert own_process({HOST_TAG: "elsewhere", PID_TAG: str(child.pid), PID_START_TAG: started}) is None
        assert own_process({HOST_TAG: me, PID_TAG: str(child.pid), PID_START_TAG: str(int(started) + 1)}) is None
        # start time unknown: a descendant of this process is provably ours, pid 1 is not
        assert own_process({HOST_TAG: me, PID_TAG: str(child.pid), PID_START_TAG: UNKNOWN}) == child.pid
        assert own_process({HOST_TAG: me, PID_TAG: "1", PID_START_TAG: UNKNOWN}) is None
        assert own_process({HOST_TAG: me, PID_START_TAG: started}) is None  # no pid tag
    finally:
        child.kill()
        child.wait(timeout=10)
