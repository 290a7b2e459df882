"""The console scripts run in the test process: ``python -m <module> <args>`` without the ~5 s start-up of a new
interpreter (importing MLflow, Hydra, scikit-learn, SciPy, matplotlib).

:func:`run_module` calls the same function the console script calls (``owl_eval.runner.cli.entry.run_cli`` with the
module's Hydra main) and hands back what ``subprocess.run(..., capture_output=True, text=True)`` would: the exit
code and everything written to file descriptors 1 and 2 (so Hydra's console log, prints, warnings and the
``error:`` line are all seen, as on a terminal). What a process exit would throw away is put back afterwards: the
working directory, the environment, ``sys.argv``, ``sys.path`` (a ``PYTHONPATH`` entry of ``env`` that is not on
it yet is put in front for the call, and the modules imported from there are forgotten afterwards), the logging
configuration (Hydra configures the root logger per job), Hydra's global state (GlobalHydra, HydraConfig, its
``run_and_report`` that the CLI replaces) and the sweep callback's open sweep; consecutive calls are independent.

Warnings are shown as a new interpreter would show them (Python's default filters, written to stderr): a warning
the real command line would print is on ``stderr`` here too. An exception escaping the entry point becomes a
traceback on stderr and exit code 1, as the interpreter reports it; ``timeout`` raises
``subprocess.TimeoutExpired`` (SIGALRM in the main thread, else checked when the call returns).

``OWL_EVAL_TEST_SUBPROCESS=1`` in the environment runs every call through a real ``python -m`` instead.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import warnings
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SUBPROCESS_ENV = "OWL_EVAL_TEST_SUBPROCESS"

# module given to ``python -m`` -> module whose Hydra ``main`` the console script runs
ENTRY_MODULES = {
    "owl_eval": "owl_eval.runner.cli.main",
    "runner": "owl_eval.runner.cli.main",
    "owl_eval.runner.cli.main": "owl_eval.runner.cli.main",
    "owl_eval.runner.cli.evaluate": "owl_eval.runner.cli.evaluate",
}
COMPARE = "owl_eval.comparison.cli"  # owl-eval-compare: no Hydra; its cli(argv) is the console script's function
# console script -> ``python -m`` module (the same ``cli()``)
SCRIPTS = {"owl-eval": "owl_eval", "owl-eval-evaluate": "owl_eval.runner.cli.evaluate", "owl-eval-compare": COMPARE}

MODULES = {*ENTRY_MODULES, COMPARE}

# What a new interpreter starts with (Python 3.11, no -W / PYTHONWARNINGS), latest-added first as in
# warnings.filters: DeprecationWarning shown only when raised by __main__.
DEFAULT_WARNING_FILTERS = (
    ("default", DeprecationWarning, "__main__"),
    ("ignore", DeprecationWarning, None),
    ("ignore", PendingDeprecationWarning, None),
    ("ignore", ImportWarning, None),
    ("ignore", ResourceWarning, None),
)


def subprocess_wanted() -> bool:
    return os.environ.get(SUBPROCESS_ENV, "") not in ("", "0")


def run_module(
    module: str,
    args: list[str],
    *,
    cwd: str | os.PathLike,
    env: dict[str, str] | None = None,
    unset: tuple[str, ...] = (),
    timeout: float | None = None,
    in_process: bool | None = None,
) -> subprocess.CompletedProcess:
    """``python -m <module> <args>`` from ``cwd``, with ``env`` added to the environment and ``unset`` removed
    from it: in this process unless ``in_process`` is False (default: unless ``OWL_EVAL_TEST_SUBPROCESS=1``)."""
    if in_process is None:
        in_process = not subprocess_wanted()
    if not in_process or (module not in ENTRY_MODULES and module != COMPARE):
        environ = {k: v for k, v in os.environ.items() if k not in unset} | (env or {})
        return subprocess.run(
            [sys.executable, "-m", module, *args],
            cwd=cwd,
            env=environ,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
    if module == COMPARE:
        entry = _compare_entry
    else:
        from owl_eval.runner.cli.entry import run_cli

        main = importlib.import_module(ENTRY_MODULES[module]).main

        config_name = "evaluate" if ENTRY_MODULES[module].endswith("evaluate") else "config"

        def entry(argv: list[str]) -> int:
            return run_cli(main, argv, config_name=config_name)

    started = time.monotonic()
    with _isolated(cwd, env or {}, unset), _captured_fds() as out, _warnings_to_stderr(), _deadline(module, timeout):
        try:
            code = entry(list(args))
        except Exception:  # what the interpreter does with an exception nobody caught
            traceback.print_exc()
            code = 1
    if timeout is not None and time.monotonic() - started > timeout:
        raise subprocess.TimeoutExpired([module, *args], timeout, out["stdout"], out["stderr"])
    return subprocess.CompletedProcess(["python", "-m", module, *args], code, out["stdout"], out["stderr"])


def _compare_entry(argv: list[str]) -> int:
    """``owl-eval-compare``'s ``cli`` on ``argv``; its exit code as the interpreter would make it."""
    from owl_eval.comparison.cli import cli

    try:
        cli(argv)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr, flush=True)
        return 1
    return 0


