"""Nothing a job completed is lost to an agent that misbehaves towards the launcher, and nothing it started
outlives it (``owl_eval.runner.process.worker``, ``owl_eval.runner.job.scoring.ProgressSaver``):

- an agent that ignores ``agent_timeout``'s stop request is killed, and its run keeps the trials it completed
  (the job's process saved the record so far after each trial; the launcher scores it);
- an agent whose constructor hangs is stopped at ``agent_timeout``, with the step it hung in;
- an agent that installed its own SIGTERM handler is killed ``SIGNAL_GRACE_SECONDS`` after SIGTERM was passed on:
  the run ends KILLED with the completed trials, exit 143;
- processes an agent starts and leaves (``setsid``, a multiprocessing child) end with the job: the command's
  output pipe closes when it exits.

The command lines run as in ``tests/runner/test_job_process.py`` and the store is read back with ``MlflowClient``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from owl_eval.runner.process.worker import SIGNAL_GRACE_SECONDS
from owl_eval.tracking.liveness import process_alive
from tests import forked
from tests.fixtures.searchpath import TEST_AGENTS
from tests.runner.test_faults import child_env, runner_cmd, wait_for_marks, wait_for_running
from tests.runner.test_job_process import error_line, only_run

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]


def stubborn(marks: Path, how: str, *extra: str) -> list[str]:
    return [
        "+experiment=ond_given_detection",
        TEST_AGENTS,
        "agent=ond/stubborn",
        f"agent.marker_dir={marks}",
        f"agent.how={how}",
        *extra,
    ]


def trials_logged(client, run_id: str, tmp_path: Path) -> list[str]:
    """The trial ids of the agent's record the run logged."""
    path = client.download_artifacts(run_id, "record/ond_record.npz", str(tmp_path))
    with np.load(path, allow_pickle=False) as saved:
        return [str(t) for t in saved["agent/trial_id"]]


def test_an_agent_that_ignores_agent_timeout_is_killed_and_its_completed_trials_are_kept(experiment, client, tmp_path):
    """The agent ignores SIGUSR1 at trial 3 and hangs: killed STOP_GRACE_SECONDS after agent_timeout, the run
    FAILED with the metrics and the record of trials 0-2 (saved by the job's process as it went)."""
    started = time.monotonic()
    result = forked.run(
        runner_cmd(
            experiment,
            *stubborn(tmp_path / "marks", "ignore", "agent.at_trial=3", "agent.seconds_per_trial=0.05"),
            "protocol.num_trials=6",
            "agent_timeout=2",
        ),
        cwd=experiment["cwd"],
        env=child_env(),
        timeout=150,
    )
    assert result.returncode == 1, result.stderr[-3000:]
    assert "nor stop 10 s after being asked; its process was killed" in error_line(result)
    run = only_run(client, experiment)
    assert run.info.status == "FAILED"
    assert run.data.tags["partial_record"] == "true"
    assert "top1" in run.data.metrics and "oscr" in run.data.metrics
    assert trials_logged(client, run.info.run_id, tmp_path) == ["trial000", "trial001", "trial002"]
    assert time.monotonic() - started < 120


def test_an_agent_whose_constructor_hangs_is_stopped_at_agent_timeout_with_the_step(experiment, client, tmp_path):
    result = forked.run(
        runner_cmd(experiment, *stubborn(tmp_path / "marks", "construct"), "agent_timeout=2"),
        cwd=experiment["cwd"],
        env=child_env(),
        timeout=90,
    )
    assert result.returncode == 1, result.stderr[-3000:]
    assert error_line(result) == (
        "error: could not build 'agent' (tests.fixtures.agents.ond.stubborn.StubbornAgent): the agent did not "
        "finish within agent_timeout=2 s (building the job's data and agents); stopped"
    )
    experiment_found = client.get_experiment_by_name(experiment["name"])
    assert experiment_found is None or not client.search_runs([experiment_found.experiment_id])


@pytest.mark.parametrize(
    ("how", "code"),
    [("SIGTERM to the command", 143), ("Ctrl-C in a terminal: SIGINT to the process group", 130)],
)
def test_a_stop_signal_swallowed_by_the_agent_ends_the_run_killed_after_the_grace_period(
    experiment, client, start_command, tmp_path, how, code
):
    """The agent installed SIGTERM/SIGINT handlers that do nothing and hangs at trial 2: the signal is passed on
    (or reaches the job's process directly), swallowed, and SIGNAL_GRACE_SECONDS later the job's process is
    killed; the run ends KILLED with trials 0-1, exit 143 (130 for SIGINT)."""
    marks = tmp_path / "marks"
    proc = start_command(
        runner_cmd(experiment, *stubborn(marks, "handlers", "agent.seconds_per_trial=0.05"), "protocol.num_trials=6"),
        log_name="job.log",
        env=child_env(),
        cwd=experiment["cwd"],
    )
    run_id, _ = wait_for_running(experiment, proc)
    wait_for_marks(marks, 1, proc, tmp_path / "job.log")
    sent = time.monotonic()
    if code == 143:
        os.kill(proc.pid, signal.SIGTERM)
    else:
        os.killpg(proc.pid, signal.SIGINT)  # the command leads its own process group (start_command)
    assert proc.wait(timeout=SIGNAL_GRACE_SECONDS + 50) == code, (tmp_path / "job.log").read_text()[-3000:]
    assert time.monotonic() - sent >= SIGNAL_GRACE_SECONDS - 0.5  # it was given the grace period
    run = client.get_run(run_id)
    assert run.info.status == "KILLED"
    assert run.data.tags["partial_record"] == "true" and "top1" in run.data.metrics
    assert trials_logged(client, run_id, tmp_path) == ["trial000", "trial001"]


