"""A run's ``metric_keys.json``: the MLflow key of each metric the run reported, with the fields of its
:class:`~owl_eval.metrics.keys.MetricKey` and what its declaration says (direction, bounds, series, headline rank).
A value fixed by construction is not logged (``metrics_na.json`` holds it) but has its entry too, so runs of one
protocol and metric settings have the same index however their agents fared.

:class:`~owl_eval.tracking.runs.TrackedRun` writes it with the metrics; the end-of-run summary and
``owl-eval-compare`` read it instead of reading anything out of a key's text::

    {"version": 1, "protocol": "ond", "keys": {
        "top1": {"key": {"name": "top1", "agent": "", "task": null, "k": null, "threshold": null,
                         "axis": null, "timing": false},
                 "reported": "top1", "declared": true, "direction": "maximize", "bounds": [0.0, 1.0],
                 "series": false, "headline_rank": 0, "title": "Top-1 accuracy"},
        "baseline/top1_batch": {..., "series": true, "headline_rank": null, "title": ""},
        "threshold/m2_cdt_pct": {...}   # a logged table of a threshold sweep
    }}

``bounds`` holds null for an infinite bound; ``declared`` is false (and ``direction`` "none") for a key the
protocol does not declare. ``title`` is a headline key's short label (its declaration's
:attr:`~owl_eval.metrics.results.MetricSpec.display_name`), "" for any other key and in files written before it
existed. Runs logged before this file existed have none: :class:`StoredKeys` says so (``indexed``) and gives them
no entries.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from owl_eval.metrics.keys import MetricKey

INDEX_ARTIFACT = "metric_keys.json"
VERSION = 1


@dataclass(frozen=True)
class LoggedKey:
    """One entry of a run's ``metric_keys.json``: what an MLflow key holds."""

    key: MetricKey
    declared: bool
    direction: str  # maximize | minimize | none
    bounds: tuple[float, float]
    series: bool
    headline_rank: int | None
    title: str = ""  # the short label of a headline key (its declaration's display name), else ""

    def as_json(self) -> dict[str, Any]:
        return {
            "key": self.key.fields(),
            "reported": str(self.key),
            "declared": self.declared,
            "direction": self.direction,
            "bounds": [b if math.isfinite(b) else None for b in self.bounds],
            "series": self.series,
            "headline_rank": self.headline_rank,
            "title": self.title,
        }

    @classmethod
    def from_json(cls, entry: Mapping[str, Any]) -> LoggedKey:
        low, high = entry.get("bounds") or (None, None)
        return cls(
            key=MetricKey.from_fields(dict(entry["key"])),
            declared=bool(entry.get("declared", False)),
            direction=str(entry.get("direction") or "none"),
            bounds=(-math.inf if low is None else float(low), math.inf if high is None else float(high)),
            series=bool(entry.get("series", False)),
            headline_rank=entry.get("headline_rank"),
            title=str(entry.get("title") or ""),
        )


def index_json(protocol: str | None, entries: Mapping[str, LoggedKey]) -> dict[str, Any]:
    """The content of ``metric_keys.json``."""
    return {"version": VERSION, "protocol": protocol, "keys": {k: e.as_json() for k, e in entries.items()}}


def read_index(data: Mapping[str, Any]) -> dict[str, LoggedKey]:
    """MLflow key -> entry, from the content of ``metric_keys.json``."""
    return {key: LoggedKey.from_json(entry) for key, entry in (data.get("keys") or {}).items()}


_PROGRESS_BAR = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"


@contextlib.contextmanager
def _no_progress_bar():
    """MLflow draws a "Downloading artifacts" bar on stderr for every download: not for a few kB of index."""
    before = os.environ.get(_PROGRESS_BAR)
    os.environ[_PROGRESS_BAR] = "false"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(_PROGRESS_BAR, None)
        else:
            os.environ[_PROGRESS_BAR] = before


def download_index(client, run_id: str) -> dict[str, LoggedKey] | None:
    """The run's ``metric_keys.json`` read through ``client``, or None when the run has none (logged before it
    existed, or ended before logging any metric)."""
    with tempfile.TemporaryDirectory() as tmp, _no_progress_bar():
        try:
            local = Path(client.download_artifacts(run_id, INDEX_ARTIFACT, tmp))
            data = json.loads(local.read_text())
        except Exception:  # noqa: BLE001 - no such artifact (each store says so its own way)
            return None
    return read_index(data) if isinstance(data, dict) else None


def metric_settings(run) -> tuple:
    """What a run's keys and their declarations depend on: its protocol and its ``metrics.*`` params."""
    params = run.data.params
    return (
        run.data.tags.get("protocol", ""),
        tuple(sorted((k, v) for k, v in params.items() if k.startswith("metrics."))),
    )


class StoredKeys:
    """The index entries of stored runs, read once per group of runs that share protocol and metric settings
    (:func:`metric_settings`): within such a group an MLflow key always holds the same metric key and declaration.
    A key the group's index lacks (another run's task names, a value logged in one run and fixed by construction in
    another) is looked up in the run's own index, which then joins the group's. ``load(run_id)`` reads one run's
    index (None: the run has none); nothing here talks to MLflow itself."""

    def __init__(self, load: Callable[[str], Mapping[str, LoggedKey] | None]):
        self._load = load
        self._own: dict[str, dict[str, LoggedKey] | None] = {}
        self._groups: dict[tuple, dict[str, LoggedKey]] = {}

    @classmethod
    def of(cls, client) -> StoredKeys:
        """Entries read from the runs' ``metric_keys.json`` through an ``MlflowClient``."""
        return cls(lambda run_id: download_index(client, run_id))

    @classmethod
    def fixed(cls, entries: Mapping[str, LoggedKey] | None) -> StoredKeys:
        """The same entries for every run (None: as for runs without an index)."""
        return cls(lambda run_id: None if entries is None else dict(entries))

    def _own_index(self, run) -> dict[str, LoggedKey] | None:
        run_id = run.info.run_id
        if run_id not in self._own:
            found = self._load(run_id)
            self._own[run_id] = None if found is None else dict(found)
        return self._own[run_id]

    def _group(self, run) -> dict[str, LoggedKey] | None:
        settings = metric_settings(run)
        if settings not in self._groups:
            own = self._own_index(run)
            if own is None:
                return None
            self._groups[settings] = dict(own)
        return self._groups[settings]

    def indexed(self, run) -> bool:
        """Whether ``run`` or a run of its group has an index (False: logged before ``metric_keys.json``)."""
        return self._group(run) is not None

    def entry(self, run, key: str) -> LoggedKey | None:
        """What the MLflow key ``key`` holds in ``run``, or None (not logged with an index)."""
        group = self._group(run)
        if group is not None and key in group:
            return group[key]
        own = self._own_index(run)
        if own is None or key not in own:
            return None
        if group is not None:
            group.update(own)
        return own[key]
