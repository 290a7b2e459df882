"""The store a run is written to: its client (:func:`make_client`), the checks made before anything is written (a
SQLite file that is a database and has room, a server or database that answers), its experiments, MLflow's batch
limits, and MLflow's HTTP retries bounded for this process (at import: :func:`bound_retries`).
"""

from __future__ import annotations

import http.client
import logging
import os
import socket
import ssl
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")


log = logging.getLogger(__name__)


# MLflow's own defaults retry a failed HTTP request for minutes (7 retries, backoff factor 2, 120 s per try): a
# tracking server lost mid-sweep would hang every job that follows. Unless the user has set them, a request to a
# server that refuses connections gives up after ~10 s (3 retries, 1 + 2 + 4 s apart, plus up to 1 s jitter each),
# one that accepts and never answers after at most 4 x 30 s + that; a server restarted within ~7 s is ridden out.
HTTP_RETRY_DEFAULTS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "3",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "30",
    # libpq's connect time-out for a database store (PostgreSQL) that stops answering: 10 s, not the OS's minutes
    "PGCONNECT_TIMEOUT": "10",
}


def bound_retries() -> None:
    """:data:`HTTP_RETRY_DEFAULTS` into this process's environment where the user has not set them (MLflow and
    libpq read them at each request / connection): at import, and again with each client (:func:`make_client`)."""
    for name, value in HTTP_RETRY_DEFAULTS.items():
        os.environ.setdefault(name, value)


bound_retries()


# MLflow's log_batch limits per request.
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_PER_BATCH = 100
MAX_TAGS_PER_BATCH = 100
MAX_IDS_PER_SEARCH = 100  # run ids in one search filter's IN (...)
# A param value's limit is MLflow's own, mlflow.utils.validation.MAX_PARAM_VAL_LENGTH (6000 characters in MLflow 3),
# read in TrackedRun.log_params (importing MLflow here would cost every import of this module ~1.5 s).

# Before the first client of an http(s) tracking URI: one GET of the URI, 2 attempts 1 s apart (see check_server).
SERVER_CHECK_TIMEOUT = 5.0
SERVER_CHECK_ATTEMPTS = 2
SERVER_CHECK_PAUSE = 1.0
DATABASE_SCHEMES = ("postgresql", "mysql", "mssql")  # database stores MLflow reaches over the network
# Below this much free space on a SQLite store's disk no run is started (a run writes from ~100 KiB to many MiB).
MIN_FREE_BYTES = 1024 * 1024

_WARMING: list[threading.Thread] = []  # imports of MLflow's SQL store started by warm_store, not yet joined


def filter_literal(value: str, *, what: str) -> str:
    """``value`` as a string literal of an MLflow search filter: single quotes, or double quotes when it
    holds a single quote (MLflow's filter grammar has no escape character). A value holding both kinds of
    quote cannot be searched for: one :class:`~owl_eval.errors.ConfigError` naming ``what``."""
    from owl_eval.errors import ConfigError

    text = str(value)
    if "'" not in text:
        return f"'{text}'"
    if '"' not in text:
        return f'"{text}"'
    raise ConfigError(
        f"{what}: {text!r} holds both ' and \" quotes, which an MLflow search filter cannot express; rename it"
    )


def make_client(uri: str):
    """An ``MlflowClient`` for ``uri``. For an http(s) URI, the first call of this process checks that a server
    answers there (:func:`check_server`): without one, MLflow would retry every request for minutes in silence."""
    store_warmed()
    from mlflow.tracking import MlflowClient

    from owl_eval.tracking.settings import no_stray_folders, sqlite_creation_lock

    if uri.lower().startswith(("http://", "https://")):
        check_server(uri)
    elif uri.lower().startswith(("postgresql", "mysql")):
        check_database(uri)
    elif uri.startswith("sqlite:///"):
        check_sqlite_store(uri)
    from owl_eval.tracking.faults import note_store, quiet_mlflow_store_faults

    note_store(store_name(uri))
    bound_retries()
    quiet_mlflow_store_faults()  # a full disk or a lost database: one error line, not a traceback per failed write
    with sqlite_creation_lock(uri), no_stray_folders(uri):
        return MlflowClient(tracking_uri=uri)


def store_name(uri: str) -> str:
    """How an error names a store: a SQLite store's file path, any other store's URI without its password."""
    from owl_eval.tracking.settings import redacted, sqlite_path

    if uri.startswith("sqlite:///"):
        return str(sqlite_path(uri))
    return redacted(uri)


