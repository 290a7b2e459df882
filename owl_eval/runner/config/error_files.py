"""Where an error's details go, beside its one line: the job's log file (:func:`log_to_files`), or, for an error
outside any job, a traceback file in the folder of the sweep this process launched (:func:`save_traceback`)."""

from __future__ import annotations

import logging
import os
import traceback
from pathlib import Path

log = logging.getLogger("runner")


def job_log_file() -> Path | None:
    """The current Hydra job's log file, if there is one."""
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            return Path(handler.baseFilename)
    return None


def log_to_files(message: str, exc: BaseException) -> None:
    """The message and full traceback into the log files only (Hydra's console handler prints to stdout), with the
    secrets of tracking URIs scrubbed (:mod:`owl_eval.tracking.redaction`)."""
    from owl_eval.tracking.redaction import scrub_logging

    scrub_logging()
    # args=None (no %-arguments) is what logging itself passes; typeshed's makeRecord wants a tuple or mapping
    record = log.makeRecord(log.name, logging.ERROR, __file__, 0, message, None, (type(exc), exc, exc.__traceback__))  # type: ignore[arg-type]
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.FileHandler):
            handler.handle(record)
            handler.flush()


def save_traceback(exc: BaseException) -> Path | None:
    """An unexpected error outside any job (no log file): its traceback, secrets scrubbed, goes to a new file in the
    sweep's folder (a single run's folder; without either ``<launch dir>/outputs``), created exclusively with mode
    600: never to a predictable name in a shared temporary folder, where a link planted by another user would send
    the write to any file of ours. None when no such file can be made (the error line then names none)."""
    import tempfile

    from owl_eval.tracking.redaction import scrub

    try:
        folder = error_folder()
        folder.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix="owl-eval-error-", suffix=".txt", dir=folder)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(scrub("".join(traceback.format_exception(exc))))
    except OSError:
        return None
    return Path(name)


# The folder of the sweep this process launched, while it runs (set by the sweep callback, which Hydra knows of;
# the launching process of a sweep has no Hydra runtime config to ask).
_launched: dict[str, str] = {}


def note_sweep_folder(folder: str | None) -> None:
    """Where this process's sweep writes (None: the sweep has ended): :func:`error_folder` puts tracebacks there."""
    _launched.clear()
    if folder:
        _launched["sweep_dir"] = folder


def noted_sweep_folder() -> str | None:
    """The folder given to :func:`note_sweep_folder`, or None."""
    return _launched.get("sweep_dir")


def error_folder() -> Path:
    """Where :func:`save_traceback` writes: the folder of the sweep this process launched (or of the single run Hydra
    is running), when it exists; else ``<launch dir>/outputs``, the default store's folder."""
    sweep_dir = _launched.get("sweep_dir")
    if sweep_dir and Path(sweep_dir).is_dir():
        return Path(sweep_dir)
    try:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            hc = HydraConfig.get()
            folder = Path(str(hc.sweep.dir if str(hc.mode) == "RunMode.MULTIRUN" else hc.runtime.output_dir))
            if folder.is_absolute() and folder.is_dir():
                return folder
    except Exception:  # noqa: BLE001 - a Hydra config that cannot say: the launch folder's outputs
        pass
    return Path.cwd() / "outputs"
