"""Runs in, comparison rows out: per group and metric, the mean, the standard deviation and the 95 % Student-t
confidence interval of the mean over seeds (no MLflow calls: :mod:`owl_eval.runner.compare` finds the runs).

A group is the agent plus every other setting that differs between the runs, except the seed and a param that
copies it (:func:`grouping_keys`): runs made with different settings are never averaged together. Within a group
each seed counts once, so ``n`` is the number of seeds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from owl_eval.errors import ConfigError
from owl_eval.runner.key_index import LoggedKey, StoredKeys
from owl_eval.runner.tracking import (
    CONFIG_HASH_TAG,
    metric_key,
)

REUSED_TAG_PREFIX = "owl_eval.reused."  # on a sweep parent: a finished run a resumed sweep reused
SWEEP_PARAMS_PARAM = "sweep.params"  # on a sweep parent: hydra.sweeper.params as JSON (experiment files)
NOT_GROUPED = {"seed"}  # what varies between the runs averaged together
# Tags that name what a run evaluated: group keys with readable labels, tried before the params behind them.
GROUP_TAGS = ("domain", "condition", "baseline")
# Params that never make two runs different evaluations.
BOOKKEEPING_PARAMS = {"seed", "progress", "figures", "experiment_name"}
BOOKKEEPING_PREFIXES = ("tracking.", "hydra.")


@dataclass(frozen=True)
class Row:
    """One group's summary of one metric over its runs (one per seed)."""

    group: tuple[tuple[str, str], ...]  # ((key, value), ...), agent first
    metric: str
    direction: str  # maximize | minimize | none
    n: int  # seeds with a value
    mean: float
    std: float
    ci95_low: float
    ci95_high: float
    runs: int = 0  # seeds in the group (n < runs when the metric is N/A in some)
    na_reason: str = ""  # why there is no value (n = 0)
    headline: int | None = None  # the metric's place in its protocol's headline (metric_keys.json), else None

    @property
    def label(self) -> str:
        return group_label(self.group)

    @property
    def half_width(self) -> float:
        return self.mean - self.ci95_low


def group_label(group: Sequence[tuple[str, str]]) -> str:
    """A valid MLflow key fragment naming a group: ``ond.knn_novelty`` or ``ond.knn_novelty__condition-given``."""
    parts = [value.replace("/", ".") if key == "agent" else f"{key.rsplit('.', 1)[-1]}-{value}" for key, value in group]
    return metric_key("__".join(parts) or "all").replace("/", ".")


def summarize(values: Sequence[float]) -> tuple[int, float, float, float, float]:
    """n, mean, sample std (ddof=1), and the two-sided 95 % Student-t interval of the mean; NaN for n < 2."""
    from scipy.stats import t

    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    n = int(x.size)
    if n == 0:
        return 0, math.nan, math.nan, math.nan, math.nan
    mean = float(x.mean())
    if n == 1:
        return 1, mean, math.nan, math.nan, math.nan
    std = float(x.std(ddof=1))
    half = float(t.ppf(0.975, n - 1)) * std / math.sqrt(n)
    return n, mean, std, mean - half, mean + half


# -- which groups --------------------------------------------------------------------------------------
def _sweep_values(key: str, value) -> bool:
    """Whether a sweeper param's value sweeps (``a,b``, ``range(1,3)``, a list of two or more)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    if isinstance(value, Sequence) and not isinstance(value, str):
        return len(value) > 1
    try:
        (override,) = OverridesParser.create().parse_overrides([f"{key}={value}"])
    except Exception:  # not override syntax: not a sweep Hydra could run (the data still group by it if it varies)
        return False
    return override.is_sweep_override()


def swept_keys(overrides: Iterable[str], sweeper_params: Mapping | None = None) -> list[str]:
    """Keys a sweep varies, from the command line (``agent=a,b``, ``protocol.num_trials=range(2,5)``) and from
    ``hydra.sweeper.params`` (declared in an experiment file), seed excluded, agent first."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(list(overrides))
    keys = [o.key_or_group.lstrip("+~") for o in parsed if o.is_sweep_override()]
    keys += [str(k) for k, v in (sweeper_params or {}).items() if _sweep_values(str(k), v)]
    keys = [k for k in keys if k not in NOT_GROUPED]
    return ["agent"] + [k for k in dict.fromkeys(keys) if k != "agent"]


def run_value(run, key: str) -> str:
    """A group key's value in a run: the tag of that name (agent, domain, condition...), else the param."""
    if key in run.data.tags:
        return run.data.tags[key]
    return run.data.params.get(key, "none")


def run_seed(run) -> str:
    return run.data.tags.get("seed") or run.data.params.get("seed") or run.info.run_id


def _determined(runs: Sequence, key: str, by: Sequence[str]) -> bool:
    """Whether ``key`` takes one value among the runs that agree on every key of ``by``."""
    seen: dict[tuple, str] = {}
    for r in runs:
        where = tuple(run_value(r, b) for b in by)
        value = run_value(r, key)
        if seen.setdefault(where, value) != value:
            return False
    return True


def _seed_copy(runs: Sequence, name: str) -> bool:
    """A param that holds the run's seed (``protocol.ste.seed: ${seed}``): it varies with the seed and only with it."""
    return all(r.data.params.get(name) == run_seed(r) for r in runs)


