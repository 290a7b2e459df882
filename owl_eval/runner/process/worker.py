"""A job's work in a process of its own; its MLflow run in the process that launched it.

The work (build the agents and the data, run them, score the record, draw the figures) runs in a child process
forked for the job, while this process owns the MLflow run (:func:`owl_eval.runner.job.execute.execute`). Two things
follow:

- **A run is never left behind by its agent.** An agent that calls ``os._exit``, crashes below Python (a
  segfault in native code) or is killed (the kernel's out-of-memory killer, ``kill -9``) ends the child, not the
  run's owner: the run ends FAILED with the reason as its ``error`` tag and the command exits 1.
  ``sys.exit()`` inside an agent is the agent's crash, not success. Ctrl-C (SIGINT) and SIGTERM (what Slurm,
  ``docker stop`` and Kubernetes send) are passed to the child, which scores what was completed; this process
  logs it and ends the run KILLED (exit 130 and 143). A child that has not stopped :data:`SIGNAL_GRACE_SECONDS`
  later (its agent installed handlers of its own, or is stuck in native code) is killed.
- **A killed child's completed work is kept.** The child saves the record so far after each completed unit
  (:class:`owl_eval.runner.job.scoring.ProgressSaver`); when it is killed (here, or from outside), this process scores and
  logs the latest save.
- **Nothing the agent starts outlives the job.** The child is a subreaper: the processes its agent starts stay
  its descendants, and those still running when its work is over are ended (:func:`end_descendants`).
- **The two halves overlap.** MLflow's SQL store costs ~0.9 s to import and the agents' libraries (scikit-learn,
  SciPy, matplotlib) more; with two cores they load at once.
- **Libraries load once per process, not once per job.** A job's process tells this one which installed
  libraries it imported (:func:`_library_modules`: modules of the standard library, site-packages and owl-eval,
  never the user's own files); the next job's fork imports them here first, so the jobs after it inherit them
  instead of importing scikit-learn and SciPy again (a sweep's worker runs many jobs). Libraries whose threads or
  devices do not survive a fork (torch, TensorFlow, JAX) are left to each job.

Where ``os.fork`` is not safe or not there (not Linux), in the Python API (:func:`owl_eval.runner.api.run`: a
notebook's kernel must not be forked), and with ``OWL_EVAL_JOB_PROCESS=inline`` (to step through an agent in a
debugger), the work runs in this process. The child writes to the same stdout, stderr and job log file.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import pickle
import select
import signal
import sys
import threading
import time
import traceback
import warnings
from collections.abc import Callable
from typing import Any

from owl_eval.errors import ConfigError, Terminated
from owl_eval.tracking.liveness import process_alive

JOB_PROCESS_ENV = "OWL_EVAL_JOB_PROCESS"
CARRIED_ATTRIBUTE = "owl_eval_carried"
POLL_SECONDS = 0.05
# not imported ahead of a fork: thread pools, CUDA contexts and GUI toolkits that a forked child cannot use
NOT_WARMED = ("torch", "tensorflow", "jax", "jaxlib", "cupy", "tkinter", "_tkinter", "PyQt5", "PyQt6", "PySide")
_warm_modules: list[str] = []  # libraries an earlier job's process imported (see the module docstring)
_EXITING = threading.Event()  # set in a job's process once its work is over
# The stop signals (SIGINT, SIGTERM) this process received while a job ran in it: a KeyboardInterrupt without one
# was raised by the agent itself (as_agent_crash)
_SIGNALS_RECEIVED: list[int] = []
PREPARE_STEP = "building the job's data and agents"
RECORD_STEP = "running the agents"
_STEP = [PREPARE_STEP]  # where the job's process is, for agent_timeout's message

# what a signal that ended the job's process usually means, for the one-line reason
SIGNAL_HINTS = {
    "SIGSEGV": "a crash in native code",
    "SIGBUS": "a crash in native code",
    "SIGABRT": "aborted in native code",
    "SIGFPE": "a crash in native code",
    "SIGILL": "a crash in native code",
    "SIGKILL": "the kernel's out-of-memory killer or kill -9",
}


class JobProcessDied(RuntimeError):
    """The job's process ended without handing over its result (os._exit, a native crash, a kill)."""


