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
def _declared(protocol: str, key: str):
    """The declaration behind an MLflow metric key (exact: ``fpr_at_95tpr`` stays ``fpr_at_95tpr``)."""
    from owl_eval.evaluation.registry import spec_for_key
    from owl_eval.protocols import known

    return spec_for_key(protocol, key) if known(protocol) else None


def metric_direction(protocol: str, key: str) -> str:
    spec = _declared(protocol, key)
    return spec.direction if spec is not None else "none"


def _is_series(protocol: str, key: str) -> bool:
    from owl_eval.evaluation.registry import is_series_key
    from owl_eval.protocols import known

    return known(protocol) and is_series_key(protocol, key)


def comparable_metrics(runs: Sequence, wanted: Sequence[str] | None = None) -> list[str]:
    """Scalar metrics to compare: those listed, else every declared metric the runs logged or marked N/A.

    Per-step series (``top1_batch``) are left out: a run's latest value of a series is not a summary.
    """
    logged: dict[str, None] = {}
    for r in runs:
        logged.update(dict.fromkeys(r.data.metrics))
        logged.update(dict.fromkeys(k[3:] for k in r.data.tags if k.startswith("na.")))
    protocols = {r.data.tags.get("protocol", "") for r in runs} - {""}
    if wanted:
        keys = [_logged_as(w, logged, protocols) for w in wanted]
        missing = [w for w, k in zip(wanted, keys) if k not in logged]
        if missing:
            raise ConfigError(f"--metrics: {missing} not logged by these runs; logged: {sorted(logged)}")
        return keys
    keep = [k for k in logged if any(_declared(p, k) is not None and not _is_series(p, k) for p in protocols)]
    return sorted(
        keep,
        key=lambda k: (
            k.startswith("time/"),
            k.startswith(("baseline/", "baseline.")),
            k.startswith("detail/"),
            "_at_" in k,
            k,
        ),
    )


def _logged_as(name: str, logged: Mapping, protocols: Iterable[str]) -> str:
    """The key a metric name is logged under in these runs: as given (``detail/top1_pre``), or the key the
    runner gives the reported name (``top1_pre`` -> ``detail/top1_pre``, ``baseline.top1`` -> ``baseline/top1``)."""
    from owl_eval.evaluation.registry import logged_key
    from owl_eval.protocols import all_protocols

    key = metric_key(name)
    if key in logged:
        return key
    for protocol in sorted(set(protocols) & set(all_protocols())):
        if logged_key(protocol, name) in logged:
            return logged_key(protocol, name)
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


def compare(runs: Sequence, group_keys: Sequence[str], metrics: Sequence[str] | None = None) -> list[Row]:
    """The comparison table: a Row per (group, metric), groups and metrics in a stable order."""
    runs = dedupe(runs)
    names = comparable_metrics(runs, metrics)
    groups: dict[tuple, list] = {}
    for r in runs:
        groups.setdefault(tuple((k, run_value(r, k)) for k in group_keys), []).append(r)
    rows = []
    for group in sorted(groups):
        members = one_per_seed(groups[group])
        protocol = members[0].data.tags.get("protocol", "")
        for name in names:
            values = [r.data.metrics.get(name, math.nan) for r in members]
            stats = summarize(values)
            reason = _na_reason(members, name) if stats[0] == 0 else ""
            rows.append(Row(group, name, metric_direction(protocol, name), *stats, runs=len(members), na_reason=reason))
    return rows