def test_kill_9_of_the_jobs_process_keeps_the_completed_trials(experiment, client, start_command, tmp_path):
    """``kill -9`` of the job's process (the out-of-memory killer's way) while its agent hangs at trial 2: the run
    ends FAILED with trials 0-1 (the job's process saved them as it went)."""
    marks = tmp_path / "marks"
    proc = start_command(
        runner_cmd(experiment, *stubborn(marks, "ignore", "agent.seconds_per_trial=0.05"), "protocol.num_trials=6"),
        log_name="job.log",
        env=child_env(),
        cwd=experiment["cwd"],
    )
    run_id, _ = wait_for_running(experiment, proc)
    wait_for_marks(marks, 1, proc, tmp_path / "job.log")
    (job_pid,) = [int(p.name) for p in marks.iterdir()]  # the marking agent's file is named by its pid
    os.kill(job_pid, signal.SIGKILL)
    assert proc.wait(timeout=60) == 1, (tmp_path / "job.log").read_text()[-3000:]
    run = client.get_run(run_id)
    assert run.info.status == "FAILED" and "killed by signal 9" in run.data.tags["error"]
    assert run.data.tags["partial_record"] == "true" and "top1" in run.data.metrics
    assert trials_logged(client, run_id, tmp_path) == ["trial000", "trial001"]


def test_processes_an_agent_leaves_end_with_the_job_and_the_output_pipe_closes(experiment, client, tmp_path):
    """The agent starts ``setsid sleep 300`` and a multiprocessing child sleeping 300 s and never ends them: the
    command's stdout (a pipe, as a CI runner or ``| tee`` reads it) reaches EOF once the command exits, and both
    processes are gone."""
    marks = tmp_path / "marks"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "owl_eval",
            *stubborn(marks, "spawn"),
            "protocol.num_trials=2",
            *experiment["overrides"],
        ],
        cwd=experiment["cwd"],
        env=child_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    output: list[bytes] = []
    reader = threading.Thread(target=lambda: output.append(proc.stdout.read()), daemon=True)
    reader.start()
    pids: list[int] = []
    try:
        assert proc.wait(timeout=150) == 0
        reader.join(timeout=15)  # what the command left writing to its pipe must be gone within a few seconds
        pids = [int(p) for p in (marks / "pids").read_text().split()]
        assert not reader.is_alive(), f"the output pipe is still open after the command exited (pids {pids})"
        assert [p for p in pids if process_alive(p)] == []
    finally:
        for pid in pids:
            if process_alive(pid):
                os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
    assert only_run(client, experiment).info.status == "FINISHED", output[0].decode()[-3000:]


def test_saving_the_record_so_far_stays_within_its_budget(tmp_path):
    """1,000 units of a record that grows by 8 kB a unit (an OND trial of 200 samples x 5 classes), each unit taking
    2 ms: the saves take at most SAVE_ALLOWANCE_S + SAVE_SHARE of the time plus one save, and the file holds a
    complete record (the latest save)."""
    import pickle

    from owl_eval.runner.job.scoring import SAVE_ALLOWANCE_S, SAVE_SHARE, ProgressSaver

    saver = ProgressSaver(tmp_path / "progress.pkl")
    units: list[np.ndarray] = []
    started = time.perf_counter()
    for i in range(1000):
        time.sleep(0.002)
        units.append(np.full((200, 5), float(i)))
        saver(lambda: list(units))
    elapsed = time.perf_counter() - started
    biggest_save = pickle.dumps(units, protocol=pickle.HIGHEST_PROTOCOL)
    clock = time.perf_counter()
    (tmp_path / "one.pkl").write_bytes(biggest_save)
    one_save = time.perf_counter() - clock
    assert saver.spent <= SAVE_ALLOWANCE_S + SAVE_SHARE * elapsed + 5 * one_save + 0.05
    saved = pickle.loads((tmp_path / "progress.pkl").read_bytes())
    assert 0 < len(saved) <= 1000 and all(float(u[0, 0]) == k for k, u in enumerate(saved))