class AgentRaisedInterrupt(RuntimeError):
    """An agent raised KeyboardInterrupt (or a subclass) with no Ctrl-C or signal behind it: its crash, like any
    other exception it raises (the run ends FAILED, a sweep goes on), not an interruption of the command."""


def as_agent_crash(exc: BaseException, *, signalled: bool) -> BaseException:
    """``exc``, or, for a KeyboardInterrupt no signal caused (``signalled`` false), :class:`AgentRaisedInterrupt`
    with ``exc`` as its cause (its traceback shows where the agent raised it)."""
    if not isinstance(exc, KeyboardInterrupt) or signalled:
        return exc
    what = type(exc).__name__ + (f": {exc}" if str(exc) else "")
    crash = AgentRaisedInterrupt(f"the agent raised {what} with no Ctrl-C or signal sent; treated as its crash")
    crash.__cause__ = exc
    return crash


class AgentTimeout(RuntimeError):
    """The record step ran past ``agent_timeout``: raised in the job's process (SIGUSR1), so what was completed
    is kept, or here when it did not stop within :data:`STOP_GRACE_SECONDS`."""


STOP_GRACE_SECONDS = 10.0
# After passing SIGINT/SIGTERM on to the job's process: how long it may take to stop and hand over what it completed
# before it is killed (an agent that installed its own handlers, or one stuck in native code, never stops); the run
# then ends KILLED with the units its process saved as it went (owl_eval.protocols.base.keep_partial).
SIGNAL_GRACE_SECONDS = 10.0
# Processes the agent started (a data loader's workers, a server under setsid) that outlive the job's work get SIGTERM,
# then SIGKILL this many seconds later: they must not keep the command's output open, nor use the machine.
DESCENDANT_GRACE_SECONDS = 2.0


def fork_wanted(*, in_process: bool = False) -> bool:
    """Whether this job's work runs in a forked child (see the module docstring)."""
    mode = os.environ.get(JOB_PROCESS_ENV, "fork").strip().lower() or "fork"
    if mode not in ("fork", "inline"):
        raise ConfigError(f"{JOB_PROCESS_ENV}={mode!r}: expected 'fork' (the default) or 'inline'")
    return not in_process and mode == "fork" and sys.platform.startswith("linux") and hasattr(os, "fork")


def inline_reason(*, in_process: bool = False) -> str:
    """Why a job's work runs in the launching process."""
    if in_process:
        return "the Python API runs jobs in its own process"
    if os.environ.get(JOB_PROCESS_ENV, "").strip().lower() == "inline":
        return f"{JOB_PROCESS_ENV}=inline"
    return f"forking a job's process is done on Linux only, not on {sys.platform}"


def death_reason(status: int) -> str:
    """One line for a wait status of a job process that ended without its result."""
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            name = signal.Signals(number).name
        except ValueError:
            name = f"signal {number}"
        hint = SIGNAL_HINTS.get(name)
        return f"the job's process was killed by signal {number} ({name}{': ' + hint if hint else ''})"
    code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else status
    return (
        f"the job's process exited with code {code} before handing over its result "
        "(os._exit or an exit from native code inside the agent)"
    )


def carried_by(exc: BaseException) -> Any | None:
    """What the failed step's ``carried(prepared, exc)`` kept (e.g. the scored partial record), or None."""
    return getattr(exc, CARRIED_ATTRIBUTE, None)


def _carry(exc: BaseException, extra: Any) -> None:
    if extra is not None:
        with contextlib.suppress(AttributeError, TypeError):
            setattr(exc, CARRIED_ATTRIBUTE, extra)