# -- what a process exit would reset ---------------------------------------------------------------------------
@contextlib.contextmanager
def _isolated(cwd, env: dict[str, str], unset: tuple[str, ...]):
    import hydra._internal.utils as hydra_utils
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.hydra_config import HydraConfig

    from owl_eval.runner.sweeps import callbacks

    saved_cwd = os.getcwd()
    saved_env = dict(os.environ)
    saved_path = list(sys.path)
    saved_modules = set(sys.modules)
    # PYTHONPATH entries a new interpreter would put on sys.path (e.g. a workspace with the user's agent module)
    present = {os.path.realpath(e or ".") for e in sys.path} | {str(PROJECT_ROOT)}
    added = [e for e in env.get("PYTHONPATH", "").split(os.pathsep) if e and os.path.realpath(e) not in present]
    saved_run_and_report = hydra_utils.run_and_report
    saved_hydra_config = HydraConfig.instance().cfg
    logging_state = _logging_state()
    root = logging.getLogger()
    for handler in list(root.handlers):  # a new process has none: WARNING and above go to stderr (lastResort)
        root.removeHandler(handler)
    root.setLevel(logging.WARNING)
    for key in unset:
        os.environ.pop(key, None)
    os.environ.update(env)
    GlobalHydra.instance().clear()
    HydraConfig.instance().cfg = None
    sys.path[:0] = added
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(saved_cwd)
        sys.path[:] = saved_path
        for name in set(sys.modules) - saved_modules:  # modules imported from those entries are forgotten
            file = getattr(sys.modules[name], "__file__", None) or ""
            if any(file.startswith(os.path.join(entry, "")) for entry in added):
                del sys.modules[name]
        os.environ.clear()
        os.environ.update(saved_env)
        hydra_utils.run_and_report = saved_run_and_report
        GlobalHydra.instance().clear()
        HydraConfig.instance().cfg = saved_hydra_config
        callbacks._open_sweep.clear()
        _restore_logging(logging_state)


def _loggers() -> list[logging.Logger]:
    manager = logging.Logger.manager
    return [logging.getLogger()] + [v for v in manager.loggerDict.values() if isinstance(v, logging.Logger)]


def _logging_state() -> dict:
    return {logger: (logger.level, list(logger.handlers), logger.propagate, logger.disabled) for logger in _loggers()}


