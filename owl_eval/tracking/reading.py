"""Reading runs back from a store: every page of a search, a run by id with an error naming it, a sweep's finished
jobs (its children and the runs a resumed sweep reused), an experiment's finished job runs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from owl_eval.errors import ConfigError
from owl_eval.tracking.keys import PARENT_TAG, REUSED_TAG_PREFIX, RUN_KIND_TAG
from owl_eval.tracking.store import MAX_IDS_PER_SEARCH, chunks, filter_literal


def search_all(client, experiment_ids, filter_string: str) -> list:
    from mlflow.entities import ViewType

    out, token = [], None
    while True:
        page = client.search_runs(
            experiment_ids,
            filter_string=filter_string,
            run_view_type=ViewType.ACTIVE_ONLY,
            max_results=1000,
            page_token=token,
        )
        out.extend(page)
        token = page.token
        if not token:
            return out


def get_run_or_error(client, run_id: str, what: str):
    from mlflow.exceptions import MlflowException

    try:
        return client.get_run(run_id)
    except MlflowException:
        raise ConfigError(f"{what}: no run {run_id!r} in this store") from None


def sweep_runs(client, parent_run_id: str) -> list:
    """The FINISHED job runs of a sweep: its children plus the finished runs a resumed sweep reused."""
    parent = get_run_or_error(client, parent_run_id, "--sweep")
    parent_id = filter_literal(parent_run_id, what="--sweep")
    children = [
        r
        for r in search_all(
            client,
            [parent.info.experiment_id],
            f"tags.`{PARENT_TAG}` = {parent_id} and attributes.status = 'FINISHED'",
        )
        if r.data.tags.get(RUN_KIND_TAG) != "reused"  # stands for a reused run, counted below as the original
    ]
    return children + [r for r in reused_runs(client, parent) if r.info.status == "FINISHED"]


def reused_ids(parent) -> dict[str, str]:
    """The runs a resumed sweep (its ``parent`` run) reused: run id -> the job's overrides."""
    tags = parent.data.tags
    return {k[len(REUSED_TAG_PREFIX) :]: v for k, v in tags.items() if k.startswith(REUSED_TAG_PREFIX)}


def reused_runs(client, parent, ids: Iterable[str] | None = None) -> list:
    """The runs ``parent``'s sweep reused (or those of ``ids`` among them), read in one search per 100 ids (they
    are in the parent's experiment); one missing from the store (deleted since) is a ConfigError naming it."""
    wanted = sorted(reused_ids(parent) if ids is None else ids)
    found = runs_by_id(client, parent.info.experiment_id, wanted)
    missing = sorted(set(wanted) - {r.info.run_id for r in found})
    if missing:
        raise ConfigError(
            f"sweep {parent.info.run_id} tag {REUSED_TAG_PREFIX}{missing[0]}: no run {missing[0]!r} in this store"
        )
    return sorted(found, key=lambda r: r.info.run_id)


def runs_by_id(client, experiment_id: str, ids: Iterable[str], *, status: str | None = None) -> list:
    """The runs ``ids`` of one experiment (only those in ``status`` when given), by run id, in one search per 100
    ids; a run not in the store is not among them."""
    found = []
    where = f" and attributes.status = {filter_literal(status, what='status')}" if status else ""
    for ids_chunk in chunks(sorted(ids), MAX_IDS_PER_SEARCH):
        chunk = ", ".join(filter_literal(i, what="run id") for i in ids_chunk)
        found += search_all(client, [experiment_id], f"attributes.run_id IN ({chunk}){where}")
    return sorted(found, key=lambda r: r.info.run_id)


def experiment_runs(client, experiment: str, tags: Mapping[str, str] | None = None) -> list:
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        names = [e.name for e in client.search_experiments()]
        raise ConfigError(f"experiment: no MLflow experiment {experiment!r} in this store; experiments: {names}")
    clauses = [f"tags.`{RUN_KIND_TAG}` = 'job'", "attributes.status = 'FINISHED'"]
    for key, value in (tags or {}).items():
        if "`" in key or not key:
            raise ConfigError(f"--tag: the tag name {key!r} cannot be searched for (empty or holds a backtick)")
        clauses.append(f"tags.`{key}` = {filter_literal(value, what=f'--tag {key}')}")
    return search_all(client, [exp.experiment_id], " and ".join(clauses))
