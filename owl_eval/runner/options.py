"""Listing the options of each config group, and checking command-line choices before Hydra runs.

Hydra lists the available options only for flat groups; ``agent=ond/nope`` would just say "could not
find". This check names the group and every valid option, nested ones included.
"""

from __future__ import annotations

import re
from pathlib import Path

from owl_eval.paths import CONFIG_DIR, group_options  # noqa: F401  (group_options re-exported)

GROUPS = ("domain", "protocol", "agent", "baseline", "metrics", "tracking", "experiment", "source", "syllabus")
_CHOICE = re.compile(r"^(?:\+|\+\+|~)?(?P<group>[a-z_]+)=(?P<value>[^=]*)$")
_SEARCHPATH = re.compile(r"^(?:\+|\+\+)?hydra\.searchpath=\[?(?P<paths>[^\]]*)\]?$")


def searchpath_dirs(args: list[str]) -> list[Path]:
    """Config directories added on the command line with ``hydra.searchpath=[file://DIR,...]`` (how the tests add
    their test-only agents without listing them to users); ``pkg://`` entries are not looked into."""
    dirs: list[Path] = []
    for arg in args:
        match = _SEARCHPATH.match(arg)
        if match:
            entries = (e.strip().strip("'\"") for e in match["paths"].split(","))
            dirs += [Path(e.removeprefix("file://")) for e in entries if e and "://" not in e.removeprefix("file://")]
    return dirs


def unknown_choice_message(args: list[str], config_dir: Path = CONFIG_DIR) -> str | None:
    """An error message for the first command-line choice of a missing group option, else None."""
    dirs = [config_dir, *searchpath_dirs(args)]
    for arg in args:
        match = _CHOICE.match(arg)
        if not match or match["group"] not in GROUPS or not (config_dir / match["group"]).is_dir():
            continue
        group, value = match["group"], match["value"]
        if value in ("null", "") or value.startswith(("choice(", "glob(", "range(")):
            continue
        options = sorted({option for d in dirs for option in group_options(group, d)})
        missing = [v for v in value.split(",") if v not in options]
        if missing:
            return f"unknown {group} option {missing[0]!r} in '{arg}'. Valid options for {group}: " + ", ".join(options)
    return None


BARE_FLAGS = ("-m", "--multirun", "--run", "--resolve", "--help", "--hydra-help", "--version")


VALUE_FLAGS = (
    "--cfg",
    "-c",
    "--package",
    "-p",
    "--config-path",
    "-cp",
    "--config-name",
    "-cn",
    "--config-dir",
    "-cd",
    "--info",
    "-i",
    "--experimental-rerun",
    "--shell-completion",
    "-sc",
    "-h",
)


def unknown_flag_message(args: list[str]) -> str | None:
    """One line for a command-line flag Hydra does not know (its parser would print the whole usage)."""
    for arg in args:
        if arg.startswith("-") and arg not in BARE_FLAGS + VALUE_FLAGS and arg.split("=", 1)[0] not in VALUE_FLAGS:
            return (
                f"unknown flag {arg!r}; overrides are key=value (e.g. seed=1), flags are "
                + ", ".join(BARE_FLAGS)
                + " (--help lists them)"
            )
    return None


def flags_first(args: list[str]) -> list[str]:
    """Hydra's argument parser rejects ``seed=1 -m``; a bare flag anywhere means the same as in front."""
    return [a for a in args if a in BARE_FLAGS] + [a for a in args if a not in BARE_FLAGS]


def checked_cli(hydra_main) -> None:
    """Run a Hydra entry point after checking its group choices; every error, from Hydra or from a job, is
    one ``error:`` line on stderr (the traceback goes to the job's log file). A sweep whose launcher dies
    (a killed worker) does not leave its parent run RUNNING."""
    import sys

    from owl_eval.runner.console import install_one_line_errors

    problem = unknown_flag_message(sys.argv[1:]) or unknown_choice_message(sys.argv[1:])
    if problem:
        sys.exit(f"error: {problem}")
    sys.argv[1:] = flags_first(sys.argv[1:])
    install_one_line_errors()
    try:
        hydra_main()
    except BaseException as exc:
        _close_open_sweep(exc)
        raise


def _close_open_sweep(exc: BaseException) -> None:
    """End the parent run of a sweep this process opened when Hydra's main ends abnormally (KILLED after
    Ctrl-C, else FAILED). The one-line error handler turns the real error into ``SystemExit``: report the
    error it carries (``__context__``), e.g. joblib's TerminatedWorkerError for a killed worker."""
    if isinstance(exc, SystemExit) and exc.code in (0, None):
        return
    from owl_eval.runner.callbacks import abort_open_sweep
    from owl_eval.runner.console import USER_ERRORS

    cause = exc.__context__ if isinstance(exc, SystemExit) and exc.__context__ is not None else exc
    status = "KILLED" if isinstance(cause, KeyboardInterrupt) else "FAILED"
    abort_open_sweep(
        f"the sweep ended abnormally ({type(cause).__name__}: {cause})"[:500],
        status=status,
        delete_if_empty=isinstance(cause, USER_ERRORS),
    )
