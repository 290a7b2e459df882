"""The command-line entry of both console scripts (``owl-eval``, ``owl-eval-evaluate``): flags checked, every
error one ``error:`` line, a sweep that dies with its parent run closed."""

from __future__ import annotations

import sys
from typing import NoReturn

from owl_eval.runner.cli.flags import flags_first, unknown_flag_message
from owl_eval.runner.cli.overrides import repeated_argument_message


def run_cli(hydra_main, argv: list[str] | None = None, *, config_name: str = "config") -> int:
    """A console script's whole run, returning its exit code: ``checked_cli(hydra_main)`` on the command line
    ``argv`` (default: this process's ``sys.argv[1:]``). A ``SystemExit`` ends it as the interpreter would end the
    process: ``None`` is 0, a message is printed on stderr and is 1. ``cli()`` of ``owl_eval.runner.cli.main`` and
    ``owl_eval.runner.cli.evaluate`` call it; the tests call it in-process with their own ``argv``."""
    import sys

    saved_argv = sys.argv
    if argv is not None:
        sys.argv = [saved_argv[0] if saved_argv else "owl-eval", *argv]
    try:
        checked_cli(hydra_main, config_name=config_name)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr, flush=True)
        return 1
    finally:
        sys.argv = saved_argv
    return 0


def exit_without_teardown(code: int) -> NoReturn:
    """End the command with ``code`` as a normal exit would, less the interpreter's teardown of every module
    (0.3-1.8 s for MLflow's, SciPy's and scikit-learn's, on every command): threads that are not daemons are waited
    for, exit handlers run (logging flushed and closed, temporary folders removed, multiprocessing's children joined),
    the output streams are flushed, then the process ends."""
    import atexit
    import os
    import threading

    try:
        shutdown = getattr(threading, "_shutdown", None)  # what the interpreter calls first at exit
        if shutdown is not None:
            shutdown()
        atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe: nothing more can be said
                pass
        os._exit(code)


def checked_cli(hydra_main, *, config_name: str = "config") -> None:
    """Run a Hydra entry point after checking its group choices; every error, from Hydra or from a job, is
    one ``error:`` line on stderr (the traceback goes to the job's log file). A sweep whose launcher dies
    (a killed worker) does not leave its parent run RUNNING."""
    import sys

    from owl_eval.runner.cli.console import install_one_line_errors

    protocols_problem = _protocols_problem()  # two plugins registering one protocol name
    if protocols_problem:
        sys.exit(f"error: {protocols_problem}")
    problem = unknown_flag_message(sys.argv[1:]) or repeated_argument_message(sys.argv[1:])
    if problem:
        sys.exit(f"error: {problem}")
    if {"--help", "-h"} & set(sys.argv[1:]):
        sys.exit(_help(sys.argv[1:], config_name))
    sys.argv[1:] = flags_first(sys.argv[1:])
    install_one_line_errors()
    from owl_eval.runner.sweeps.termination import terminate_as_interrupt

    try:
        with terminate_as_interrupt():  # SIGTERM stops the command (and a sweep's jobs) as Ctrl-C does
            hydra_main()
    except BaseException as exc:
        _close_open_sweep(exc)
        raise


def _protocols_problem() -> str | None:
    """Why the installed protocols cannot be read (two plugins registering one name), before Hydra reads them
    in its search-path plugin, where an error would be a traceback."""
    from owl_eval.errors import ConfigError
    from owl_eval.protocols import all_protocols

    try:
        all_protocols()
    except ConfigError as exc:
        return str(exc)
    return None


def _help(args: list[str], config_name: str) -> int:
    """Print the help page (:mod:`owl_eval.runner.cli.help`) for ``args``; a config error is one line."""
    from pathlib import Path

    from owl_eval.runner.cli.console import one_line
    from owl_eval.runner.cli.help import help_page

    extra, overrides, skip = [], [], False
    for i, arg in enumerate(args):
        if skip:
            skip = False
        elif arg in ("--config-dir", "-cd"):
            extra.append(Path(args[i + 1]).resolve()) if i + 1 < len(args) else None
            skip = True
        elif arg.startswith("--config-dir="):
            extra.append(Path(arg.split("=", 1)[1]).resolve())
        elif not arg.startswith("-"):
            overrides.append(arg)
    try:
        page = help_page(config_name, overrides, app="owl-eval", extra=tuple(extra))
    except Exception as exc:  # an override that does not compose: the same one line as a run would print
        from hydra.errors import MissingConfigException

        from owl_eval.runner.config.groups import unknown_option_message

        message = None
        if isinstance(exc, MissingConfigException):
            message = unknown_option_message(str(exc.missing_cfg_file or ""), args, options=None)
        print(f"error: {message or one_line(exc)}", file=sys.stderr)
        return 1
    print(page)
    return 0


def _close_open_sweep(exc: BaseException) -> None:
    """End the parent run of a sweep this process opened when Hydra's main ends abnormally (KILLED after
    Ctrl-C, else FAILED). The one-line error handler turns the real error into ``SystemExit``: report the
    error it carries (``__context__``), e.g. joblib's TerminatedWorkerError for a killed worker."""
    if isinstance(exc, SystemExit) and exc.code in (0, None):
        return
    from owl_eval.runner.cli.console import USER_ERRORS, one_line
    from owl_eval.runner.sweeps.callbacks import abort_open_sweep

    cause = exc.__context__ if isinstance(exc, SystemExit) and exc.__context__ is not None else exc
    status = "KILLED" if isinstance(cause, KeyboardInterrupt) else "FAILED"
    abort_open_sweep(
        f"the sweep ended abnormally ({type(cause).__name__}: {one_line(cause)})"[:500],
        status=status,
        delete_if_empty=isinstance(cause, USER_ERRORS),
    )