class InlineWorker:
    """The work in this process: :meth:`prepared` and :meth:`result` call the two steps directly."""

    def __init__(
        self,
        prepare: Callable[[], Any],
        finish: Callable[[Any], Any],
        *,
        header: Callable[[Any], Any],
        carried: Callable[[Any, BaseException], Any] = lambda prepared, exc: None,
    ):
        from owl_eval.runner.process.short_tmp import fit_socket_paths

        fit_socket_paths()  # an agent's multiprocessing sockets fit, whatever $TMPDIR is
        self._prepare, self._finish, self._header, self._carried = prepare, finish, header, carried
        self._prepared: Any = None

    def prepared(self) -> Any:
        self._prepared = self._prepare()
        return self._header(self._prepared)

    def result(self) -> Any:
        received: list[int] = []
        previous = _note_signals(received)
        try:
            return self._finish(self._prepared)
        except BaseException as exc:
            crash = as_agent_crash(exc, signalled=bool(received))
            _carry(crash, _safely(self._carried, self._prepared, exc, portable=False))
            if crash is exc:
                raise
            raise crash from exc
        finally:
            if previous is not None:
                for number, handler in previous.items():
                    signal.signal(number, handler)

    def close(self) -> None:
        pass


class ForkedWorker:
    """The work in a forked child. The child runs ``prepare()``, hands over ``header(prepared)``, runs
    ``finish(prepared)`` and hands over what it returns; with ``wait_for_go`` it waits for :meth:`result` before
    ``finish`` (a resumed sweep may find the job done already), else it goes on while this process opens the MLflow
    run. An exception in either step is raised here with the child's traceback as a note, carrying what
    ``carried(prepared, exc)`` kept of it (:func:`carried_by`).

    While the child lives, SIGINT and SIGTERM sent to this process are passed on to it (it stops and hands over
    what it completed; this process then logs that and raises KeyboardInterrupt or :class:`Terminated`); a second
    one, or :data:`SIGNAL_GRACE_SECONDS` without an answer, kills the child (and the raised exception carries
    nothing: the caller falls back on what the child saved as it went). Signal handlers can only be set in the
    main thread: elsewhere nothing changes."""

    def __init__(
        self,
        prepare: Callable[[], Any],
        finish: Callable[[Any], Any],
        *,
        header: Callable[[Any], Any],
        carried: Callable[[Any, BaseException], Any] = lambda prepared, exc: None,
        wait_for_go: bool = False,
        timeout: float | None = None,
    ):
        import multiprocessing.connection

        from owl_eval.runner.process.short_tmp import fit_socket_paths

        fit_socket_paths()  # an agent's multiprocessing sockets fit in the job's process, whatever $TMPDIR is
        _warm_up()
        _flush()  # else the child would write this process's buffered text a second time
        ours, theirs = multiprocessing.connection.Pipe()
        pid = os.fork()
        if pid == 0:  # the child: whatever happens, it ends here and never returns into the caller's code
            code = 1
            try:
                try:
                    ours.close()
                    _as_multiprocessing_child()
                    _become_subreaper()
                    code = _child(theirs, prepare, finish, header, carried, wait_for_go, timeout)
                finally:
                    _EXITING.set()  # from here on a signal raises nothing (see _stop_on_first_signal)
                    _run_exit_finalizers()
                    end_descendants()
            except BaseException:  # noqa: BLE001, S110 - a signal that came just before
                pass
            _flush()
            os._exit(code)
        theirs.close()
        self.pid = pid
        self.pidfd = _pidfd(pid)
        self.conn = ours
        self.wait_for_go = wait_for_go
        self.timeout = timeout
        self.status: int | None = None
        self.stopped_by: list[int] = []  # the signals passed on to the child
        self.stop_asked_at: float | None = None  # when the first of them was passed on
        # where the child is: "preparing", "waiting" (for "go"), "working", "ending" (it sent its result or error)
        self.stage = "preparing"
        self._previous_handlers = self._pass_signals_on()

    def prepared(self) -> Any:
        """What ``header(prepared)`` returned in the child; with a ``timeout``, the prepare step (building the
        data and agents) is held to it too, as :meth:`result` holds the record step."""
        header = self._expect("prepared", timeout=self.timeout)
        self.stage = "waiting" if self.wait_for_go else "working"
        return header

    def result(self) -> Any:
        """What ``finish`` returned. With a ``timeout`` (seconds from now), a child still working then is asked to
        stop (:class:`AgentTimeout` raised in it, so what it completed is handed over), and killed if it has not
        stopped :data:`STOP_GRACE_SECONDS` later."""
        try:
            if self.wait_for_go:
                try:
                    self.conn.send("go")
                except OSError:  # it ended while waiting (a signal passed on to it): its message or its end says why
                    pass
                self.stage = "working"
            return self._expect("done", timeout=self.timeout)
        finally:
            self._restore_signals()  # the child is done: a signal now stops this process as usual

    def close(self) -> None:
        """Stop the child if it still runs (a job skipped or failed here), then reap it."""
        self._restore_signals()
        if self.stage == "waiting":  # a resumed sweep's job found done: "stop" ends its wait at once
            with contextlib.suppress(OSError):
                self.conn.send("stop")
        if self.status is None and not self._wait(5.0 if self.stage in ("waiting", "ending") else 0.5):
            with contextlib.suppress(OSError):
                self.conn.send("stop")
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGTERM)
            if not self._wait(5.0):
                self._kill()
        self.conn.close()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None

    # -- this process's side of the exchange ----------------------------------------------------------------
    def _expect(self, what: str, *, timeout: float | None = None) -> Any:
        message = self._receive(timeout)
        if message[0] == "modules":
            _warm_modules.extend(message[1])
            message = self._receive(timeout)
        if message[0] == what:
            if what == "done":
                self.stage = "ending"
                if self.stopped_by:  # it finished although asked to stop (its agent ignored the signal)
                    stopped: BaseException = Terminated() if signal.SIGTERM in self.stopped_by else KeyboardInterrupt()
                    _carry(stopped, message[1])
                    raise stopped
            return message[1]
        _, error, child_traceback, extra = message
        self.stage = "ending"  # the child returns right after sending its error
        error.add_note(f"raised in the job's process (pid {self.pid}):\n{child_traceback.rstrip()}")
        _carry(error, extra)
        raise error

    def _receive(self, timeout: float | None = None) -> tuple:
        deadline = None if timeout is None else time.monotonic() + timeout
        asked_to_stop = False
        while True:
            if deadline is not None and time.monotonic() >= deadline:
                if asked_to_stop:
                    self._kill()
                    step = "" if self.stage != "preparing" else f" ({PREPARE_STEP})"
                    raise AgentTimeout(
                        f"the agent did not finish within agent_timeout={timeout:g} s{step}, nor stop "
                        f"{STOP_GRACE_SECONDS:g} s after being asked; its process was killed"
                    )
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGUSR1)
                asked_to_stop, deadline = True, time.monotonic() + STOP_GRACE_SECONDS
            if self.stop_asked_at is not None and time.monotonic() - self.stop_asked_at >= SIGNAL_GRACE_SECONDS:
                self._kill()  # it did not stop when asked: what it saved as it went is the completed part
                break
            if self.conn.poll(POLL_SECONDS):
                try:
                    return self.conn.recv()
                except EOFError:
                    pass
            if self.status is not None or self._wait(0):
                if self.conn.poll(0):  # sent just before it ended
                    with contextlib.suppress(EOFError):
                        return self.conn.recv()
                break
        if self.stopped_by:
            raise Terminated() if signal.SIGTERM in self.stopped_by else KeyboardInterrupt()
        raise JobProcessDied(death_reason(self.status if self.status is not None else 0))

    def _kill(self) -> None:
        """SIGKILL the child, reap it, and end the processes it left (its agent's: they are its descendants, as
        it is their subreaper)."""
        left = process_tree(self.pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        self._wait(None)
        end_processes(left)

    def _wait(self, timeout: float | None) -> bool:
        """Reap the child within ``timeout`` seconds (None: until it ends); whether it has ended."""
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = 0.001  # a child that has handed over its result ends within milliseconds: look again soon
        while not self._reaped():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return False
            if self.pidfd is not None:  # readable the moment the child ends
                select.select([self.pidfd], [], [], left)
            else:
                time.sleep(pause if left is None else min(pause, left))
                pause = min(2 * pause, POLL_SECONDS)
        return True

    def _reaped(self) -> bool:
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            self.status = self.status if self.status is not None else 0
            return True
        if pid:
            self.status = status
        return bool(pid)

    def _pass_signals_on(self) -> dict | None:
        if threading.current_thread() is not threading.main_thread():
            return None

        def pass_on(signum, frame):
            kill = signal.SIGKILL if self.stopped_by else signum
            self.stopped_by.append(signum)
            if self.stop_asked_at is None:
                self.stop_asked_at = time.monotonic()
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, kill)

        return {s: signal.signal(s, pass_on) for s in (signal.SIGINT, signal.SIGTERM)}

    def _restore_signals(self) -> None:
        if self._previous_handlers:
            for s, handler in self._previous_handlers.items():
                signal.signal(s, handler)
            self._previous_handlers = None


