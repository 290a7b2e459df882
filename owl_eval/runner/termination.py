"""SIGTERM to the command (what Slurm sends on preemption or time-out, and ``kill``, ``docker stop`` and
Kubernetes send) ends it the way Ctrl-C does, with the command's jobs included.

- A single run: while its agents work, :mod:`owl_eval.runner.worker` passes the signal on to the job's process,
  which hands over what it completed; the run ends KILLED with it, the command exits 143. Outside that window
  :func:`terminate_as_interrupt` raises :class:`~owl_eval.errors.Terminated` (a KeyboardInterrupt) at once.
- A sweep whose jobs run in other processes (``hydra/launcher=joblib``): the signal goes to the processes that own
  the sweep's RUNNING runs (their ``owl_eval.pid`` tags), each of which stops its job the single-run way; only those
  of this host that are provably the runs' own (``owl_eval.host``, and ``owl_eval.pid_start`` or descent from this
  process: :func:`~owl_eval.runner.liveness.own_process`), and runs of other hosts are left to them; the
  command waits until those runs have ended (at most :data:`JOB_GRACE_SECONDS`), then stops. The launcher then
  kills its idle workers, the jobs' own processes die with their parents, and the sweep's parent run ends KILLED.
  Signalling only the runs' owners matters: an idle joblib worker killed first would make joblib kill the busy
  ones before they log.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator

from owl_eval.errors import Terminated

log = logging.getLogger(__name__)

JOB_GRACE_SECONDS = 60.0


@contextlib.contextmanager
def terminate_as_interrupt() -> Iterator[None]:
    """While the block runs, SIGTERM stops the command as described in the module docstring (main thread only:
    elsewhere signal handlers cannot be set, and nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _on_sigterm(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one stop at a time; SIGKILL remains for force
    try:
        _stop_sweep_jobs()
    finally:
        signal.signal(signal.SIGTERM, _on_sigterm)
    raise Terminated()


def _stop_sweep_jobs() -> None:
    """Pass SIGTERM to the other processes of this host running this command's sweep jobs, and wait for their runs
    to end. Only a process that provably owns a run is signalled (:func:`~owl_eval.runner.liveness.own_process`:
    this host, and the start time the run recorded or descent from this process): a pid of another host (Slurm,
    Ray, a shared server), or one reused by a later process, may name anything here. Runs of other hosts are left to
    their hosts and not waited for."""
    from owl_eval.runner.callbacks import _open_sweep

    if not _open_sweep:
        return
    try:
        from owl_eval.runner.liveness import HOST_TAG, PID_TAG, host_name, own_process
        from owl_eval.runner.tracking import filter_literal, make_client

        client = make_client(_open_sweep["settings"].resolved_uri(_open_sweep["launch_dir"]))
        parent = client.get_run(_open_sweep["run_id"])
        query = f"tags.`mlflow.parentRunId` = {filter_literal(parent.info.run_id, what='run id')} and attributes.status = 'RUNNING'"

        def running() -> list:
            return client.search_runs([parent.info.experiment_id], filter_string=query, max_results=1000)

        def owner_pids() -> set[int | None]:
            return {own_process(r.data.tags) for r in running()}  # a process that is gone is waited for no more

        here = host_name()
        owners: set[int] = set()
        elsewhere: set[str] = set()
        unproven: set[str] = set()
        for run in running():
            tags = run.data.tags
            pid = own_process(tags)
            if pid is not None:
                owners.add(pid)
            elif tags.get(HOST_TAG, here) != here:
                elsewhere.add(tags[HOST_TAG])
            elif tags.get(PID_TAG, "") != str(os.getpid()):
                unproven.add(tags.get(PID_TAG, "?"))
        owners.discard(os.getpid())  # a job of this process (basic launcher) is stopped by the worker module
        for pid in owners:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGTERM)
        if owners:
            log.warning("SIGTERM: stopping the sweep's jobs in processes %s", ", ".join(map(str, sorted(owners))))
        if elsewhere:
            log.warning(
                "SIGTERM: the sweep's RUNNING jobs on other hosts (%s) are left to their hosts",
                ", ".join(sorted(elsewhere)),
            )
        if unproven:
            log.warning(
                "SIGTERM: processes %s of this host are not signalled: none is provably the process of its run "
                "(gone, or the pid now belongs to another process)",
                ", ".join(sorted(unproven)),
            )
        deadline = time.monotonic() + JOB_GRACE_SECONDS
        while owners and time.monotonic() < deadline:
            if not owner_pids() & owners:
                break
            time.sleep(0.2)
    except Exception as exc:  # noqa: BLE001 - stopping must go on even when the store cannot be read
        log.warning("SIGTERM: could not stop the sweep's jobs cleanly: %s", exc)