def check_free_space(uri: str) -> None:
    """A SQLite store whose disk has less than :data:`MIN_FREE_BYTES` free is refused before a run is made (one
    :class:`~owl_eval.errors.ConfigError` saying how much is free and needed): a run started there would fail
    part-way, its status perhaps unwritable."""
    from owl_eval.errors import ConfigError
    from owl_eval.tracking.faults import free_space, size_text
    from owl_eval.tracking.settings import sqlite_path

    if not uri.startswith("sqlite:///"):
        return
    path = sqlite_path(uri)
    space = free_space(path)
    if space is not None and space[0] < MIN_FREE_BYTES:
        raise ConfigError(
            f"tracking.store_dir: the disk of MLflow store {path} has {size_text(space[0])} free "
            f"(of {size_text(space[1])}); a run needs at least {size_text(MIN_FREE_BYTES)} there: free some space, "
            "or point tracking.store_dir at a disk with room"
        )


def check_sqlite_store(
    uri: str, *, must_exist: bool = False, option: str = "tracking.store_dir (or tracking.uri)"
) -> None:
    """A SQLite store that exists is a readable SQLite database (opened read-only: nothing is written), else one
    :class:`~owl_eval.errors.ConfigError` naming the file and what to do, where SQLAlchemy would print its SQL.
    ``must_exist`` (a command that only reads, which must never create a store): a missing file is that error too,
    naming where it looked; ``option`` is the setting that points elsewhere."""
    import sqlite3

    from owl_eval.errors import ConfigError
    from owl_eval.tracking.settings import sqlite_path

    path = sqlite_path(uri)
    try:
        stat = path.stat()
        seen = (str(path), stat.st_ino, stat.st_size, stat.st_mtime_ns)
    except OSError:
        seen = None
    if seen is not None and seen in _READABLE_STORES:
        return
    if not path.exists():
        if must_exist:
            raise ConfigError(f"no MLflow store at {path}: nothing to read; {option} names the store")
        return
    elsewhere = f"restore it from a backup, or point {option} at another store"
    try:
        with path.open("rb") as handle:
            head = handle.read(16)
    except OSError as exc:
        raise ConfigError(f"MLflow store {path} cannot be read ({exc.strerror or exc})") from None
    if head and head != b"SQLite format 3\x00":
        raise ConfigError(f"MLflow store {path} is not a SQLite database (it starts {head[:8]!r}); {elsewhere}")
    try:
        connection = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=30)
        try:
            connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        finally:
            connection.close()
    except sqlite3.DatabaseError as exc:
        raise ConfigError(f"MLflow store {path} is damaged ({exc}); {elsewhere}") from None
    if seen is not None:
        _READABLE_STORES.add(seen)


# The SQLite store files found readable in this process, as they were then (inode, size, modification time): a
# file changed since is checked again.
_READABLE_STORES: set[tuple[str, int, int, int]] = set()
# The http(s) tracking URIs a server has answered at in this process: each is checked once.
_ANSWERING_SERVERS: set[str] = set()


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """A redirect is an answer too: not followed, it surfaces as an ``HTTPError`` with its 3xx status."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def _why_unreachable(error: BaseException, timeout: float) -> str | None:
    """Why nothing answered, for a failed request's error; None when the error shows that something did answer."""
    reason = error.reason if isinstance(error, urllib.error.URLError) else error
    if isinstance(error, urllib.error.HTTPError) or isinstance(reason, ssl.SSLError):
        # Any HTTP status is an answer; a TLS error means a server answered, and MLflow has its own TLS
        # settings (MLFLOW_TRACKING_INSECURE_TLS, MLFLOW_TRACKING_SERVER_CERT_PATH) for it.
        return None
    if isinstance(reason, TimeoutError):
        return f"timed out after {timeout:g} s"
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, socket.gaierror):
        return f"host name not resolved: {reason.strerror or reason}"
    if isinstance(reason, OSError):
        return reason.strerror or str(reason) or type(reason).__name__
    if isinstance(error, http.client.HTTPException):
        return f"something listens there but does not answer HTTP ({type(error).__name__}: {error})"
    return str(reason) or type(error).__name__