def _note_signals(received: list[int]) -> dict | None:
    """While a job runs in this process (main thread only): SIGINT and SIGTERM are appended to ``received``, then do
    what they did before (the handler in place is called, or KeyboardInterrupt raised for Python's default)."""
    if threading.current_thread() is not threading.main_thread():
        return None
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def note(signum, frame):
        received.append(signum)
        handler = previous[signum]
        if callable(handler):
            return handler(signum, frame)
        if handler == signal.SIG_DFL and signum == signal.SIGINT:
            raise KeyboardInterrupt
        if handler == signal.SIG_DFL:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
        return None

    for number in previous:
        signal.signal(number, note)
    return previous


# -- the child's side ----------------------------------------------------------------------------------------
def _child(conn, prepare, finish, header, carried, wait_for_go: bool, timeout: float | None) -> int:
    _die_with_parent()
    _stop_on_first_signal(timeout)
    # a warning goes to this process's stderr at once (a recorder set up by the caller would die with the copy)
    warnings.showwarning = _print_warning
    already = set(sys.modules)
    prepared = None
    try:
        prepared = prepare()
        # what building imported, handed over now: a job a resumed sweep finds done stops here, and the next job's
        # process still inherits scikit-learn and SciPy instead of importing them again
        _send_modules(conn, already)
        already = set(sys.modules)
        conn.send(("prepared", header(prepared)))
        if wait_for_go and conn.recv() != "go":
            return 0
        _STEP[0] = RECORD_STEP
        result = finish(prepared)
    except BaseException as exc:  # noqa: BLE001 - every way out is handed to the parent
        _flush()
        extra = _safely(carried, prepared, exc)  # before _portable drops what the exception carries
        _send_modules(conn, already)  # a job that stops on bad input imported what the next one needs too
        conn.send(("error", *_portable(as_agent_crash(exc, signalled=bool(_SIGNALS_RECEIVED))), extra))
        return 1
    _flush()
    _send_modules(conn, already)
    conn.send(("done", result))
    return 0


