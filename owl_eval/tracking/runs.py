"""A job's MLflow run (:class:`TrackedRun`), the store's client and its checks (:func:`make_client`), and the MLflow
key of every reported metric (:func:`mlflow_key`).

One MLflow run per job; in a multirun, a parent run for the sweep (:mod:`owl_eval.tracking.sweep_parent`) and a
nested child per job. Everything is sent in batches through ``MlflowClient.log_batch`` (SQLite costs
10-30 ms per call), figures as PNG artifacts, the resolved config as YAML.

A reported metric (a :class:`~owl_eval.metrics.keys.MetricKey`) gets its MLflow key from :func:`mlflow_key` alone;
each run also gets ``metric_keys.json`` (:mod:`owl_eval.tracking.key_index`), every MLflow key it logged with the
fields of its metric key and its declaration, which is how stored runs are read back.
"""

from __future__ import annotations

import functools
import http.client
import logging
import os
import re
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from matplotlib.figure import Figure

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")

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

import numpy as np  # noqa: E402

from owl_eval.datasets.provenance import DataInput  # noqa: E402
from owl_eval.metrics.keys import MetricKey  # noqa: E402
from owl_eval.metrics.results import MetricResults  # noqa: E402
from owl_eval.tracking.key_index import INDEX_ARTIFACT, LoggedKey, index_json  # noqa: E402
from owl_eval.tracking.settings import TrackingSettings  # noqa: E402,F401  (re-exported)

# MLflow's log_batch limits per request.
MAX_METRICS_PER_BATCH = 1000
MAX_PARAMS_PER_BATCH = 100
MAX_TAGS_PER_BATCH = 100
MAX_IDS_PER_SEARCH = 100  # run ids in one search filter's IN (...)
# A param value's limit is MLflow's own, mlflow.utils.validation.MAX_PARAM_VAL_LENGTH (6000 characters in MLflow 3),
# read in TrackedRun.log_params (importing MLflow here would cost every import of this module ~1.5 s).

SWEEP_DIR_TAG = "owl_eval.sweep_dir"
CONFIG_HASH_TAG = "owl_eval.config_hash"
RUN_KIND_TAG = "owl_eval.kind"
# MLflow's own tag naming a run's parent (mlflow.utils.mlflow_tags.MLFLOW_PARENT_RUN_ID), spelled here: no import
PARENT_TAG = "mlflow.parentRunId"
SHARED_VIEW_TAG_PREFIX = "mlflow.sharedViewState."  # an experiment tag the MLflow UI reads as a saved runs-table view
REUSED_TAG_PREFIX = "owl_eval.reused."  # on a sweep parent: a finished run a resumed sweep reused (+ its id)
TRUNCATED_PARAMS_TAG = "owl_eval.truncated_params"

# Before the first client of an http(s) tracking URI: one GET of the URI, 2 attempts 1 s apart (see check_server).
DATASET_RACE_ATTEMPTS = 4  # tries of log_inputs when a parallel job adds the same data set at the same moment
SERVER_CHECK_TIMEOUT = 5.0
SERVER_CHECK_ATTEMPTS = 2
SERVER_CHECK_PAUSE = 1.0
DATABASE_SCHEMES = ("postgresql", "mysql", "mssql")  # database stores MLflow reaches over the network
# Below this much free space on a SQLite store's disk no run is started (a run writes from ~100 KiB to many MiB).
MIN_FREE_BYTES = 1024 * 1024

log = logging.getLogger(__name__)

_WARMING: list[threading.Thread] = []  # imports of MLflow's SQL store started by warm_store, not yet joined


DETAIL_PREFIX = "detail/"
THRESHOLD_PREFIX = "threshold/"
SERIES_KEY_SUFFIX = "_by_step"  # a series logged beside a scalar of the same name

_INVALID_KEY_CHARS = re.compile(r"[^0-9A-Za-z_\-. /]")