def check_server(uri: str) -> None:
    """Check that something answers HTTP at ``uri`` (any status, 404 or 401 included), once per process and URI:
    a GET of the URI with a :data:`SERVER_CHECK_TIMEOUT` s timeout, :data:`SERVER_CHECK_ATTEMPTS` attempts
    :data:`SERVER_CHECK_PAUSE` s apart. Nothing answering (connection refused, unknown host, time-out) is one
    :class:`~owl_eval.errors.ConfigError` saying what to do. MLflow's own retries are left as they are: they
    let a sweep ride out a server restarted mid-run, within the bounds of :data:`HTTP_RETRY_DEFAULTS`. A server
    that stops answering later is forgotten (:meth:`TrackedRun.__exit__`), so the next job is checked again."""
    from owl_eval.errors import ConfigError

    if uri in _ANSWERING_SERVERS:
        return
    opener = urllib.request.build_opener(_NoRedirect)
    why = ""
    for attempt in range(SERVER_CHECK_ATTEMPTS):
        if attempt:
            time.sleep(SERVER_CHECK_PAUSE)
        try:
            with opener.open(urllib.request.Request(uri, method="GET"), timeout=SERVER_CHECK_TIMEOUT):
                pass
            unreachable = None
        except (ValueError, http.client.InvalidURL):
            unreachable = None  # a URI urllib cannot read (MLflow may): no check, MLflow reports its own errors
        except (OSError, http.client.HTTPException) as exc:  # URLError and HTTPError are OSErrors
            unreachable = _why_unreachable(exc, SERVER_CHECK_TIMEOUT)
        if unreachable is None:
            _ANSWERING_SERVERS.add(uri)
            return
        why = unreachable
    parts = urllib.parse.urlsplit(uri)  # urllib read the URI above, so its port is a number
    port = parts.port or (443 if parts.scheme.lower() == "https" else 80)
    raise ConfigError(
        f"tracking.uri: no MLflow server answers at {uri} ({why}); start one "
        f"(mlflow server --host {parts.hostname or '127.0.0.1'} --port {port}) "
        "or point MLFLOW_TRACKING_URI / tracking.uri at a running one"
    )


# The database tracking URIs this process has connected to: each is checked once.
_REACHED_DATABASES: set[str] = set()


def check_database(uri: str) -> None:
    """One connection to a database store (``connect_timeout`` 10 s), once per process and URI: a wrong host, port,
    database, user or password is one :class:`~owl_eval.errors.ConfigError` at once, where MLflow would try 10
    times over ~100 s, logging a four-line warning each time, before its own error."""
    import sqlalchemy
    from sqlalchemy.pool import NullPool

    from owl_eval.errors import ConfigError
    from owl_eval.tracking.settings import redacted

    if uri in _REACHED_DATABASES:
        return
    engine = sqlalchemy.create_engine(uri, poolclass=NullPool, connect_args={"connect_timeout": 10})
    try:
        with engine.connect():
            pass
    except sqlalchemy.exc.DBAPIError as exc:
        reason = " ".join(str(exc.orig).split())  # the driver's message, on one line
        raise ConfigError(f"tracking.uri: cannot connect to {redacted(uri)}: {reason}") from None
    finally:
        engine.dispose()
    _REACHED_DATABASES.add(uri)


def warm_store(uri: str) -> None:
    """Start importing MLflow's SQL store (~1 s) in a thread if ``uri`` needs it, so that it loads while the job's
    process builds the agents, and a job that fails to build (a bad config value) is reported at once, not after the
    import. Whatever talks to the store first waits for it (:func:`store_warmed`): two threads never import MLflow at
    once."""
    if uri.split(":", 1)[0].split("+", 1)[0] in ("sqlite", *DATABASE_SCHEMES):
        thread = threading.Thread(target=_import_sql_store, name="owl-eval-warm-store", daemon=True)
        thread.start()
        _WARMING.append(thread)


def _import_sql_store() -> None:
    import mlflow.store.tracking.sqlalchemy_store  # noqa: F401
    import mlflow.tracking  # noqa: F401


def store_warmed() -> None:
    """Wait for a :func:`warm_store` import still running."""
    while _WARMING:
        _WARMING.pop().join()


def get_or_create_experiment(client, name: str, artifact_location: str | None) -> str:
    exp = client.get_experiment_by_name(name)
    if exp is not None:
        return exp.experiment_id
    try:
        return client.create_experiment(name, artifact_location=artifact_location)
    except Exception:
        # Another parallel job created it first.
        exp = client.get_experiment_by_name(name)
        if exp is None:
            raise
        return exp.experiment_id


def forget_store(uri: str) -> None:
    """The store at ``uri`` stopped answering: the next client of this process checks it again (:func:`check_server`,
    :func:`check_database`), one quick error, instead of waiting out retries."""
    _ANSWERING_SERVERS.discard(uri)
    _REACHED_DATABASES.discard(uri)


def delete_run_permanently(client, run_id: str) -> None:
    """Delete a run that should never have existed (a sweep stopped by a config error before any job ran):
    soft-delete it, then remove its rows where the store allows it, as ``mlflow gc`` does (SQL stores)."""
    client.delete_run(run_id)
    store = getattr(getattr(client, "_tracking_client", None), "store", None)
    hard_delete = getattr(store, "_hard_delete_run", None)  # MLflow's own gc uses it; absent on REST stores
    if callable(hard_delete):
        hard_delete(run_id)


def chunks(items: list, size: int) -> Iterable[list]:
    """``items`` in lists of at most ``size``: MLflow's batch limits (the MAX_*_PER_BATCH above) are the only ones."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
