"""Finding what to compare in an MLflow store: a sweep's finished jobs (its children and the runs a resumed sweep
reused) or an experiment's finished job runs, the keys that group them, and their comparison (:func:`load`).
The only module of :mod:`owl_eval.comparison` that reads the store (through ``MlflowClient``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Mapping, Sequence

from owl_eval.comparison.grouping import grouping_keys, swept_keys, with_required
from owl_eval.comparison.model import Comparison
from owl_eval.comparison.table import Row, compare, unindexed
from owl_eval.comparison.verdict import verdicts
from owl_eval.errors import ConfigError
from owl_eval.tracking.key_index import INDEX_ARTIFACT, StoredKeys
from owl_eval.tracking.runs import REUSED_TAG_PREFIX, RUN_KIND_TAG, filter_literal

SWEEP_PARAMS_PARAM = "sweep.params"  # on a sweep parent: hydra.sweeper.params as JSON (experiment files)


# -- finding runs ------------------------------------------------------------------------------------------
def _search(client, experiment_ids, filter_string: str) -> list:
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


def _get_run(client, run_id: str, what: str):
    from mlflow.exceptions import MlflowException

    try:
        return client.get_run(run_id)
    except MlflowException:
        raise ConfigError(f"{what}: no run {run_id!r} in this store") from None


def sweep_runs(client, parent_run_id: str) -> list:
    """The FINISHED job runs of a sweep: its children plus the finished runs a resumed sweep reused."""
    parent = _get_run(client, parent_run_id, "--sweep")
    parent_id = filter_literal(parent_run_id, what="--sweep")
    children = [
        r
        for r in _search(
            client,
            [parent.info.experiment_id],
            f"tags.`mlflow.parentRunId` = {parent_id} and attributes.status = 'FINISHED'",
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
    are in the parent's experiment); one that is no longer in the store is a ConfigError naming it."""
    wanted = sorted(reused_ids(parent) if ids is None else ids)
    found = []
    for start in range(0, len(wanted), 100):
        chunk = ", ".join(filter_literal(i, what="run id") for i in wanted[start : start + 100])
        found += _search(client, [parent.info.experiment_id], f"attributes.run_id IN ({chunk})")
    missing = sorted(set(wanted) - {r.info.run_id for r in found})
    if missing:
        raise ConfigError(
            f"sweep {parent.info.run_id} tag {REUSED_TAG_PREFIX}{missing[0]}: no run {missing[0]!r} in this store"
        )
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
    return _search(client, [exp.experiment_id], " and ".join(clauses))


def sweep_selection(
    client,
    parent_run_id: str,
    *,
    overrides: Sequence[str] | None = None,
    sweeper_params: Mapping | None = None,
    group: Sequence[str] | None = None,
    tags: Mapping[str, str] | None = None,
) -> tuple[list, list[str]]:
    """A sweep's finished jobs (those with every tag of ``tags``) and the keys that group them:
    :func:`grouping_keys` (``group``: keys put first; a setting that differs still splits,
    :func:`with_required`); the swept keys come from the parent run's params (``sweep.overrides``,
    ``sweep.params``) unless given. ``([], [])`` when no job matches."""
    runs = [
        r for r in sweep_runs(client, parent_run_id) if all(r.data.tags.get(k) == v for k, v in (tags or {}).items())
    ]
    if not runs:
        return [], []
    params = _get_run(client, parent_run_id, "--sweep").data.params
    if overrides is None:
        overrides = params.get("sweep.overrides", "").split()
    if sweeper_params is None:
        sweeper_params = json.loads(params.get(SWEEP_PARAMS_PARAM) or "{}")
    swept = swept_keys(overrides, sweeper_params)
    keys = with_required(runs, group, swept) if group else grouping_keys(runs, swept)
    return runs, ["agent", *(k for k in keys if k != "agent")]


def stored_rows(client, runs: Sequence, group_keys: Sequence[str], metrics: Sequence[str] | None = None) -> list[Row]:
    """:func:`~owl_eval.comparison.table.compare` of stored runs, with what their ``metric_keys.json`` says of each
    key; runs without one (logged before it existed) make one line on stderr."""
    keys = StoredKeys.of(client)
    rows = compare(runs, group_keys, metrics, keys)
    old = unindexed(runs, keys)
    if old:
        print(
            f"note: {len(old)} of {len(runs)} runs have no {INDEX_ARTIFACT} (logged before owl-eval wrote it): "
            "their metrics are compared without a better direction, series included",
            file=sys.stderr,
        )
    return rows


def load(
    client, runs: Sequence, group_keys: Sequence[str], metrics: Sequence[str] | None = None, *, title: str = ""
) -> Comparison:
    """The comparison of stored runs: the table (:func:`stored_rows`) and the verdicts between its agents
    (:func:`owl_eval.comparison.verdict.verdicts`)."""
    rows = stored_rows(client, runs, group_keys, metrics)
    vrows, values = verdicts(runs, group_keys, rows) if rows else ([], {})
    return Comparison(rows, vrows, values, title=title or "owl-eval comparison")