def _restore_logging(state: dict) -> None:
    """Close the handlers the run added to loggers that existed before it (Hydra's job log file and console
    handler on the root logger) and put back their level, handlers, propagation and disabled flag. Loggers first
    made during the run keep what their modules set up at import."""
    for logger, (level, handlers, propagate, disabled) in state.items():
        for handler in logger.handlers:
            if handler not in handlers:
                with contextlib.suppress(Exception):
                    handler.close()
        logger.handlers[:] = handlers
        logger.propagate, logger.disabled = propagate, disabled
        logger.level = level  # Logger.setLevel would clear every logger's cache once per logger: once, below
    logging.Logger.manager._clear_cache()  # the cached isEnabledFor answers of every logger


@contextlib.contextmanager
def _captured_fds():
    """Everything written to file descriptors 1 and 2 (and so to ``sys.stdout`` / ``sys.stderr``, which are
    pointed at them) while the block runs; the texts are in the yielded dict afterwards."""
    out: dict[str, str] = {}
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    saved_streams = sys.stdout, sys.stderr
    saved_fds = os.dup(1), os.dup(2)
    files = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    try:
        os.dup2(files[0].fileno(), 1)
        os.dup2(files[1].fileno(), 2)
        # as in a new interpreter whose output is a pipe: UTF-8, line-buffered here so the order of both is kept
        sys.stdout = open(1, "w", encoding="utf-8", errors="strict", buffering=1, closefd=False)
        sys.stderr = open(2, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False)
        try:
            yield out
        finally:
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            sys.stdout, sys.stderr = saved_streams
            os.dup2(saved_fds[0], 1)
            os.dup2(saved_fds[1], 2)
            for name, file in zip(("stdout", "stderr"), files):
                file.seek(0)
                out[name] = file.read().decode("utf-8", errors="replace")
    finally:
        for fd in saved_fds:
            os.close(fd)
        for file in files:
            file.close()


@contextlib.contextmanager
def _warnings_to_stderr():
    """Warnings filtered as in a new interpreter and printed on (the captured) stderr when the block ends."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.resetwarnings()
        for action, category, module in reversed(DEFAULT_WARNING_FILTERS):
            if module is None:
                warnings.simplefilter(action, category)
            else:
                warnings.filterwarnings(action, category=category, module=module)
        try:
            yield
        finally:
            for w in caught:
                sys.stderr.write(warnings.formatwarning(w.message, w.category, w.filename, w.lineno, w.line))
            sys.stderr.flush()


class _Deadline(BaseException):
    """Raised by SIGALRM when a call runs past its timeout (a BaseException: no ``except Exception`` eats it)."""


@contextlib.contextmanager
def _deadline(module: str, timeout: float | None):
    if timeout is None or threading.current_thread() is not threading.main_thread():
        yield  # checked by the caller when the call returns
        return

    def expire(signum, frame):
        raise _Deadline

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    try:
        yield
    except _Deadline:
        raise subprocess.TimeoutExpired([module], timeout) from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def entry_of(words: list[str]) -> tuple[str, list[str]] | None:
    """``(module, args)`` when ``words`` start one of the console scripts (``owl-eval``, ``owl-eval-evaluate``,
    ``owl-eval-compare``, ``python -m owl_eval`` and the like), else None."""
    if words and words[0] in SCRIPTS:
        return SCRIPTS[words[0]], words[1:]
    if len(words) >= 3 and Path(words[0]).name.startswith("python") and words[1] == "-m" and words[2] in MODULES:
        return words[2], words[3:]
    return None


def run_words(
    words: list[str], *, cwd: str | os.PathLike, env: dict[str, str], timeout: float | None = None
) -> subprocess.CompletedProcess:
    """A command line as a shell would run it with the environment ``env``: one of the console scripts in this
    process (:func:`run_module`), anything else as a subprocess."""
    entry = entry_of(words)
    if entry is None or subprocess_wanted():
        return subprocess.run(
            words, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
        )
    changed = {k: v for k, v in env.items() if os.environ.get(k) != v}
    gone = tuple(k for k in os.environ if k not in env)
    return run_module(entry[0], entry[1], cwd=cwd, env=changed, unset=gone, timeout=timeout)