def metric_key(text: str) -> str:
    """``text`` with only the characters MLflow accepts in keys (letters, digits, ``_ - . / space``): ``@`` becomes
    ``_at_``, anything else ``_``. For text that is already an MLflow key but for its characters (a comparison
    group's statistics); the MLflow key of a reported metric is :func:`mlflow_key`'s."""
    return _INVALID_KEY_CHARS.sub("_", text.replace("@", "_at_"))


def mlflow_key(key: MetricKey, protocol: str | None = None, *, beside_scalar: bool = False) -> str:
    """The MLflow key of a reported metric: the one place a :class:`MetricKey` becomes MLflow text.

    - a point of a threshold sweep (``threshold`` set) and the sweep's series (``axis="threshold"``): the sweep's
      logged table, ``threshold/<name>`` (``threshold/baseline/<name>`` for the baseline agent's);
    - a timing: ``time/<phase>``;
    - with ``protocol`` None or not installed: the reported name;
    - the baseline agent's: ``baseline/<the rest>``;
    - the metric itself when the protocol's descriptor lists it in its headline: the reported name;
    - anything else: ``detail/<reported name>``.

    Characters MLflow refuses are replaced (:func:`metric_key`: ``@`` in a task's name becomes ``_at_``).
    ``beside_scalar``: a series whose scalar of the same name is logged too, under ``<key>_by_step`` (never a
    headline key: MLflow would hold two values at step 0).
    """
    from owl_eval.evaluation.registry import headline_rank
    from owl_eval.protocols import known

    if key.threshold is not None or key.axis == "threshold":
        swept = key.with_fields(agent="", threshold=None, axis=None)
        return THRESHOLD_PREFIX + (f"{key.agent}/" if key.agent else "") + metric_key(swept)
    suffix = SERIES_KEY_SUFFIX if beside_scalar else ""
    if key.timing or protocol is None or not known(protocol):
        return metric_key(key) + suffix
    if key.agent:
        return f"{key.agent}/" + metric_key(key.with_fields(agent="")) + suffix
    if not beside_scalar and headline_rank(protocol, key) is not None:
        return metric_key(key)
    return DETAIL_PREFIX + metric_key(key) + suffix


def logged_as(protocol: str | None) -> Callable[[MetricKey], str]:
    """:func:`mlflow_key` for one protocol's keys (what an evaluation's ``run_tags`` names keys by)."""
    return functools.partial(mlflow_key, protocol=protocol)


def logged_key_entry(key: MetricKey, protocol: str | None, *, series: bool, beside_scalar: bool = False) -> LoggedKey:
    """The ``metric_keys.json`` entry of ``key`` logged under :func:`mlflow_key` (``series``: logged as a series or a
    table)."""
    from owl_eval.evaluation.registry import headline_rank, is_series, spec_for
    from owl_eval.protocols import known

    spec = spec_for(protocol, key) if protocol and known(protocol) else None
    rank = None
    if spec is not None and protocol is not None and not beside_scalar:
        rank = headline_rank(protocol, key)
    return LoggedKey(
        key=key,
        declared=spec is not None,
        direction=spec.direction if spec is not None else "none",
        bounds=spec.bounds if spec is not None else (-float("inf"), float("inf")),
        series=series or (spec is not None and protocol is not None and is_series(protocol, key)),
        headline_rank=rank,
        title=spec.display_name if spec is not None and rank is not None else "",
    )


