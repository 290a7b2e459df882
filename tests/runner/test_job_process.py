"""A job whose agent takes its process down, or that is stopped the way clusters stop jobs, still ends its MLflow
run with the reason and a non-zero exit code (``owl_eval.runner.process.worker``: the work runs in a forked child, the
run is owned by the launching process).

Each command line runs in a process of its own, forked from a warm interpreter (``tests/forked.py``: the same
entry as the console script, its own pid, process group and exit code); the joblib sweep starts a new interpreter,
as joblib's workers are. The store is read back through ``MlflowClient`` afterwards.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import forked
from tests.fixtures.searchpath import TEST_AGENTS
from tests.runner.test_faults import (
    child_env,
    runner_cmd,
    running_job,
)

DYING = ["+experiment=ond_given_detection", TEST_AGENTS, "agent=ond/dying", "protocol.num_trials=4", "figures=false"]

pytestmark = [pytest.mark.subprocess, pytest.mark.slow]


def run_dying(experiment, how: str, *extra: str) -> subprocess.CompletedProcess:
    return forked.run(
        runner_cmd(experiment, *DYING, f"agent.how={how}", *extra), cwd=experiment["cwd"], env=child_env(), timeout=180
    )


def only_run(client, experiment):
    (run,) = client.search_runs([client.get_experiment_by_name(experiment["name"]).experiment_id])
    return run


def error_line(result: subprocess.CompletedProcess) -> str:
    lines = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, result.stderr[-3000:]
    return lines[0]


@pytest.mark.parametrize(
    ("how", "reason"),
    [
        ("os_exit", "the job's process exited with code 0 before handing over its result"),
        ("segfault", "the job's process was killed by signal 11 (SIGSEGV: a crash in native code)"),
        ("sigkill", "the job's process was killed by signal 9 (SIGKILL: the kernel's out-of-memory killer or kill -9)"),
    ],
)
def test_agent_that_ends_its_process_leaves_a_failed_run_with_the_reason(experiment, client, how, reason):
    result = run_dying(experiment, how)
    assert result.returncode == 1, result.stderr[-3000:]
    assert reason in error_line(result)
    run = only_run(client, experiment)
    assert run.info.status == "FAILED" and run.info.end_time is not None
    assert reason in run.data.tags["error"]
    assert "error.txt" in [a.path for a in client.list_artifacts(run.info.run_id)]
    assert run.data.params["agent.how"] == how  # what was logged before the death is all there


def test_sys_exit_in_an_agent_is_its_crash_and_keeps_the_completed_trials(experiment, client):
    result = run_dying(experiment, "sys_exit", "agent.exit_code=0", "agent.at_trial=2")
    assert result.returncode == 1, result.stderr[-3000:]
    assert "the agent ended the job with sys.exit(0)" in error_line(result)
    run = only_run(client, experiment)
    assert run.info.status == "FAILED" and "AgentExit" in run.data.tags["error"]
    assert run.data.tags["partial_record"] == "true"
    # trials 0 and 1 completed: the per-batch top-1 series holds their batches
    assert run.data.metrics["top1"] >= 0 and client.get_metric_history(run.info.run_id, "detail/top1_batch")


def test_sigterm_mid_run_ends_killed_with_the_completed_trials_and_exit_143(
    experiment, client, start_command, tmp_path
):
    proc, run_id = running_job(experiment, start_command, tmp_path)
    os.kill(proc.pid, signal.SIGTERM)  # to the command only, as `kill` and a cluster's scheduler send it
    assert proc.wait(timeout=60) == 143, (tmp_path / "job.log").read_text()[-3000:]
    run = client.get_run(run_id)
    assert run.info.status == "KILLED"
    assert run.data.tags["error"] == "terminated (SIGTERM)"
    assert run.data.tags["partial_record"] == "true" and "top1" in run.data.metrics
    assert "error: terminated (SIGTERM)" in (tmp_path / "job.log").read_text()


def test_kill_9_of_the_command_takes_the_job_process_with_it(experiment, client, start_command, tmp_path):
    proc, run_id = running_job(experiment, start_command, tmp_path)
    children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
    assert len(children) == 1  # the job's process
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{children[0]}").exists() and time.monotonic() < deadline:
        state = Path(f"/proc/{children[0]}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        if state == "Z":  # dead, waiting for init to reap it
            break
        time.sleep(0.1)
    else:
        assert not Path(f"/proc/{children[0]}").exists(), "the job's process outlived the command"


def test_sigint_to_the_command_alone_reaches_the_job_process(experiment, client, start_command, tmp_path):
    """``kill -INT <pid>`` (not a terminal's Ctrl-C, which reaches the whole process group): passed on."""
    proc, run_id = running_job(experiment, start_command, tmp_path)
    os.kill(proc.pid, signal.SIGINT)
    assert proc.wait(timeout=60) == 130, (tmp_path / "job.log").read_text()[-3000:]
    run = client.get_run(run_id)
    assert run.info.status == "KILLED" and run.data.tags["partial_record"] == "true"


def test_the_job_process_is_a_fork_and_inline_mode_runs_in_the_command(experiment, client):
    """The same numbers either way; ``OWL_EVAL_JOB_PROCESS=inline`` runs the agent in the command's process."""
    base = [sys.executable, "-m", "owl_eval", "+experiment=ond_given_detection", "protocol.num_trials=3"]
    values = []
    for mode in ("fork", "inline"):
        done = forked.run(
            [*base, "figures=false", *experiment["overrides"]],
            cwd=experiment["cwd"],
            env=child_env() | {"OWL_EVAL_JOB_PROCESS": mode},
            timeout=180,
        )
        assert done.returncode == 0, done.stderr[-3000:]
    runs = client.search_runs([client.get_experiment_by_name(experiment["name"]).experiment_id])
    assert len(runs) == 2 and all(r.info.status == "FINISHED" for r in runs)
    values = [r.data.metrics for r in runs]
    assert values[0].keys() == values[1].keys()
    assert {k: v for k, v in values[0].items() if not k.startswith("time/")} == {
        k: v for k, v in values[1].items() if not k.startswith("time/")
    }
    wrong = forked.run(
        [*base, *experiment["overrides"]], cwd=experiment["cwd"], env=child_env() | {"OWL_EVAL_JOB_PROCESS": "threads"}
    )
    assert wrong.returncode == 1 and "OWL_EVAL_JOB_PROCESS='threads': expected 'fork'" in wrong.stderr


def test_a_hung_agent_is_stopped_at_agent_timeout_and_the_sweep_goes_on(experiment, client):
    """Two jobs: one agent hangs at trial 2, the other never does; ``agent_timeout=3``. The hung one ends FAILED
    with the reason and its two completed trials; the other finishes; the command exits 1 (a job failed)."""
    started = time.monotonic()
    result = forked.run(
        runner_cmd(
            experiment, "-m", *DYING, "agent.how=hang", "agent.at_trial=2,99", "agent_timeout=3", "progress=false"
        ),
        cwd=experiment["cwd"],
        env=child_env(),
        timeout=180,
    )
    assert result.returncode == 1, result.stderr[-3000:]
    assert "AgentTimeout: the agent did not finish within agent_timeout=3 s; stopped" in error_line(result)
    runs = client.search_runs([client.get_experiment_by_name(experiment["name"]).experiment_id])
    jobs = {r.data.params["agent.at_trial"]: r for r in runs if r.data.tags.get("owl_eval.kind") == "job"}
    assert jobs["99"].info.status == "FINISHED"
    hung = jobs["2"]
    assert hung.info.status == "FAILED"
    assert hung.data.tags["error"] == "AgentTimeout: the agent did not finish within agent_timeout=3 s; stopped"
    assert hung.data.tags["partial_record"] == "true" and "top1" in hung.data.metrics
    assert time.monotonic() - started < 120  # nothing waited for the hang beyond the limit


def test_agent_timeout_must_be_a_positive_number(experiment):
    result = forked.run(
        runner_cmd(experiment, "+experiment=ond_given_detection", "agent_timeout=0"),
        cwd=experiment["cwd"],
        env=child_env(),
    )
    assert result.returncode == 1
    assert result.stderr.strip() == "error: agent_timeout: expected a number > 0, got 0"
