"""What a user sees when something goes wrong: one ``error:`` line on stderr, never a traceback.

The traceback still goes to the job's log file (and, for a run that exists, to its ``error.txt``
artifact); ``HYDRA_FULL_ERROR=1`` shows it on the console too. This covers errors raised inside a job
(:func:`user_facing`) and errors Hydra raises before or around the jobs - an override that does not
parse, a key that is not in the config, a sweep whose job failed (:func:`install_one_line_errors`).
"""

from __future__ import annotations

import logging
import os
import sys

from hydra.errors import MissingConfigException

from owl_eval.errors import LaunchAborted, Terminated
from owl_eval.runner.config.error_files import job_log_file, log_to_files, save_traceback
from owl_eval.runner.config.messages import USER_ERRORS, one_line

log = logging.getLogger("runner")


def full_errors_wanted() -> bool:
    return os.environ.get("HYDRA_FULL_ERROR") == "1"


def error_exit(exc: BaseException, *, where_traceback: str | None = None, job: str | None = None) -> None:
    """Print ``error: <message>`` on stderr and exit (130 after Ctrl-C, 143 after SIGTERM, else 1); ``job`` names
    the sweep job that failed."""
    from owl_eval.tracking.redaction import scrub

    message = scrub(one_line(exc) if job is None else f"{job}: {one_line(exc)}")  # a URI's password never shown
    if where_traceback and not isinstance(exc, USER_ERRORS + (KeyboardInterrupt,)):
        message += f" (traceback in {where_traceback})"
    print(f"error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(143 if isinstance(exc, Terminated) else 130 if isinstance(exc, KeyboardInterrupt) else 1)


def user_facing(job, cfg):
    """Run ``job(cfg)`` in a single (non-sweep) run: any failure ends with one ``error:`` line. In a
    sweep the exception propagates, so Hydra marks the job failed (and the parent run FAILED)."""
    from owl_eval.runner.config.hydra_runtime import hydra_runtime

    try:
        return job(cfg)
    except SystemExit:
        raise
    except BaseException as exc:
        hc = hydra_runtime()
        if full_errors_wanted() or (hc is not None and str(hc.mode) == "RunMode.MULTIRUN"):
            raise
        log_to_files(f"{type(exc).__name__}: {exc}", exc)
        where = job_log_file()
        error_exit(exc, where_traceback=str(where) if where else None)


class _FailedJobNote:
    """Stands in for stderr while Hydra runs: Hydra writes "Error executing job with overrides: [...]" on a
    line of its own before re-raising a sweep job's error; we keep the overrides for the one error line."""

    PREFIX = "Error executing job with overrides: "

    def __init__(self, stream):
        self.stream = stream
        self.overrides: str | None = None

    def write(self, text: str) -> int:
        from owl_eval.tracking.redaction import scrub

        if text.startswith(self.PREFIX):
            self.overrides = text[len(self.PREFIX) :].strip()
            return len(text)
        self.stream.write(scrub(text))  # a warning quoting a tracking URI shows no password either
        return len(text)

    def __getattr__(self, name):
        return getattr(self.stream, name)


def install_one_line_errors() -> None:
    """Make Hydra report any error (config composition, overrides, a failed sweep job) as one
    ``error:`` line instead of its multi-line message or traceback. Hydra 1.3 wraps every entry point in
    ``hydra._internal.utils.run_and_report``; we replace it (idempotent)."""
    import hydra._internal.utils as hydra_utils

    original = getattr(hydra_utils.run_and_report, "__wrapped_original__", hydra_utils.run_and_report)

    def run_and_report(func):
        from owl_eval.tracking.redaction import remember_configured

        remember_configured()  # the URIs of MLFLOW_TRACKING_URI and the command line: scrubbed from every error
        if full_errors_wanted():
            return original(func)
        note = _FailedJobNote(sys.stderr)
        sys.stderr = note
        try:
            return func()
        except SystemExit:
            raise
        except LaunchAborted as aborted:
            error_exit(aborted.error)
        except MissingConfigException as exc:
            from owl_eval.runner.config.groups import unknown_option_message

            message = unknown_option_message(str(exc.missing_cfg_file or ""), sys.argv[1:])
            if message is None:
                error_exit(exc)
            print(f"error: {message}", file=sys.stderr, flush=True)
            raise SystemExit(1) from None
        except BaseException as exc:
            log_to_files(f"{type(exc).__name__}: {exc}", exc)
            where = job_log_file()
            if where is None and not isinstance(exc, USER_ERRORS):
                where = save_traceback(exc)
            error_exit(
                exc,
                where_traceback=str(where) if where else None,
                job=f"the sweep's job with overrides {note.overrides}" if note.overrides else None,
            )
        finally:
            if sys.stderr is note:
                sys.stderr = note.stream

    run_and_report.__wrapped_original__ = original  # type: ignore[attr-defined]
    hydra_utils.run_and_report = run_and_report
