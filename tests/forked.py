"""A command line in a process of its own, forked from a warm interpreter instead of a new one.

The tests of what happens to a *process* (signals, ``kill -9``, an agent that segfaults or calls ``os._exit``, two
sweeps at once, a dead launcher) need the command in a process of its own, with its own pid, exit code and process
group; they do not need a new interpreter's ~4 s of imports each time. :func:`start` and :func:`run` fork such a
process from a multiprocessing *forkserver* that imported MLflow, Hydra, scikit-learn, SciPy, matplotlib and
owl-eval once (one per test worker): the child runs the same function the console script runs
(``owl_eval.runner.cli.entry.run_cli`` with the module's Hydra ``main``, as ``tests/inprocess.py`` does), with the
command's working directory, environment, ``sys.path`` (the working directory first and ``PYTHONPATH``, as
``python -m`` has them), standard streams on files and the default signal dispositions, then exits with the
command's exit code after running its ``atexit`` functions, as an interpreter does.

The forkserver is a new interpreter, not the test process: no pytest state, logging configuration or threads
are inherited. What stays different from ``python -m owl_eval``: the interpreter's start-up itself (``__main__``,
``-m`` resolution), which the tests that start real interpreters (``tests/runner/test_entry_points.py``, the joblib
and submitit sweeps, ``--help``) cover. ``OWL_EVAL_TEST_SUBPROCESS=1`` runs these commands as new interpreters too.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from tests.inprocess import COMPARE, ENTRY_MODULES, entry_of, subprocess_wanted

# imported once by the forkserver (a module that does not import is skipped): what a command's process imports
PRELOAD = [
    "owl_eval.runner.cli.main",
    "owl_eval.runner.cli.evaluate",
    "owl_eval.comparison.cli",
    "owl_eval.runner.job.live",
    "owl_eval.runner.sweeps.callbacks",
    "owl_eval.runner.cli.summary",
    "hydra._internal.hydra",
    "hydra._internal.instantiate._instantiate2",
    "mlflow.tracking",
    "mlflow.store.tracking.sqlalchemy_store",
    "mlflow.store.artifact.local_artifact_repo",
    "sqlalchemy.dialects.sqlite",
    "sklearn.datasets",
    "sklearn.neighbors",
    "scipy.stats",
    "matplotlib.pyplot",
    "threadpoolctl",
    "tqdm",
    "owl_eval.protocols.ond.driver",
    "owl_eval.protocols.ond.evaluation",
    "owl_eval.protocols.ond.agents.knn_novelty",
    "owl_eval.protocols.ond.agents.closed_world",
    "tests.fixtures.agents.ond.dying",
    "tests.fixtures.agents.ond.marking",
]

_context: multiprocessing.context.ForkServerContext | None = None


def _server() -> multiprocessing.context.ForkServerContext:
    global _context
    if _context is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        _context = context
    return _context


class Forked:
    """The running command: ``pid``, ``poll()``, ``wait(timeout)`` and ``returncode`` as on ``subprocess.Popen``
    (a command killed by signal N has returncode -N)."""

    def __init__(self, words: list[str], process: multiprocessing.process.BaseProcess):
        self.args = words
        self._process = process

    @property
    def pid(self) -> int:
        assert self._process.pid is not None
        return self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def poll(self) -> int | None:
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self._process.exitcode

    def kill(self) -> None:
        self._process.kill()


def start(
    words: list[str],
    *,
    cwd: str | os.PathLike,
    env: dict[str, str],
    stdout: str | os.PathLike,
    stderr: str | os.PathLike | None = None,
    new_session: bool = False,
) -> Forked | subprocess.Popen:
    """Start ``words`` (``python -m owl_eval ...``, ``owl-eval-evaluate ...``: one of the console scripts) with
    exactly the environment ``env``, its output appended to ``stdout`` (and ``stderr``, default: the same file);
    ``new_session``: in a process group of its own, as ``Popen(start_new_session=True)``."""
    entry = entry_of(words)
    if entry is None:
        raise ValueError(f"not an owl-eval command line: {words[:4]}")
    if subprocess_wanted():
        out = open(stdout, "a")  # noqa: SIM115 - the child holds it; closed with the test's tmp_path
        err = open(stderr, "a") if stderr is not None else subprocess.STDOUT  # noqa: SIM115
        return subprocess.Popen(
            words, cwd=cwd, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL, start_new_session=new_session
        )
    module, args = entry
    process = _server().Process(
        target=_command,
        args=(module, args, str(cwd), dict(env), str(stdout), str(stderr or stdout), new_session),
        daemon=False,
    )
    process.start()
    return Forked(words, process)


def run(
    words: list[str], *, cwd: str | os.PathLike, env: dict[str, str], timeout: float | None = None
) -> subprocess.CompletedProcess:
    """``subprocess.run(words, capture_output=True, text=True, timeout=timeout)`` with the command forked."""
    with tempfile.TemporaryDirectory(prefix="owl-eval-forked-") as folder:
        out, err = Path(folder) / "stdout", Path(folder) / "stderr"
        proc = start(words, cwd=cwd, env=env, stdout=out, stderr=err, new_session=True)
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            stop(proc)
            raise
        return subprocess.CompletedProcess(words, code, _read(out), _read(err))


def stop(proc: Forked | subprocess.Popen, grace: float = 30) -> None:
    """SIGTERM the command's process group (it was started with ``new_session``), SIGKILL it after ``grace``."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                proc.poll()
                return
            time.sleep(0.2)


def _read(path: Path) -> str:
    return path.read_bytes().decode("utf-8", errors="replace") if path.exists() else ""


def _command(module: str, args: list[str], cwd: str, env: dict[str, str], out: str, err: str, new_session: bool):
    """In the forked process: become the command's process and run it (never returns)."""
    code = 1
    try:
        if new_session:
            os.setsid()
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        stdin = os.open(os.devnull, os.O_RDONLY)
        os.dup2(stdin, 0)
        for fd, path in ((1, out), (2, err)):
            target = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(target, fd)
            os.close(target)
        # as in a new interpreter whose output is a file: UTF-8, line-buffered so the order of both is kept
        sys.stdout = open(1, "w", encoding="utf-8", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False)  # noqa: SIM115
        os.chdir(cwd)
        os.environ.clear()
        os.environ.update(env)
        python_path = [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry]
        sys.path[:0] = [cwd, *python_path]  # python -m: the working directory first, then PYTHONPATH
        sys.argv = [module, *args]
        code = _entry(module)(list(args))
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        try:
            atexit._run_exitfuncs()  # what an interpreter runs at its end (MLflow flushes, joblib stops workers)
        finally:
            for stream in (sys.stdout, sys.stderr):
                try:
                    stream.flush()
                except Exception:
                    pass
            os._exit(code)


def _entry(module: str):
    if module == COMPARE:
        from tests.inprocess import _compare_entry

        return _compare_entry
    import importlib

    from owl_eval.runner.cli.entry import run_cli

    main = importlib.import_module(ENTRY_MODULES[module]).main
    config_name = "evaluate" if ENTRY_MODULES[module].endswith("evaluate") else "config"
    return lambda argv: run_cli(main, argv, config_name=config_name)