def shared_view_path(experiment_id: str, key: str) -> str:
    """The MLflow UI's path of a saved runs-table view (:meth:`TrackedRun.share_runs_view`)."""
    return f"#/experiments/{experiment_id}/runs?viewStateShareKey={key}"


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
    _warmed()
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
    import. Whatever talks to the store first waits for it (:func:`_warmed`): two threads never import MLflow at
    once."""
    if uri.split(":", 1)[0].split("+", 1)[0] in ("sqlite", *DATABASE_SCHEMES):
        thread = threading.Thread(target=_import_sql_store, name="owl-eval-warm-store", daemon=True)
        thread.start()
        _WARMING.append(thread)


def _import_sql_store() -> None:
    import mlflow.store.tracking.sqlalchemy_store  # noqa: F401
    import mlflow.tracking  # noqa: F401


def _warmed() -> None:
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


def delete_run_permanently(client, run_id: str) -> None:
    """Delete a run that should never have existed (a sweep stopped by a config error before any job ran):
    soft-delete it, then remove its rows where the store allows it, as ``mlflow gc`` does (SQL stores)."""
    client.delete_run(run_id)
    store = getattr(getattr(client, "_tracking_client", None), "store", None)
    hard_delete = getattr(store, "_hard_delete_run", None)  # MLflow's own gc uses it; absent on REST stores
    if callable(hard_delete):
        hard_delete(run_id)


def flatten(mapping: Mapping | list, prefix: str = "") -> dict[str, str]:
    """Flatten a nested config into ``a.b.c -> str(value)``; lists keep their index (``a.0``)."""
    out: dict[str, str] = {}
    items = mapping.items() if isinstance(mapping, Mapping) else enumerate(mapping)
    for key, value in items:
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) or (
            isinstance(value, list) and value and all(isinstance(v, (Mapping, list)) for v in value)
        ):
            out.update(flatten(value, name + "."))
        else:
            out[name] = "null" if value is None else str(value)
    return out


def param_file_name(key: str) -> str:
    """``key`` as a file name: characters other than letters, digits and ``. _ -`` become ``_``."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", key)


def git_commit(directory: str | os.PathLike | None = None) -> str:
    where = Path(directory) if directory else Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=5)
        return out.stdout.strip() if out.returncode == 0 else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def bin_means(steps: np.ndarray, values: np.ndarray, num_bins: int) -> tuple[np.ndarray, np.ndarray]:
    """``num_bins`` consecutive bins of near-equal size: the first step of each bin and the mean of its
    finite values (NaN for a bin without one)."""
    edges = np.linspace(0, len(steps), num_bins + 1).astype(np.int64)[:-1]
    finite = np.isfinite(values)
    sums = np.add.reduceat(np.where(finite, values, 0.0), edges)
    counts = np.add.reduceat(finite.astype(np.int64), edges)
    with np.errstate(invalid="ignore", divide="ignore"):
        return steps[edges], np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def series_csv(series) -> str:
    rows = "\n".join(f"{s},{v!r}" for s, v in zip(series.steps.tolist(), series.values.tolist()))
    return "step,value\n" + rows + "\n"


