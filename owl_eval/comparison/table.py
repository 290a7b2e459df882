"""The comparison table: per group (an agent in a setting, :mod:`owl_eval.comparison.grouping`) and metric, the
mean, the sample standard deviation and the 95 % Student-t confidence interval of the mean over seeds. Values in,
rows out: no MLflow call (:mod:`owl_eval.comparison.store` finds the runs and their ``metric_keys.json``).

Each row carries what every output shows of it: the agent's label (unique in the comparison), the setting, the
metric's display name and direction, and its role (``headline``: the protocol's headline metrics, in their order;
``detail``, ``baseline`` and ``timing`` after).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from owl_eval.comparison.grouping import (
    Pairs,
    agent_labels,
    dedupe,
    one_per_seed,
    run_value,
    setting_label,
    split_group,
)
from owl_eval.errors import ConfigError
from owl_eval.tracking.key_index import LoggedKey, StoredKeys
from owl_eval.tracking.keys import metric_key

DIRECTION_WORDS = {"maximize": "higher is better", "minimize": "lower is better", "none": ""}
ROLES = ("headline", "detail", "baseline", "timing")


@dataclass(frozen=True)
class Row:
    """One group's summary of one metric over its runs (one per seed). ``mean``, ``std`` and the interval are exact
    (NaN where undefined: no value, or one seed for ``std`` and the interval)."""

    group: Pairs  # ((key, value), ...), agent first
    metric: str  # the MLflow key
    direction: str  # maximize | minimize | none
    n: int  # seeds with a value
    mean: float
    std: float
    ci95_low: float
    ci95_high: float
    runs: int = 0  # seeds in the group (n < runs when the metric is N/A in some)
    na_reason: str = ""  # why there is no value (n = 0)
    headline: int | None = None  # the metric's place in its protocol's headline (metric_keys.json), else None
    agent: str = ""  # the agent's label in this comparison (grouping.agent_labels)
    title: str = ""  # the metric's display name from its declaration ("" when it has none: the key is shown)
    role: str = "detail"  # headline | detail | baseline | timing

    @property
    def setting(self) -> Pairs:
        return split_group(self.group)[1]

    @property
    def identity(self) -> Pairs:
        return split_group(self.group)[0]

    @property
    def label(self) -> str:
        """The group as a reader sees it: ``knn_novelty``, or ``knn_novelty (condition=given)`` in a setting."""
        setting = setting_label(self.setting)
        return f"{self.agent} ({setting})" if setting else self.agent

    @property
    def half_width(self) -> float:
        return self.mean - self.ci95_low

    @property
    def name(self) -> str:
        """The metric as a reader sees it: its display name, else its key."""
        return self.title or self.metric

    @property
    def name_with_direction(self) -> str:
        """``M1: FN in correctly detected trials (lower is better)``."""
        words = DIRECTION_WORDS.get(self.direction, "")
        return f"{self.name} ({words})" if words else self.name


def summarize(values: Sequence[float]) -> tuple[int, float, float, float, float]:
    """n, mean, sample std (ddof=1), and the two-sided 95 % Student-t interval of the mean; NaN for n < 2."""
    from scipy.special import stdtrit  # t's quantile, what scipy.stats.t.ppf computes (scipy.stats: ~1 s to import)

    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    n = int(x.size)
    if n == 0:
        return 0, math.nan, math.nan, math.nan, math.nan
    mean = float(x.mean())
    if n == 1:
        return 1, mean, math.nan, math.nan, math.nan
    std = float(x.std(ddof=1))
    half = float(stdtrit(n - 1, 0.975)) * std / math.sqrt(n)
    return n, mean, std, mean - half, mean + half


# -- which runs, which metrics --------------------------------------------------------------------------
def logged_keys(run) -> list[str]:
    """The MLflow keys of a run's metrics and of its N/A reasons (tracking tags an N/A reason ``na.<MLflow key>``)."""
    logged = dict.fromkeys(run.data.metrics)
    logged.update(dict.fromkeys(t[len("na.") :] for t in run.data.tags if t.startswith("na.")))
    return list(logged)


def _entry(members: Sequence, key: str, keys: StoredKeys) -> LoggedKey | None:
    """What ``key`` holds, from the first run of ``members`` that logged it (as a value or an N/A reason)."""
    for r in members:
        if key in r.data.metrics or f"na.{key}"[:250] in r.data.tags:
            found = keys.entry(r, key)
            if found is not None:
                return found
    return None


def _order(key: str, entry: LoggedKey | None) -> tuple:
    """The headline first in its protocol's order, then the rest (``detail/``), the baseline agent's, timings
    last; names holding ``_at_`` after the others; keys without an entry (runs logged before ``metric_keys.json``)
    by their text."""
    if entry is None:
        return (1, 0, "_at_" in key, key)
    role = ROLES.index(_role(entry))
    return (role, entry.headline_rank or 0, "_at_" in key, key)


