"""A job's MLflow run (:class:`TrackedRun`): created under its sweep's parent, its config, metrics, series, figures
and record logged, ended with its status.

One MLflow run per job; in a multirun, a parent run for the sweep (:mod:`owl_eval.tracking.sweep_parent`) and a
nested child per job. Everything is sent in batches through ``MlflowClient.log_batch`` (SQLite costs 10-30 ms per
call; MLflow's limits: :mod:`owl_eval.tracking.store`), figures as PNG artifacts, the resolved config as YAML; the
key of each metric is :func:`owl_eval.tracking.keys.mlflow_key`'s.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import tempfile
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from matplotlib.figure import Figure


import numpy as np

from owl_eval.datasets.provenance import DataInput
from owl_eval.metrics.keys import MetricKey
from owl_eval.metrics.results import MetricResults
from owl_eval.tracking.key_index import INDEX_ARTIFACT, LoggedKey, index_json
from owl_eval.tracking.keys import (
    PARENT_TAG,
    SHARED_VIEW_TAG_PREFIX,
    TRUNCATED_PARAMS_TAG,
    logged_key_entry,
    metric_key,
    mlflow_key,
    shared_view_path,
)
from owl_eval.tracking.settings import TrackingSettings
from owl_eval.tracking.store import (
    DATABASE_SCHEMES,
    MAX_METRICS_PER_BATCH,
    MAX_PARAMS_PER_BATCH,
    MAX_TAGS_PER_BATCH,
    check_free_space,
    chunks,
    forget_store,
    get_or_create_experiment,
    make_client,
    store_name,
    store_warmed,
)

log = logging.getLogger(__name__)


DATASET_RACE_ATTEMPTS = 4  # tries of log_inputs when a parallel job adds the same data set at the same moment


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
        store_warmed()
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
        forget_store(str(self.uri))

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