def grouping_keys(runs: Sequence, swept: Sequence[str] = ()) -> list[str]:
    """The keys that split runs into groups: the agent, then every tag or param whose value is not fixed by
    the keys before it, except the seed, a param that copies the seed, a per-job output directory and
    bookkeeping (``tracking.*``, ``progress``...). Runs made with different settings never share a group,
    whichever seeds finished: seeds 0-1 at ``protocol.num_trials=50`` and seeds 2-3 at ``=20`` are two groups.

    ``swept``: keys the sweep declares (:func:`swept_keys`), tried first after the agent so that the group labels
    name what the sweep varied. Candidates are tried tags first (readable labels: ``condition-given``), then swept
    keys, then params with few values first.
    """
    runs = dedupe(runs)  # the runs compare() averages
    keys = ["agent"]
    params = {
        name
        for r in runs
        for name in r.data.params
        if name not in BOOKKEEPING_PARAMS and not name.startswith(BOOKKEEPING_PREFIXES)
    }

    def values(name: str) -> list:
        return [r.data.params.get(name) for r in runs]

    def job_directory(name: str) -> bool:
        # an absolute path that differs in every run is where a job wrote (``${hydra:runtime.output_dir}/...``)
        seen = values(name)
        return len(seen) > 1 and len(set(seen)) == len(seen) and all(str(v).startswith("/") for v in seen)

    params = {name for name in params if not job_directory(name) and not _seed_copy(runs, name)}
    order = lambda name: (len(set(values(name))), any("/" in str(v) for v in values(name)), name)  # noqa: E731
    candidates = [*GROUP_TAGS, *swept, *sorted(params, key=order)]
    for key in dict.fromkeys(candidates):
        if key in keys or key in NOT_GROUPED:
            continue
        if not _determined(runs, key, keys):
            keys.append(key)
    return keys


def with_required(runs: Sequence, chosen: Sequence[str], swept: Sequence[str] = ()) -> list[str]:
    """``chosen`` group keys (``--group``), then every key :func:`grouping_keys` needs that they leave out: a
    chosen grouping may order or add keys, never pool runs made with different settings."""
    required = grouping_keys(runs, swept)
    chosen = ["agent", *(k for k in chosen if k != "agent")]
    return [*dict.fromkeys([*chosen, *(k for k in required if k not in chosen and not _determined(runs, k, chosen))])]


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
    """Timings last, then the baseline agent's, then the rest (``detail/``) after the headline; names holding
    ``_at_`` after the others (the order of earlier versions); keys without an entry (runs logged before
    ``metric_keys.json``) by their text."""
    if entry is None:
        return (False, False, False, "_at_" in key, key)
    timing, baseline = entry.key.timing, entry.key.agent != ""
    detail = not (timing or baseline or entry.headline_rank is not None)
    return (timing, baseline, detail, "_at_" in key, key)


def comparable_metrics(
    runs: Sequence, wanted: Sequence[str] | None = None, keys: StoredKeys | None = None
) -> list[str]:
    """Scalar metrics to compare: those listed, else every declared metric the runs logged or marked N/A
    (their ``metric_keys.json`` says which keys those are; :mod:`owl_eval.runner.key_index`).

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


def dedupe(runs: Sequence) -> list:
    """One run per config (latest first wins): re-runs of an identical config must not count twice."""
    seen: set[str] = set()
    out = []
    for r in sorted(runs, key=lambda r: r.info.start_time or 0, reverse=True):
        h = r.data.tags.get(CONFIG_HASH_TAG) or r.info.run_id
        if h not in seen:
            seen.add(h)
            out.append(r)
    return out


def one_per_seed(runs: Sequence) -> list:
    """The latest run of each seed: two runs of one seed in a group (e.g. ``progress`` toggled) are one sample."""
    seen: set[str] = set()
    out = []
    for r in sorted(runs, key=lambda r: r.info.start_time or 0, reverse=True):
        if run_seed(r) not in seen:
            seen.add(run_seed(r))
            out.append(r)
    return out


def _na_reason(members: Sequence, key: str) -> str:
    reasons = [r.data.tags.get(f"na.{key}"[:250]) for r in members]
    found = list(dict.fromkeys(x for x in reasons if x))
    return found[0] if found else "not logged by these runs"


def compare(
    runs: Sequence, group_keys: Sequence[str], metrics: Sequence[str] | None = None, keys: StoredKeys | None = None
) -> list[Row]:
    """The comparison table: a Row per (group, metric), groups and metrics in a stable order.

    ``keys``: the runs' ``metric_keys.json`` entries (:class:`~owl_eval.runner.key_index.StoredKeys`, read by
    :mod:`owl_eval.runner.compare`), which give each metric its direction and headline place; None: no run has
    one (every metric undirected)."""
    keys = keys or StoredKeys.fixed(None)
    runs = dedupe(runs)
    names = comparable_metrics(runs, metrics, keys)
    groups: dict[tuple, list] = {}
    for r in runs:
        groups.setdefault(tuple((k, run_value(r, k)) for k in group_keys), []).append(r)
    rows = []
    for group in sorted(groups):
        members = one_per_seed(groups[group])
        for name in names:
            values = [r.data.metrics.get(name, math.nan) for r in members]
            stats = summarize(values)
            reason = _na_reason(members, name) if stats[0] == 0 else ""
            entry = _entry(members, name, keys) or _entry(runs, name, keys)
            direction = entry.direction if entry is not None else "none"
            rank = entry.headline_rank if entry is not None else None
            rows.append(Row(group, name, direction, *stats, runs=len(members), na_reason=reason, headline=rank))
    return rows
