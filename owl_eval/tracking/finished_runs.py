"""Runs created already FINISHED, whole: a resumed sweep's stand-ins (:mod:`owl_eval.tracking.reuse`).

Through MLflow's calls a run of ~100 values costs several store transactions (``create_run``; ``log_batch``, one each
for its params, metrics and tags; ``set_terminated``): 56 ms of CPU a run on SQLite, 2.2 s for a 40-job sweep. Where the store is a database MLflow reads
through SQLAlchemy (``sqlite:``, ``postgresql:``, ``mysql:`` URIs), :func:`insert_finished_runs` writes them all in
one transaction instead, with MLflow's own table models, the rows filled as its ``SqlAlchemyStore`` fills them
(``create_run``, ``log_batch``, ``set_terminated``: the run's name as the ``mlflow.runName`` tag, NaN and +-inf metric
values as its ``sanitize_metric_value`` stores them, each metric's latest value). MLflow's value checks are not
repeated: the values are copied from runs it stored. Any other store (a tracking server), or any failure (the
transaction is rolled back), is told to the caller, which makes the runs with MLflow's calls
(:func:`log_finished_run`); read back through ``MlflowClient``, both give the same runs (tested).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from owl_eval.tracking.store import MAX_METRICS_PER_BATCH, MAX_PARAMS_PER_BATCH, chunks

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class FinishedRun:
    """A run to create FINISHED in ``experiment_id``: its name, tags, params and metrics (each one value, step 0)."""

    experiment_id: str
    name: str
    tags: Mapping[str, str]
    params: Mapping[str, str]
    metrics: Mapping[str, float]


def log_finished_run(client: Any, run: FinishedRun) -> str:
    """``run`` made with MLflow's calls (RUNNING while it is filled, then FINISHED); its id."""
    from mlflow.entities import Metric, Param
    from mlflow.utils.time import get_current_time_millis

    run_id = client.create_run(run.experiment_id, run_name=run.name, tags=dict(run.tags)).info.run_id
    now = get_current_time_millis()
    params = [Param(k, v) for k, v in run.params.items()]
    metrics = [Metric(k, float(v), now, 0) for k, v in run.metrics.items()]
    # one batch holds both, within MLflow's limit of 1000 entries of which at most 100 params
    param_batches: Iterable[list[Param]] = chunks(params, MAX_PARAMS_PER_BATCH)
    metric_batches: Iterable[list[Metric]] = chunks(metrics, MAX_METRICS_PER_BATCH - MAX_PARAMS_PER_BATCH)
    no_batch: list = []
    for param_batch, metric_batch in itertools.zip_longest(param_batches, metric_batches, fillvalue=no_batch):
        client.log_batch(run_id, params=param_batch, metrics=metric_batch)
    client.set_terminated(run_id, status="FINISHED")
    return run_id


def insert_finished_runs(client: Any, runs: Sequence[FinishedRun]) -> list[str] | None:
    """``runs`` written FINISHED in one transaction of the client's SQLAlchemy store (see the module); their ids, in
    order. None when the store is of another kind or the transaction failed (nothing written): the caller uses
    :func:`log_finished_run`."""
    store = _sqlalchemy_store(client)
    if store is None:
        return None
    if not runs:
        return []
    try:
        return _insert(store, runs)
    except Exception as exc:  # noqa: BLE001 - rolled back; MLflow's own calls then make the runs (and name any fault)
        log.debug("finished runs not inserted in one transaction (%s: %s)", type(exc).__name__, exc)
        return None


def _sqlalchemy_store(client: Any) -> Any:
    """The client's store where it is MLflow's SQLAlchemy store, else None."""
    from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

    store = getattr(getattr(client, "_tracking_client", None), "store", None)
    return store if isinstance(store, SqlAlchemyStore) else None


def _insert(store: Any, runs: Sequence[FinishedRun]) -> list[str]:
    import uuid

    from mlflow.entities import LifecycleStage, RunStatus, SourceType
    from mlflow.store.tracking.dbmodels.models import SqlLatestMetric, SqlMetric, SqlParam, SqlRun, SqlTag
    from mlflow.utils.mlflow_tags import MLFLOW_RUN_NAME, MLFLOW_USER
    from mlflow.utils.time import get_current_time_millis
    from mlflow.utils.uri import append_to_uri_path
    from sqlalchemy import insert

    locations = {}
    for experiment_id in {run.experiment_id for run in runs}:
        experiment = store.get_experiment(experiment_id)
        if experiment.lifecycle_stage != LifecycleStage.ACTIVE:
            raise ValueError(f"experiment {experiment_id} is {experiment.lifecycle_stage}")
        locations[experiment_id] = experiment.artifact_location
    now = get_current_time_millis()
    run_rows, tag_rows, param_rows, metric_rows = [], [], [], []
    ids = []
    for run in runs:
        run_id = uuid.uuid4().hex
        ids.append(run_id)
        run_rows.append(
            {
                "run_uuid": run_id,
                "name": run.name,
                "artifact_uri": append_to_uri_path(locations[run.experiment_id], run_id, store.ARTIFACTS_FOLDER_NAME),
                "experiment_id": int(run.experiment_id),
                "source_type": SourceType.to_string(SourceType.UNKNOWN),
                "source_name": "",
                "entry_point_name": "",
                "user_id": run.tags.get(MLFLOW_USER, "unknown"),
                "status": RunStatus.to_string(RunStatus.FINISHED),
                "start_time": now,
                "end_time": now,
                "deleted_time": None,
                "source_version": "",
                "lifecycle_stage": LifecycleStage.ACTIVE,
            }
        )
        tags = {**run.tags, MLFLOW_RUN_NAME: run.name}
        tag_rows += [{"run_uuid": run_id, "key": k, "value": v} for k, v in tags.items()]
        param_rows += [{"run_uuid": run_id, "key": k, "value": v} for k, v in run.params.items()]
        for key, value in run.metrics.items():
            is_nan, stored = store.sanitize_metric_value(float(value))
            metric_rows.append(
                {"run_uuid": run_id, "key": key, "value": stored, "timestamp": now, "step": 0, "is_nan": is_nan}
            )
    # one transaction, committed whole or not at all; each insert is one executemany (no cap on its rows)
    with store.ManagedSessionMaker(read_only=False) as session:
        session.execute(insert(SqlRun), run_rows)  # first: the other tables' rows refer to it
        for model, rows in ((SqlTag, tag_rows), (SqlParam, param_rows), (SqlMetric, metric_rows)):
            if rows:
                session.execute(insert(model), rows)
        if metric_rows:  # a new run's latest value of each metric is its only one
            session.execute(insert(SqlLatestMetric), metric_rows)
    return ids
