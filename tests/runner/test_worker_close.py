"""How the launching process ends a job's process (owl_eval.runner.process.worker.ForkedWorker.close)."""

from __future__ import annotations

import os
import signal

import pytest

from owl_eval.runner.process import worker

pytestmark = pytest.mark.skipif(not worker.fork_wanted(), reason="jobs run in a forked process on Linux only")


def _exit_code(status: int | None) -> int | str:
    assert status is not None
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else f"signal {os.WTERMSIG(status)}"


def test_a_job_found_done_is_told_to_stop_and_ends_by_itself():
    """A resumed sweep's job waits for "go" after its prepare step; skipped, it is sent "stop" and returns: exit 0,
    no SIGTERM (which it would only get after a grace period)."""
    job = worker.ForkedWorker(lambda: 1, lambda prepared: "done", header=lambda prepared: prepared, wait_for_go=True)
    assert job.prepared() == 1
    job.close()
    assert _exit_code(job.status) == 0 and job.stopped_by == []


def test_a_finished_job_is_reaped_with_its_exit_code():
    job = worker.ForkedWorker(lambda: None, lambda prepared: "result", header=lambda prepared: None)
    job.prepared()
    assert job.result() == "result"
    job.close()
    assert _exit_code(job.status) == 0


def test_a_job_that_failed_in_its_process_is_reaped_with_exit_1():
    def prepare():
        raise ValueError("bad input")

    job = worker.ForkedWorker(prepare, lambda prepared: None, header=lambda prepared: None)
    with pytest.raises(ValueError, match="bad input"):
        job.prepared()
    job.close()
    assert _exit_code(job.status) == 1


def test_a_job_still_working_when_closed_is_stopped_with_sigterm():
    """The launching process gave up on it (its MLflow run could not start, say): it is asked to stop."""
    job = worker.ForkedWorker(lambda: None, lambda prepared: signal.pause(), header=lambda prepared: None)
    job.prepared()
    job.close()
    assert job.status is not None and _exit_code(job.status) != 0