def chunks(items: list, size: int) -> Iterable[list]:
    """``items`` in lists of at most ``size``: MLflow's batch limits (the MAX_*_PER_BATCH above) are the only ones."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


@dataclass(frozen=True)
class StartedRun:
    """Where a run this process started lives: what the end-of-run summary prints."""

    uri: str
    experiment: str
    run_name: str
    run_id: str


class TrackedRun:
    """One MLflow run, written through ``MlflowClient`` only (no fluent global state, safe in workers).

    Use as a context manager: leaving it normally ends the run FINISHED, an exception ends it FAILED
    (KILLED for Ctrl-C) after logging the traceback as an artifact and the error as a tag; nothing logged
    before is lost, because every ``log_*`` call is sent at once. A new run carries its owner's pid, host
    and process start time (``owl_eval.tracking.liveness``), so a later launch can tell when its process died.
    """

    def __init__(
        self,
        client,
        run_id: str,
        max_series_points: int | None = 2000,
        protocol: str | None = None,
        uri: str | None = None,
    ):
        self.client = client
        self.run_id = run_id
        self.uri = uri  # where the run lives (named by an error about its store)
        self.max_series_points = max_series_points
        self.protocol = protocol  # whose headline metrics log_results keys plainly
        self._ended = False
        self._index: dict[str, LoggedKey] = {}  # metric_keys.json: every MLflow key logged through a MetricKey
        self._index_protocol: str | None = None
        self._opened = time.perf_counter()
        self.started: StartedRun | None = None  # where the run lives, for the end-of-run summary (set by start)

    @classmethod
    def start(
        cls,
        settings: TrackingSettings,
        *,
        run_name: str,
        tags: Mapping[str, str] | None = None,
        parent_run_id: str | None = None,
        launch_dir=None,
    ) -> TrackedRun:
        _warmed()
        from owl_eval.tracking.liveness import owner_tags, reap_quietly

        uri = settings.resolved_uri(launch_dir)
        check_free_space(uri)
        client = make_client(uri)
        experiment_id = get_or_create_experiment(
            client, settings.experiment_name, settings.resolved_artifact_location(uri)
        )
        # Runs left RUNNING by dead processes of this host are ended KILLED before this one starts.
        reap_quietly(client, experiment_id, found_by=f"the start of run {run_name!r} (process {os.getpid()})")
        all_tags = {k: str(v) for k, v in (tags or {}).items()} | owner_tags()
        if parent_run_id:
            all_tags[PARENT_TAG] = parent_run_id
        run = client.create_run(experiment_id, run_name=run_name, tags=all_tags)
        tracked = cls(
            client,
            run.info.run_id,
            max_series_points=settings.max_series_points,
            protocol=all_tags.get("protocol"),
            uri=uri,
        )
        tracked.started = StartedRun(uri, settings.experiment_name, run_name, run.info.run_id)
        return tracked

    def opened_after(self, clock: float) -> float:
        """Seconds from ``clock`` (a ``time.perf_counter()`` reading) until this run was opened."""
        return self._opened - clock

    # -- logging -------------------------------------------------------------------------------------
    def log_params(self, params: Mapping[str, str]) -> None:
        """Log ``params``; a value longer than MLflow's limit is logged as its beginning and a marker naming the
        artifact ``params/<key>.txt`` that holds it whole, the run's tag ``owl_eval.truncated_params`` lists
        such keys, and one warning names them."""
        from mlflow.entities import Param
        from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH

        items = []
        whole: dict[str, str] = {}  # artifact path -> full value
        truncated: dict[str, tuple[int, str]] = {}  # key -> (length, artifact path)
        for key, value in params.items():
            text = str(value)
            if len(text) > MAX_PARAM_VAL_LENGTH:
                name = param_file_name(key)
                path, n = f"params/{name}.txt", 2
                while path in whole:  # two keys alike but for unsafe characters
                    path, n = f"params/{name}-{n}.txt", n + 1
                marker = f"... [truncated: {len(text)} characters; full value in {path}]"
                whole[path] = text
                truncated[key] = (len(text), path)
                text = text[: max(MAX_PARAM_VAL_LENGTH - len(marker), 0)] + marker
            items.append(Param(key, text))
        if whole:

            def write(folder: Path) -> None:
                (folder / "params").mkdir()
                for path, full in whole.items():
                    (folder / path).write_text(full, encoding="utf-8", errors="surrogateescape")

            self.log_files(write, None)
        for chunk in chunks(items, MAX_PARAMS_PER_BATCH):
            self.client.log_batch(self.run_id, params=chunk)
        if truncated:
            earlier = self.client.get_run(self.run_id).data.tags.get(TRUNCATED_PARAMS_TAG, "")
            keys = [k for k in earlier.split(",") if k and k not in truncated] + list(truncated)
            self.set_tags({TRUNCATED_PARAMS_TAG: ",".join(keys)})
            log.warning(
                "parameters longer than MLflow's limit of %d characters logged truncated: %s",
                MAX_PARAM_VAL_LENGTH,
                ", ".join(f"{k} ({n} characters, whole in artifact {path})" for k, (n, path) in truncated.items()),
            )

    def set_tags(self, tags: Mapping[str, str]) -> None:
        from mlflow.entities import RunTag

        items = [RunTag(k, str(v)) for k, v in tags.items()]
        for chunk in chunks(items, MAX_TAGS_PER_BATCH):
            self.client.log_batch(self.run_id, tags=chunk)

    def log_metrics(self, values: Mapping[str, float], *, step: int = 0) -> None:
        """Values under MLflow keys given as text (characters MLflow refuses replaced): a sweep parent's comparison
        statistics. A reported metric is logged by :meth:`log_results` or :meth:`log_timings`."""
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        items = [Metric(metric_key(k), float(v), now, int(step)) for k, v in values.items()]
        self._send_metrics(items)

    def _known_protocol(self, protocol: str | None = None) -> str | None:
        from owl_eval.protocols import known

        protocol = protocol or self.protocol
        return protocol if protocol and known(protocol) else None

    def _log_index(self, protocol: str | None, entries: Mapping[str, LoggedKey]) -> None:
        """Add ``entries`` to the run's ``metric_keys.json`` and write it (before the metrics it describes)."""
        if not entries or all(self._index.get(k) == e for k, e in entries.items()):
            return
        self._index.update(entries)
        self._index_protocol = self._index_protocol or protocol
        self.log_dict(index_json(self._index_protocol, self._index), INDEX_ARTIFACT)

    def log_timings(self, timings: Mapping[MetricKey, float]) -> None:
        """Seconds of the job's phases (timing keys, ``MetricKey("total_s", timing=True)``) at step 0."""
        from mlflow.entities import Metric

        protocol = self._known_protocol()
        now = int(time.time() * 1000)
        items, entries = [], {}
        for key, seconds in timings.items():
            name = mlflow_key(key, protocol)
            items.append(Metric(name, float(seconds), now, 0))
            entries[name] = logged_key_entry(key, protocol, series=False)
        self._log_index(protocol, entries)
        self._send_metrics(items)

    def _send_metrics(self, items: list) -> None:
        for chunk in chunks(items, MAX_METRICS_PER_BATCH):
            self.client.log_batch(self.run_id, metrics=chunk)

    def log_results(self, results: MetricResults, protocol: str | None = None) -> None:
        """Scalars at step 0 and series with their steps under the keys of :func:`mlflow_key` (headline plain, the
        rest ``detail/``, ``baseline/``); threshold sweeps as one logged table each (``threshold/<name>.json``);
        every N/A reason as a tag ``na.<key>``, except values fixed by construction, and all of them in
        ``metrics_na.json``; first of all, every key of ``results`` in ``metric_keys.json`` (those fixed by
        construction too, though not logged: runs of one setting then share one index).

        ``protocol``: whose headline metrics get plain keys (default: the run's ``protocol`` tag)."""
        from mlflow.entities import Metric

        from owl_eval.evaluation.registry import constant_by_design
        from owl_eval.tracking.threshold_tables import ThresholdSweeps

        protocol = self._known_protocol(protocol)
        now = int(time.time() * 1000)
        entries: dict[str, LoggedKey] = {}

        def keyed(key: MetricKey, *, series: bool, beside_scalar: bool = False) -> str:
            name = mlflow_key(key, protocol, beside_scalar=beside_scalar)
            entries[name] = logged_key_entry(key, protocol, series=series, beside_scalar=beside_scalar)
            return name

        sweeps = ThresholdSweeps()
        items = []
        for name, value in results.values.items():
            if not sweeps.add_point(name, value):
                items.append(Metric(keyed(name, series=False), float(value), now, 0))
        na_tags: dict[str, str] = {}
        for name, reason in results.na.items():
            if not sweeps.add_point(name, None, reason):
                key = keyed(name, series=False)  # indexed even when not logged (fixed by construction)
                if not constant_by_design(reason):
                    na_tags[f"na.{key}"[:250]] = reason[:5000]
        downsampled: dict[str, str] = {}
        series_items = []
        for name, series in results.series.items():
            if sweeps.add_series(name, series):
                continue
            # A series may not share its key with a scalar: MLflow would hold two values at step 0.
            key = keyed(name, series=True, beside_scalar=name in results.values)
            steps, values = series.steps, series.values
            if self.max_series_points and len(steps) > self.max_series_points:
                # 100,000 per-episode points cost ~20 s in SQLite: log bin means, keep every point in a CSV.
                steps, values = bin_means(steps, values, self.max_series_points)
                downsampled[key] = (
                    f"mean over {len(series.steps) / len(steps):.1f} steps per point; full series in series/{key.replace('/', '_')}.csv"
                )
                series_items.append((series_csv(series), f"series/{key.replace('/', '_')}.csv"))
            items.extend(
                Metric(key, float(v), now, int(s)) for s, v in zip(steps.tolist(), values.tolist()) if np.isfinite(v)
            )
        tables = {keyed(swept, series=True): columns for swept, columns in sweeps.tables().items()}
        self._log_index(protocol, entries)
        for text, path in series_items:
            self.log_text(text, path)
        self._send_metrics(items)
        self.log_tables({f"{name}.json": columns for name, columns in tables.items()})
        if downsampled:
            self.set_tags({f"downsampled.{k}"[:250]: v for k, v in downsampled.items()})
        if na_tags:
            self.set_tags(na_tags)
        if results.na:
            self.log_dict(results.na, "metrics_na.json")

    def log_tables(self, tables: Mapping[str, Mapping[str, list]]) -> None:
        """Tables (``artifact path.json`` -> columns) in ``mlflow.log_table``'s format, readable with
        ``mlflow.load_table``: written in one upload and one tag, where ``log_table`` costs four calls per table."""
        import json

        from mlflow.utils.mlflow_tags import MLFLOW_LOGGED_ARTIFACTS

        if not tables:
            return

        def cell(value):
            return None if isinstance(value, float) and not np.isfinite(value) else value

        def write(folder: Path) -> None:
            for path, columns in tables.items():
                names = list(columns)
                rows = [[cell(v) for v in row] for row in zip(*(columns[n] for n in names))]
                (folder / path).parent.mkdir(parents=True, exist_ok=True)
                (folder / path).write_text(json.dumps({"columns": names, "data": rows}))

        self.log_files(write, None)
        listed = json.loads(self.client.get_run(self.run_id).data.tags.get(MLFLOW_LOGGED_ARTIFACTS, "[]"))
        listed += [{"path": path, "type": "table"} for path in tables if {"path": path, "type": "table"} not in listed]
        self.set_tags({MLFLOW_LOGGED_ARTIFACTS: json.dumps(listed)})

    def log_dict(self, data, artifact_file: str) -> None:
        self.client.log_dict(self.run_id, data, artifact_file)

    def log_text(self, text: str, artifact_file: str) -> None:
        self.client.log_text(self.run_id, text, artifact_file)

    def log_figures(self, figures: Mapping[str, Figure], folder: str = "plots") -> None:
        import matplotlib.pyplot as plt

        for name, fig in figures.items():
            try:
                self.client.log_figure(self.run_id, fig, f"{folder}/{name}.png")
            finally:
                plt.close(fig)

    def log_artifact(self, local_path: str | os.PathLike, artifact_path: str | None = None) -> None:
        path = Path(local_path)
        if path.is_dir():
            self.client.log_artifacts(self.run_id, str(path), artifact_path)
        else:
            self.client.log_artifact(self.run_id, str(path), artifact_path)

    def attach_log(self, log_file: Path) -> None:
        """The job's log file (flushed first) as the artifact ``logs/<name>``, when it exists."""
        for handler in logging.getLogger().handlers:
            if hasattr(handler, "flush"):
                handler.flush()
        if log_file.is_file():
            self.log_artifact(log_file, "logs")

    def log_inputs(self, inputs: Sequence[DataInput]) -> None:
        """The data sets the run read, in the run's "Datasets" section of the MLflow UI (``mlflow.log_input``'s
        record): name, digest (MLflow keeps 36 characters: the sha256's first 32; the whole one is in the profile),
        source and profile (samples, shape, classes)."""
        import json

        from mlflow.entities import Dataset, DatasetInput, InputTag

        if not inputs:
            return
        found = [
            DatasetInput(
                Dataset(
                    name=i.name[:500],
                    digest=i.digest[:32],
                    source_type=i.source_type[:36],
                    source=json.dumps({"uri": i.source}),
                    profile=json.dumps(i.profile()),
                ),
                tags=[InputTag("mlflow.data.context", i.context)],
            )
            for i in inputs
        ]
        from mlflow.exceptions import MlflowException

        # MLflow's SQL store adds a data set to the experiment by a look-up then an insert: jobs of one sweep that
        # log the same data at once race on its unique key (PostgreSQL: UniqueViolation). The loser's retry finds it.
        for attempt in range(DATASET_RACE_ATTEMPTS):
            try:
                self.client.log_inputs(self.run_id, datasets=found)
                return
            except MlflowException as exc:
                text = str(exc).lower()
                if attempt + 1 == DATASET_RACE_ATTEMPTS or ("unique" not in text and "duplicate" not in text):
                    raise
                time.sleep(0.2 * (attempt + 1))

    def share_runs_view(self, key: str, state: Mapping) -> str:
        """A view of this run's experiment page saved where the MLflow UI finds it (the experiment tag
        ``mlflow.sharedViewState.<key>``, which ``#/experiments/<id>/runs?viewStateShareKey=<key>`` opens: the runs
        table with ``state["selectedColumns"]``); returns that page's path."""
        import json

        experiment_id = self.client.get_run(self.run_id).info.experiment_id
        self.client.set_experiment_tag(experiment_id, f"{SHARED_VIEW_TAG_PREFIX}{key}", json.dumps(dict(state)))
        return shared_view_path(experiment_id, key)

    def log_files(self, writer, artifact_path: str | None) -> None:
        """Call ``writer(tmpdir)`` to write files, then upload the folder under ``artifact_path``."""
        with tempfile.TemporaryDirectory() as tmp:
            writer(Path(tmp))
            self.client.log_artifacts(self.run_id, tmp, artifact_path)

    # -- ending ----------------------------------------------------------------------------------------
    def end(self, status: str = "FINISHED") -> None:
        if not self._ended:
            self.client.set_terminated(self.run_id, status=status)
            self._ended = True

    def fail(self, exc: BaseException) -> None:
        """End the run after ``exc``: KILLED for Ctrl-C and SIGTERM (KeyboardInterrupt), FAILED for anything else; the
        error as a tag and the traceback as ``error.txt`` either way. On a full disk the tag and the traceback
        may not fit: the status is still written if it can be."""
        from owl_eval.errors import Terminated
        from owl_eval.tracking.faults import disk_full, full_disk_message, interruption_in

        interrupt = interruption_in(exc)  # a write that failed after the signal: still an interruption
        interrupted = interrupt is not None
        try:
            if isinstance(interrupt, Terminated):
                error = str(interrupt)
            elif interrupted:
                error = "interrupted (KeyboardInterrupt)"
            elif disk_full(exc):
                error = full_disk_message(exc, store_name(self.uri) if self.uri else None)  # one line, no SQL
            else:
                error = f"{type(exc).__name__}: {exc}"
            from owl_eval.tracking.redaction import scrub  # an error quoting a tracking URI shows no password

            self.set_tags({"error": scrub(error)[:5000]})
            self.log_text(scrub("".join(traceback.format_exception(exc))), "error.txt")
        except Exception as note_failed:
            if not disk_full(note_failed):
                raise
            log.warning("the error of run %s could not be written to its store: the disk is full", self.run_id)
        finally:
            self.end("KILLED" if interrupted else "FAILED")

    def full_disk_error(self, exc: BaseException):
        """The :class:`~owl_eval.tracking.faults.StoreFull` for ``exc`` (a full disk met by this run): which
        store, the space free there, and whether the run could still be ended."""
        from owl_eval.tracking.faults import StoreFull, full_disk_message

        message = full_disk_message(exc, store_name(self.uri) if self.uri else None)
        if self._ended:
            message += f"; run {self.run_id} ended FAILED"
        else:
            message += (
                f"; run {self.run_id} could not be marked FAILED either: the next launch on this host ends it "
                "(KILLED, its process gone)"
            )
        return StoreFull(message)

    def _remote(self) -> bool:
        """Whether the run's store is reached over the network (a tracking server or a database), which can be
        lost mid-run."""
        return bool(self.uri) and str(self.uri).lower().startswith(("http://", "https://", *DATABASE_SCHEMES))

    def _forget_store(self) -> None:
        """The store stopped answering: the next job of this process checks it again (:func:`check_server`,
        :func:`check_database`), one quick error, instead of waiting out retries."""
        _ANSWERING_SERVERS.discard(str(self.uri))
        _REACHED_DATABASES.discard(str(self.uri))

    def lost_server_error(self, exc: BaseException):
        """The :class:`~owl_eval.tracking.faults.ServerLost` for ``exc``: which server, why, and what becomes
        of the run."""
        from owl_eval.tracking.faults import ServerLost, why_lost
        from owl_eval.tracking.settings import redacted

        uri = str(self.uri)
        if uri.lower().startswith(DATABASE_SCHEMES):
            what = f"the database store at {redacted(uri)} stopped answering ({why_lost(exc)})"
        else:
            what = (
                f"the tracking server at {redacted(uri)} stopped answering ({why_lost(exc)}, after MLflow's retries: "
                f"MLFLOW_HTTP_REQUEST_MAX_RETRIES={os.environ.get('MLFLOW_HTTP_REQUEST_MAX_RETRIES')}, "
                f"MLFLOW_HTTP_REQUEST_TIMEOUT={os.environ.get('MLFLOW_HTTP_REQUEST_TIMEOUT')} s)"
            )
        return ServerLost(
            f"{what}; run {self.run_id} stays RUNNING there until a launch on this host reaches it again and ends it"
        )

    def __enter__(self) -> TrackedRun:
        return self

    def __exit__(self, exc_type, exc, tb) -> Literal[False]:
        """End the run (FINISHED, or after ``exc`` FAILED / KILLED). A full disk, met in the run's work or in ending
        it, becomes one :class:`~owl_eval.tracking.faults.StoreFull` naming the store; a server or database
        that stopped answering, one :class:`~owl_eval.tracking.faults.ServerLost`, with no further write. A
        Ctrl-C or SIGTERM stays what ends the command, also when a write that failed after it hid it."""
        from owl_eval.tracking.faults import disk_full, interruption_in, server_lost

        interrupt = interruption_in(exc)  # a Ctrl-C or SIGTERM, even one that a failed write then hid
        if self._remote() and server_lost(exc):
            # Every write would wait out MLflow's retries again: the run is left for the next launch to end.
            self._forget_store()  # the next job checks the store at once
            if interrupt is exc:
                return False
            if interrupt is not None:
                raise interrupt  # the command stops as the signal asked, not as a failed job of a sweep going on
            raise self.lost_server_error(exc) from exc
        full: BaseException | None = exc if disk_full(exc) else None
        try:
            if exc is None:
                self.end("FINISHED")
            else:
                self.fail(exc)
        except Exception as ending:
            if self._remote() and server_lost(ending):
                self._forget_store()
                if exc is not None:
                    log.warning("run %s could not be ended: %s", self.run_id, self.lost_server_error(ending))
                    return False  # the job's own error (an agent's crash) is what the user hears of
                raise self.lost_server_error(ending) from ending
            if not disk_full(ending):
                raise
            full = full or ending
            if exc is None:
                try:  # FINISHED could not be written: a run whose end was not recorded did not finish
                    self.end("FAILED")
                except Exception as again:  # noqa: BLE001 - the disk is full; the next launch marks the run
                    log.debug("run %s could not be marked FAILED: %s", self.run_id, again)
            elif not disk_full(exc):
                log.warning("run %s could not be ended on its store: its disk is full", self.run_id)
        if interrupt is not None and interrupt is not exc:
            raise interrupt
        if full is None or (exc is not None and (isinstance(exc, KeyboardInterrupt) or not disk_full(exc))):
            return False  # an interruption or another error (an agent's crash) is what the user hears of
        raise self.full_disk_error(full) from full
