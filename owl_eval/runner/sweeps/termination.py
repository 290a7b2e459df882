"""SIGTERM to the command (what Slurm sends on preemption or time-out, and ``kill``, ``docker stop`` and
Kubernetes send) ends it the way Ctrl-C does, with the command's jobs included. Ctrl-C (SIGINT) in a sweep whose
jobs run in worker processes waits for their runs to end too (:func:`_on_sigint`), so that the launcher's teardown
of its workers never cuts a job's logging short.

- A single run: while its agents work, :mod:`owl_eval.runner.process.worker` passes the signal on to the job's process,
  which hands over what it completed; the run ends KILLED with it, the command exits 143. Outside that window
  :func:`terminate_as_interrupt` raises :class:`~owl_eval.errors.Terminated` (a KeyboardInterrupt) at once.
- A sweep whose jobs run in other processes (``hydra/launcher=joblib``): the signal goes to the processes that own
  the sweep's RUNNING runs (their ``owl_eval.pid`` tags), each of which stops its job the single-run way; only those
  of this host that are provably the runs' own (``owl_eval.host``, and ``owl_eval.pid_start`` or descent from this
  process: :func:`~owl_eval.tracking.liveness.own_process`), and runs of other hosts are left to them; the
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
    previous = {signal.SIGTERM: signal.signal(signal.SIGTERM, _on_sigterm)}
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, _on_sigint)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def _on_sigterm(signum, frame) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one stop at a time; SIGKILL remains for force
    try:
        _stop_sweep_jobs(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, _on_sigterm)
    raise Terminated()


def _on_sigint(signum, frame) -> None:
    """Ctrl-C: a terminal sends it to the whole process group, so the sweep's workers (joblib, submitit-local) stop
    their jobs by themselves; this process waits for their runs to end before the launcher tears its workers down
    (which would leave the runs RUNNING, their completed part unlogged). A second Ctrl-C stops at once."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _stop_sweep_jobs(signal.SIGINT, settle=SIGINT_SETTLE_SECONDS)
    finally:
        signal.signal(signal.SIGINT, _on_sigint)
    raise KeyboardInterrupt()


# How long Ctrl-C waits for the sweep's jobs to stop on their own (a terminal's Ctrl-C reached them too) before it
# passes the signal on (a SIGINT sent to this process alone): a job that got both would take the second as "stop now".
SIGINT_SETTLE_SECONDS = 5.0


def _stop_sweep_jobs(signum: int, *, settle: float = 0.0) -> None:
    """Pass ``signum`` to the other processes of this host running this command's sweep jobs, and wait for their runs
    to end (with ``settle``, first wait that long for them to end without it). Only a process that provably owns a
    run is signalled (:func:`~owl_eval.tracking.liveness.own_process`: this host, and the start time the run recorded
    or descent from this process): a pid of another host (Slurm, Ray, a shared server), or one reused by a later
    process, may name anything here. Runs of other hosts are left to their hosts and not waited for."""
    from owl_eval.runner.sweeps.callbacks import _open_sweep

    if not _open_sweep:
        return
    try:
        from owl_eval.tracking.liveness import HOST_TAG, PID_TAG, host_name, own_process
        from owl_eval.tracking.sweep_parent import running_jobs

        def running() -> list:
            return running_jobs(_open_sweep["settings"], _open_sweep["launch_dir"], _open_sweep["run_id"])

        def owner_pids() -> set[int | None]:
            return {own_process(tags) for tags in running()}  # a process that is gone is waited for no more

        here = host_name()
        owners: set[int] = set()
        elsewhere: set[str] = set()
        unproven: set[str] = set()
        for tags in running():
            pid = own_process(tags)
            if pid is not None:
                owners.add(pid)
            elif tags.get(HOST_TAG, here) != here:
                elsewhere.add(tags[HOST_TAG])
            elif tags.get(PID_TAG, "") != str(os.getpid()):
                unproven.add(tags.get(PID_TAG, "?"))
        owners.discard(os.getpid())  # a job of this process (basic launcher) is stopped by the worker module
        name = signal.Signals(signum).name
        settled = time.monotonic() + settle
        while owners and time.monotonic() < settled:
            owners &= {p for p in owner_pids() if p is not None}
            time.sleep(0.2)
        for pid in owners:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)
        if owners:
            log.warning("%s: stopping the sweep's jobs in processes %s", name, ", ".join(map(str, sorted(owners))))
        if elsewhere:
            log.warning(
                "%s: the sweep's RUNNING jobs on other hosts (%s) are left to their hosts",
                name,
                ", ".join(sorted(elsewhere)),
            )
        if unproven:
            log.warning(
                "%s: processes %s of this host are not signalled: none is provably the process of its run "
                "(gone, or the pid now belongs to another process)",
                name,
                ", ".join(sorted(unproven)),
            )
        deadline = time.monotonic() + JOB_GRACE_SECONDS
        while owners and time.monotonic() < deadline:
            if not owner_pids() & owners:
                break
            time.sleep(0.2)
    except Exception as exc:  # noqa: BLE001 - stopping must go on even when the store cannot be read
        log.warning("%s: could not stop the sweep's jobs cleanly: %s", signal.Signals(signum).name, exc)