def _send_modules(conn, already: set[str]) -> None:
    with contextlib.suppress(Exception):  # only an optimisation: never in the way of the job's own outcome
        conn.send(("modules", _library_modules(already)))


def _library_roots() -> tuple[str, ...]:
    import sysconfig

    import owl_eval

    paths = sysconfig.get_paths()
    roots = {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    roots.add(os.path.dirname(owl_eval.__file__))
    return tuple(os.path.join(os.path.realpath(r), "") for r in roots)


def _library_modules(already: set[str]) -> list[str]:
    """The modules imported since ``already`` whose files are installed libraries (standard library,
    site-packages, owl-eval), in the order they were imported; none of :data:`NOT_WARMED`."""
    roots = _library_roots()
    names = []
    for name, module in list(sys.modules.items()):
        if name in already or name.split(".", 1)[0] in NOT_WARMED:
            continue
        path = getattr(module, "__file__", None)
        if isinstance(path, str) and os.path.realpath(path).startswith(roots):
            names.append(name)
    return names


def _warm_up() -> None:
    """Import what earlier jobs' processes imported (:func:`_library_modules`), once, before the next fork. Figures
    are files: matplotlib gets its Agg backend first, as owl-eval's figure code gives it."""
    names, _warm_modules[:] = list(dict.fromkeys(_warm_modules)), []
    names = [n for n in names if n not in sys.modules]
    if not names:
        return
    if any(n.startswith("matplotlib") for n in names):
        with contextlib.suppress(Exception):
            import matplotlib

            matplotlib.use("Agg")
    for name in names:
        with contextlib.suppress(Exception):  # an import that fails here is the next job's to report
            importlib.import_module(name)


def _as_multiprocessing_child() -> None:
    """What ``multiprocessing`` does in a process it forks: the parent's exit finalizers are the parent's (they must
    not run here), and its after-fork hooks run."""
    util: Any = importlib.import_module("multiprocessing.util")  # private helpers: untyped on purpose
    util._finalizer_registry.clear()
    util._run_after_forkers()


def _pidfd(pid: int) -> int | None:
    """A file descriptor that becomes readable when process ``pid`` ends (Linux 5.3+), or None."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _run_exit_finalizers() -> None:
    """The exit finalizers of what the job created, as a ``multiprocessing`` child runs them before ``os._exit``: a
    semaphore (tqdm's lock, joblib's) is then released, not reported "leaked" by the launcher's resource tracker
    at the end of a joblib sweep, one per job."""
    util: Any = importlib.import_module("multiprocessing.util")
    with contextlib.suppress(Exception):
        util._run_finalizers(0)
        util._run_finalizers()


def _die_with_parent() -> None:
    """Linux: the kernel kills this process when its parent dies (``kill -9`` of the command, a lost launcher):
    nobody would log what it computes, and it must not go on using the machine."""
    parent = os.getppid()
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_DEATHSIG = 1
    except (OSError, AttributeError):  # not Linux's libc: the child ends when it finds the pipe closed
        return
    if os.getppid() != parent:  # the parent died before prctl took effect
        os._exit(1)


def _become_subreaper() -> None:
    """Linux: the processes the agent starts and leaves (a double fork, ``setsid``) become this process's children
    when their parent ends, not init's, so that :func:`end_descendants` finds them all."""
    with contextlib.suppress(OSError, AttributeError):
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER = 36


def end_descendants() -> None:
    """At the end of the job's process: the processes its agent started and left running get SIGTERM, then
    SIGKILL after :data:`DESCENDANT_GRACE_SECONDS` (multiprocessing's resource tracker is spared: it ends by
    itself once this process has ended, after releasing what it tracks)."""
    with contextlib.suppress(Exception):  # tidying up must never change the job's own outcome
        if not _has_children():
            return
        spared = set()
        with contextlib.suppress(Exception):
            tracker = importlib.import_module("multiprocessing.resource_tracker")._resource_tracker._pid
            if tracker:
                spared.add(tracker)
        end_processes([p for p in process_tree(os.getpid()) if p not in spared], reap=True)


def _has_children() -> bool:
    """Whether this process has a child (cheap: /proc/self/task/*/children, Linux 3.5+; else assumed so)."""
    try:
        tasks = os.listdir("/proc/self/task")
        return any(open(f"/proc/self/task/{t}/children").read().strip() for t in tasks)
    except OSError:
        return sys.platform.startswith("linux")


def process_tree(root: int) -> list[int]:
    """The live descendants of ``root`` (from /proc; empty where there is none), parents before children."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for name in entries:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rindex(b")") + 2 :].split()
        if fields[0] != b"Z":
            children.setdefault(int(fields[1]), []).append(int(name))
    found, queue = [], list(children.get(root, []))
    while queue:
        pid = queue.pop(0)
        found.append(pid)
        queue.extend(children.get(pid, []))
    return found


def end_processes(pids: list[int], *, reap: bool = False) -> None:
    """SIGTERM to ``pids``, SIGKILL to those still there :data:`DESCENDANT_GRACE_SECONDS` later; with ``reap``
    (this process is their parent or subreaper), their exit statuses are collected as they end."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    if _wait_gone(pids, DESCENDANT_GRACE_SECONDS, reap=reap):
        return
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    _wait_gone(pids, 1.0, reap=reap)


def _wait_gone(pids: list[int], seconds: float, *, reap: bool) -> bool:
    """Within ``seconds``, whether every process of ``pids`` has ended (reaping this process's children)."""
    deadline, pause = time.monotonic() + seconds, 0.001
    while True:
        if reap:
            with contextlib.suppress(ChildProcessError):
                while os.waitpid(-1, os.WNOHANG)[0]:
                    pass
        if not any(process_alive(p) for p in pids):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(2 * pause, POLL_SECONDS)


def _stop_on_first_signal(timeout: float | None) -> None:
    """SIGINT raises KeyboardInterrupt and SIGTERM :class:`Terminated`, once: while the child scores what was
    completed, a second signal (the terminal's Ctrl-C also reaches the parent, which passes it on) is ignored.
    SIGUSR1 (the parent's ``agent_timeout``) raises :class:`AgentTimeout`. A process the agent forks inherits
    these handlers: there a signal does what it does by default (so that :func:`end_descendants` ends it quietly)."""
    job = os.getpid()

    def stop(signum, frame):
        if os.getpid() != job:
            return _by_default(signum)
        _SIGNALS_RECEIVED.append(signum)
        if _EXITING.is_set():
            return
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise Terminated() if signum == signal.SIGTERM else KeyboardInterrupt()

    def time_out(signum, frame):
        if os.getpid() != job:
            return _by_default(signum)
        if _EXITING.is_set():
            return
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        step = "" if _STEP[0] == RECORD_STEP else f" ({_STEP[0]})"
        raise AgentTimeout(f"the agent did not finish within agent_timeout={timeout:g} s{step}; stopped")

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGUSR1, time_out)


