"""SIGTERM between a resumed sweep's two steps of a job (the job's process built and waiting for "go" while this
process opens the MLflow run): the job's process stops at once, and this process reports the stop (Terminated),
not the closed pipe it would meet sending "go" ([Errno 32] Broken pipe, which ended a sweep FAILED)."""

from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from owl_eval.errors import Terminated
from owl_eval.runner.process.worker import ForkedWorker, fork_wanted


@pytest.mark.skipif(not fork_wanted(), reason=f"the job's process is forked on Linux only, not on {sys.platform}")
def test_sigterm_while_the_job_waits_for_go_is_a_stop_not_a_broken_pipe():
    worker = ForkedWorker(lambda: "built", lambda prepared: "done", header=lambda prepared: prepared, wait_for_go=True)
    try:
        assert worker.prepared() == "built"
        os.kill(os.getpid(), signal.SIGTERM)  # passed on to the job's process, which stops while waiting for "go"
        deadline = time.monotonic() + 30
        while not worker._reaped():  # its end, so that "go" meets a closed pipe
            assert time.monotonic() < deadline, "the job's process did not stop on SIGTERM"
            time.sleep(0.01)
        with pytest.raises(Terminated):
            worker.result()
    finally:
        worker.close()
