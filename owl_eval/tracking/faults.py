"""A store that cannot take a write because its disk is full: recognised wherever it surfaces, and said in one line.

A full disk reaches us wrapped: SQLite says "database or disk is full" (``sqlite3.OperationalError``), SQLAlchemy
wraps that in its own ``OperationalError``, MLflow in an ``MlflowException`` (sometimes keeping only the text);
an artifact write is an ``OSError`` with errno 28 (ENOSPC). :func:`disk_full` looks through the whole chain of
causes and contexts for any of them. :func:`full_disk_message` says which store (or file), how much space its
file system has free, and what to do; :class:`StoreFull` carries that message to the console as one ``error:``
line (an ``OSError``, so the console prints it as it stands, without a type name or a traceback's place).

MLflow's SQL store also logs every database error with its traceback on stderr (logger
``mlflow.store.db.utils``); :func:`quiet_mlflow_store_faults` drops those records for a full disk or a lost
database, whose one line is ours (the traceback still goes to the job's log file with that line).

A store reached over the network (a tracking server, a database) that stops answering is :func:`server_lost`;
:class:`ServerLost` carries its one line.
"""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

# What SQLite, the OS (strerror) and a tracking server's relayed error say for a full disk or an exhausted quota.
FULL_DISK_TEXTS = ("database or disk is full", "no space left on device", "disk quota exceeded")
FULL_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
MLFLOW_DB_LOGGER = "mlflow.store.db.utils"


class StoreFull(OSError):
    """A write to the MLflow store (its database or its artifact folder) failed because the disk is full."""

    def __init__(self, message: str):
        super().__init__(message)
        self.errno = errno.ENOSPC


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and every exception it was raised from or during, SQLAlchemy's wrapped DBAPI error (``orig``)
    included; each once."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    found: list[BaseException] = []
    while todo:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        found.append(current)
        for linked in (current.__cause__, current.__context__, getattr(current, "orig", None)):
            if isinstance(linked, BaseException):
                todo.append(linked)
    return found


def interruption_in(exc: BaseException | None) -> KeyboardInterrupt | None:
    """The Ctrl-C or SIGTERM (a ``KeyboardInterrupt``) that ``exc`` is, or was raised while handling (its implicit
    ``__context__`` chain: an error in logging the completed part after a SIGTERM); None when there is none. An
    error explicitly caused by a KeyboardInterrupt ends the search: an agent's own KeyboardInterrupt is the cause
    of its crash (``owl_eval.runner.process.worker.as_agent_crash``), not a signal."""
    seen: set[int] = set()
    current = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, KeyboardInterrupt):
            return current
        if isinstance(current.__cause__, KeyboardInterrupt):
            return None
        seen.add(id(current))
        current = current.__context__
    return None


