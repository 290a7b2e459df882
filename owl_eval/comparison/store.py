"""Finding what to compare in an MLflow store: a sweep's finished jobs (its children and the runs a resumed sweep
reused) or an experiment's finished job runs, the keys that group them, and their comparison (:func:`load`).
The runs are read through :mod:`owl_eval.tracking.reading`.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence

from owl_eval.comparison.grouping import grouping_keys, swept_keys, with_required
from owl_eval.comparison.model import Comparison
from owl_eval.comparison.table import Row, compare, unindexed
from owl_eval.comparison.verdict import verdicts
from owl_eval.tracking.key_index import INDEX_ARTIFACT, StoredKeys
from owl_eval.tracking.reading import get_run_or_error, sweep_runs

SWEEP_PARAMS_PARAM = "sweep.params"  # on a sweep parent: hydra.sweeper.params as JSON (experiment files)


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
    params = get_run_or_error(client, parent_run_id, "--sweep").data.params
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