def comparable_metrics(
    runs: Sequence, wanted: Sequence[str] | None = None, keys: StoredKeys | None = None
) -> list[str]:
    """Scalar metrics to compare: those listed, else every declared metric the runs logged or marked N/A
    (their ``metric_keys.json`` says which keys those are; :mod:`owl_eval.tracking.key_index`).

    Per-step series (``top1_batch``) are left out: a run's latest value of a series is not a summary. A run logged
    before ``metric_keys.json`` existed (and no run of its protocol and metric settings with one) cannot tell: its
    every logged key is compared, without a direction (:func:`unindexed`).
    """
    keys = keys or StoredKeys.fixed(None)
    logged: dict[str, None] = {}
    for r in runs:
        logged.update(dict.fromkeys(logged_keys(r)))
    if wanted:
        names = [_logged_as(w, logged, runs, keys) for w in wanted]
        missing = [w for w, k in zip(wanted, names) if k not in logged]
        if missing:
            raise ConfigError(f"--metrics: {missing} not logged by these runs; logged: {sorted(logged)}")
        return names
    keep: dict[str, LoggedKey | None] = {}
    for k in logged:
        logged_by = [r for r in runs if k in r.data.metrics or f"na.{k}"[:250] in r.data.tags]
        entry = _entry(logged_by, k, keys)
        if entry is not None and entry.declared and not entry.series:
            keep[k] = entry
        elif entry is None and any(not keys.indexed(r) for r in logged_by):
            keep[k] = None
    return sorted(keep, key=lambda k: _order(k, keep[k]))


def unindexed(runs: Sequence, keys: StoredKeys) -> list:
    """The runs read without a ``metric_keys.json`` (neither theirs nor one of their protocol and metric settings):
    logged before it existed."""
    return [r for r in runs if not keys.indexed(r)]


def _logged_as(name: str, logged: Mapping, runs: Sequence, keys: StoredKeys) -> str:
    """The key a metric name is logged under in these runs: as given (``detail/top1_pre``), or the key whose index
    entry reports that name (``top1_pre`` -> ``detail/top1_pre``, ``baseline.top1`` -> ``baseline/top1``)."""
    key = metric_key(name)
    if key in logged:
        return key
    for k in logged:
        for r in runs:
            entry = keys.entry(r, k) if k in r.data.metrics or f"na.{k}"[:250] in r.data.tags else None
            if entry is not None:
                if entry.key == name:
                    return k
                break
    return key


def _na_reason(members: Sequence, key: str) -> str:
    reasons = [r.data.tags.get(f"na.{key}"[:250]) for r in members]
    found = list(dict.fromkeys(x for x in reasons if x))
    return found[0] if found else "not logged by these runs"


def _role(entry: LoggedKey | None) -> str:
    if entry is None:
        return "detail"
    if entry.key.timing:
        return "timing"
    if entry.key.agent:
        return "baseline"
    return "headline" if entry.headline_rank is not None else "detail"


def compare(
    runs: Sequence, group_keys: Sequence[str], metrics: Sequence[str] | None = None, keys: StoredKeys | None = None
) -> list[Row]:
    """The comparison table: a Row per (group, metric), groups sorted, metrics headline first.

    ``keys``: the runs' ``metric_keys.json`` entries (:class:`~owl_eval.tracking.key_index.StoredKeys`, read by
    :mod:`owl_eval.comparison.store`), which give each metric its direction, display name and headline place; None:
    no run has one (every metric undirected)."""
    keys = keys or StoredKeys.fixed(None)
    runs = dedupe(runs)
    names = comparable_metrics(runs, metrics, keys)
    groups: dict[Pairs, list] = {}
    for r in runs:
        groups.setdefault(tuple((k, run_value(r, k)) for k in group_keys), []).append(r)
    labels = agent_labels(split_group(g)[0] for g in sorted(groups))
    entries = {name: _entry(runs, name, keys) for name in names}
    rows = []
    for group in sorted(groups):
        members = one_per_seed(groups[group])
        for name in names:
            stats = summarize([r.data.metrics.get(name, math.nan) for r in members])
            reason = _na_reason(members, name) if stats[0] == 0 else ""
            entry = _entry(members, name, keys) or entries[name]
            rows.append(
                Row(
                    group,
                    name,
                    entry.direction if entry is not None else "none",
                    *stats,
                    runs=len(members),
                    na_reason=reason,
                    headline=entry.headline_rank if entry is not None else None,
                    agent=labels[split_group(group)[0]],
                    title=entry.title if entry is not None else "",
                    role=_role(entry),
                )
            )
    return rows