def disk_full(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or anything in its chain) says a disk is full."""
    if exc is None:
        return False
    for current in _chain(exc):
        if isinstance(current, StoreFull):
            return True
        if isinstance(current, OSError) and current.errno in FULL_DISK_ERRNOS:
            return True
        if any(text in str(current).lower() for text in FULL_DISK_TEXTS):
            return True
    return False


def failed_file(exc: BaseException) -> Path | None:
    """The file whose write failed for want of space (an ``OSError``'s filename in the chain), or None. A copy's
    error names the file written second (``filename2``): shutil's copy (an artifact logged to the store) reports
    ENOSPC with the source first, a file on a disk that may have room."""
    for current in _chain(exc):
        if isinstance(current, OSError) and current.errno in FULL_DISK_ERRNOS:
            name = current.filename2 or current.filename
            if name:
                return Path(os.fsdecode(name))
    return None


def _nearest_existing(path: Path) -> Path:
    """``path``, or its nearest folder that exists (a file about to be written, a store not created yet)."""
    current = path
    while not current.exists() and current != current.parent:
        current = current.parent
    return current


def _device(path: Path) -> int | None:
    """The file system holding ``path`` (its nearest existing folder), or None when it cannot be read."""
    try:
        return os.stat(_nearest_existing(path)).st_dev
    except OSError:
        return None


def size_text(n: float) -> str:
    """``n`` bytes in KiB, MiB or GiB, one decimal."""
    for unit in ("KiB", "MiB", "GiB"):
        n /= 1024
        if n < 1024 or unit == "GiB":
            return f"{n:.1f} {unit}"
    return f"{n:.1f} GiB"


def free_space(path: Path) -> tuple[int, int] | None:
    """(bytes free to this user, total bytes) of the file system holding ``path`` (its nearest existing folder),
    or None when it cannot be read."""
    try:
        stat = os.statvfs(_nearest_existing(path))
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize, stat.f_blocks * stat.f_frsize


def full_disk_message(exc: BaseException, store: str | None, *, option: str = "tracking.store_dir") -> str:
    """One line for a full disk met writing to ``store`` (the SQLite file's path, or a store's URI as it may be
    shown; None when unknown): what is full, how much is free there, what to do."""
    where = failed_file(exc)
    store_file = Path(store) if store and "://" not in store else None
    if where is not None and store_file is not None:
        store_disk = _device(store_file)
        if store_disk is not None and _device(where) == store_disk:
            where = None  # an artifact or other file on the store's own disk: that disk is what is full
    local = where or store_file
    if local is None:
        target = f"the MLflow store {store}" if store else "the MLflow store"
        return (
            f"{target} reports a full disk, its write failed; free space where that store keeps its data, "
            f"or point {option} at another store"
        )
    what = (
        f"MLflow store {store}"
        if store and where is None
        else f"{where} (MLflow store {store})"
        if store
        else str(where)
    )
    space = free_space(local)
    room = f" ({size_text(space[0])} free of {size_text(space[1])})" if space is not None else ""
    return (
        f"the disk of {what} is full{room}: its writes need more space than is free; free some there, "
        f"or point {option} at a disk with room"
    )


# The store this process last opened a client for, as an error names it (see note_store).
_last_store: dict[str, str] = {}


def note_store(name: str) -> None:
    """Remember the store this process writes to, for :func:`describe_if_full` (set when a client is made)."""
    _last_store["name"] = name


def describe_if_full(exc: BaseException) -> str | None:
    """The one line for ``exc`` when it is a full disk or a lost tracking server not yet described
    (:class:`StoreFull` and :class:`ServerLost` say it already), naming the store this process last opened; else
    None."""
    if isinstance(exc, StoreFull | ServerLost):
        return None
    store = _last_store.get("name")
    if disk_full(exc):
        return full_disk_message(exc, store)
    if store and "://" in store and store.lower().startswith("http") and server_lost(exc):
        return f"the tracking server at {store} stopped answering ({why_lost(exc)}, after MLflow's retries)"
    return None


class _DropStoreFaults(logging.Filter):
    """Keeps MLflow's SQL-store error records off the console when they are about a full disk or a database that
    stopped answering: the run's one error line says it."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        text = record.getMessage().lower()
        if disk_full(exc) or any(t in text for t in FULL_DISK_TEXTS):
            return False
        return not (server_lost(exc) or any(t in text for t in LOST_SERVER_TEXTS))


_FILTER = _DropStoreFaults()


def quiet_mlflow_store_faults() -> None:
    """Drop MLflow's logged tracebacks for a full disk or a lost database (idempotent): one ``error:`` line says
    it."""
    logger = logging.getLogger(MLFLOW_DB_LOGGER)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)


# What the HTTP stack says when a tracking server stops answering (requests, urllib3 and MLflow's wrapping of them).
LOST_SERVER_TEXTS = (
    "max retries exceeded",
    "failed to establish a new connection",
    "connection refused",
    "connection aborted",
    "connection reset",
    "remote end closed connection",
    "read timed out",
    # a database store (PostgreSQL's libpq) whose server went away
    "server closed the connection unexpectedly",
    "terminating connection due to administrator command",
    "could not connect to server",
    "connection to server at",
)


class ServerLost(OSError):
    """A tracking server or a database store stopped answering while a run was logging to it."""


def server_lost(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or anything in its chain) says an HTTP tracking server did not answer: a refused or reset
    connection, a time-out, MLflow giving up after its retries."""
    if exc is None:
        return False
    for current in _chain(exc):
        if isinstance(current, ServerLost | ConnectionError | TimeoutError):
            return True
        name = type(current).__name__
        if name in ("MaxRetryError", "NewConnectionError", "ConnectTimeout", "ReadTimeout", "ProtocolError"):
            return True
        if any(text in str(current).lower() for text in LOST_SERVER_TEXTS):
            return True
    return False


def why_lost(exc: BaseException) -> str:
    """A few words for why a server did not answer, from ``exc``'s chain."""
    for current in _chain(exc):
        if isinstance(current, ConnectionRefusedError) or "connection refused" in str(current).lower():
            return "connection refused"
    for current in _chain(exc):
        if isinstance(current, TimeoutError) or "timed out" in str(current).lower():
            return "timed out"
    return "no answer"