def _by_default(signum: int) -> None:
    """What ``signum`` does to a Python process that set no handler: KeyboardInterrupt for SIGINT, else the
    system's default action (SIGTERM and SIGUSR1 end the process)."""
    if signum == signal.SIGINT:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        raise KeyboardInterrupt
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def _print_warning(message, category, filename, lineno, file=None, line=None) -> None:
    sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))
    sys.stderr.flush()


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def _safely(carried: Callable[[Any, BaseException], Any], prepared: Any, exc: BaseException, *, portable=True) -> Any:
    if prepared is None:
        return None
    try:
        extra = carried(prepared, exc)
        if portable:
            pickle.dumps(extra)
        return extra
    except BaseException:  # noqa: BLE001 - what was completed must never hide the error itself
        return None


def _portable(exc: BaseException) -> tuple[BaseException, str]:
    """``exc`` as it can cross to the parent (an exception that does not pickle becomes one of its nearest
    standard kind with the same message) and its traceback text."""
    text = "".join(traceback.format_exception(exc))
    from owl_eval.protocols.base import PARTIAL_ATTRIBUTE

    if hasattr(exc, "__dict__"):
        vars(exc).pop(PARTIAL_ATTRIBUTE, None)  # the record was scored in this process; it does not cross
    try:
        copy = pickle.loads(pickle.dumps(exc))
        if type(copy) is type(exc) and str(copy) == str(exc):
            return exc, text
    except Exception:  # noqa: BLE001 - user exception classes need not pickle
        pass
    kind = next((k for k in (ValueError, OSError, KeyboardInterrupt) if isinstance(exc, k)), RuntimeError)
    return kind(f"{type(exc).__name__}: {exc}" if kind is RuntimeError else str(exc)), text
