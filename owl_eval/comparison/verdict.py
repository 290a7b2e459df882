"""The verdict table: per setting, metric and pair of agents, which agent is better, by how much and how sure.

Input: ``values[(group, metric, agent)] = {seed: value}`` and ``directions[metric]`` (True / ``"maximize"``
when higher is better, False / ``"minimize"`` when lower is). A group is a setting other than the agent and
the seed: a tuple of ``(key, value)`` pairs (``(("domain", "digits"),)``), a string, or ``()`` when there is
one setting. :func:`verdicts` makes that input from a comparison's runs.

Per row (:class:`VerdictRow`), over the seeds both agents have a finite value for (NaN = missing; a seed one
agent lacks is left out, so ``n_seeds`` counts the pairs):

- ``difference``: mean over those seeds of agent - other, in the metric's units (a lower-is-better metric
  keeps its sign: -0.05 on an error rate is an improvement), with ``ci_low``/``ci_high`` from the paired
  percentile bootstrap (:func:`owl_eval.stats.paired_difference`);
- ``p_value``: the two-sided paired sign-flip test of "no difference" (exact up to 16 seeds); ``p_holm``: it
  Holm-adjusted over every test of one setting (all pairs, all metrics). Swapping the agents flips the sign of
  the difference and its interval and keeps every p;
- ``better``: the agent whose mean is better in the metric's direction when ``p_holm < alpha``, else ``""``;
  ``p_improvement``: the probability of improvement of agent over other (rliable: the chance a seed's run of
  agent beats a seed's run of other, ties 1/2); :attr:`VerdictRow.p_better` states it for the better one;
- ``smallest_p``: the smallest two-sided p these seeds allow (2/2**n); with ``tests`` tests in the family no
  Holm-adjusted p can fall below ``tests * smallest_p``, so :attr:`VerdictRow.reachable` says whether the seeds
  could show a difference at all (3 seeds: never; 5 seeds: never; 10 seeds and 14 tests: yes).

With fewer than two paired seeds there is no interval, p or verdict (the row is still listed, so a missing
comparison shows). Each row's bootstrap draws from its own generator, seeded by ``seed``, the setting, the
metric and the pair (in either order), so adding an agent or a metric leaves the other rows' intervals unchanged.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from owl_eval.comparison.grouping import dedupe, one_per_seed, run_seed, run_value, setting_label, split_group
from owl_eval.comparison.table import DIRECTION_WORDS, Row
from owl_eval.errors import MetricInputError
from owl_eval.stats import holm, paired_difference, probability_of_improvement, smallest_p_value

Group = Hashable  # tuple of (key, value) pairs, a string, or ()
Key = tuple[Group, str, str]  # (group, metric, agent)
ALPHA = 0.05
REPS = 2000
SEED = 0  # the bootstrap's seed: the same runs give the same verdicts


@dataclass(frozen=True)
class VerdictRow:
    """One comparison of ``agent`` and ``other`` on one metric in one setting (see the module docstring)."""

    group: Group
    metric: str
    agent: str
    other: str
    higher_is_better: bool
    difference: float
    ci_low: float
    ci_high: float
    p_improvement: float
    p_value: float
    p_holm: float
    n_seeds: int
    agent_mean: float  # over the paired seeds
    other_mean: float
    confidence: float = 0.95
    alpha: float = ALPHA
    smallest_p: float = 1.0  # the smallest two-sided p n_seeds allow
    tests: int = 0  # the Holm family's size: the tests of this setting with a p-value
    title: str = ""  # the metric's display name ("" : its key)

    @property
    def setting(self) -> str:
        return group_text(self.group)

    @property
    def name(self) -> str:
        return self.title or self.metric

    @property
    def name_with_direction(self) -> str:
        return f"{self.name} ({DIRECTION_WORDS['maximize' if self.higher_is_better else 'minimize']})"

    @property
    def improvement(self) -> float:
        """The difference signed so that > 0 means agent is better (the negated difference when lower is better)."""
        return self.difference if self.higher_is_better else -self.difference

    @property
    def reachable(self) -> bool:
        """Whether these seeds could show a difference at ``alpha`` at all: the smallest Holm-adjusted p any
        outcome allows, ``tests * smallest_p``, is below it."""
        return self.n_seeds >= 2 and min(1.0, max(self.tests, 1) * self.smallest_p) < self.alpha

    @property
    def better(self) -> str:
        """The better agent at ``alpha`` (Holm), or ``""``: none shown."""
        if not (self.n_seeds >= 2 and math.isfinite(self.p_holm) and self.p_holm < self.alpha):
            return ""
        if self.improvement > 0:
            return self.agent
        return self.other if self.improvement < 0 else ""

    @property
    def worse(self) -> str:
        return {self.agent: self.other, self.other: self.agent}.get(self.better, "")

    @property
    def p_better(self) -> float:
        """P(improvement) of the better agent over the other (of agent over other when none is better)."""
        return 1.0 - self.p_improvement if self.better == self.other else self.p_improvement

    @property
    def verdict(self) -> str:
        """``better: knn_novelty`` / ``none at alpha 0.05`` / why there can be none."""
        if self.n_seeds < 2:
            return f"no verdict: {self.n_seeds} paired seed{'' if self.n_seeds == 1 else 's'}"
        if self.better:
            return f"better: {self.better}"
        if not self.reachable:
            return f"none possible: {self.n_seeds} seeds cannot reach p < {self.alpha:g} over {self.tests} tests"
        return f"none at alpha {self.alpha:g}"


def group_text(group: Group) -> str:
    """``(("domain", "digits"), ("protocol.condition", "given"))`` -> ``domain=digits, condition=given``; ``()`` ->
    ``""``; a string as it is."""
    if isinstance(group, str):
        return group
    if isinstance(group, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in group):
        return setting_label(group)
    return str(group)


def _higher_is_better(metric: str, direction) -> bool:
    if isinstance(direction, bool | np.bool_):
        return bool(direction)
    if direction in ("maximize", "minimize"):
        return direction == "maximize"
    raise MetricInputError(
        f"directions[{metric!r}]: expected True/'maximize' (higher is better) or False/'minimize', got {direction!r}"
    )


def _check_key(key) -> Key:
    if not (isinstance(key, tuple) and len(key) == 3 and isinstance(key[1], str) and isinstance(key[2], str)):
        raise MetricInputError(
            f"values: expected keys (group, metric, agent) with metric and agent strings, got {key!r}"
        )
    return key


def _seed_values(key: Key, mapping) -> dict[str, float]:
    """seed -> finite value (NaN and None are missing); seeds compared as text (seed 3 and "3" are one)."""
    if not isinstance(mapping, Mapping):
        raise MetricInputError(f"values[{key!r}]: expected a mapping seed -> value, got {type(mapping).__name__}")
    out: dict[str, float] = {}
    for seed, value in mapping.items():
        if value is None:
            continue
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise MetricInputError(f"values[{key!r}][{seed!r}]: expected a number, got {value!r}") from None
        if math.isinf(number):
            raise MetricInputError(f"values[{key!r}][{seed!r}]: expected a finite value or NaN (missing), got {number}")
        if not math.isnan(number):
            out[str(seed)] = number
    return out


def _row_rng(seed: int, group: Group, metric: str, agent: str, other: str) -> np.random.Generator:
    """The row's own generator: the pair in either order draws the same resamples (its interval then mirrors)."""
    name = repr((group_text(group), metric, *sorted((agent, other)))).encode()
    return np.random.default_rng([seed, zlib.crc32(name)])


def _compare(
    group: Group,
    metric: str,
    agent: str,
    other: str,
    a: Mapping[str, float],
    b: Mapping[str, float],
    better: bool,
    *,
    reps: int,
    confidence: float,
    seed: int,
    alpha: float,
    title: str,
) -> VerdictRow:
    seeds = sorted(set(a) & set(b))
    n = len(seeds)
    nan = math.nan
    common: dict[str, Any] = dict(confidence=confidence, alpha=alpha, smallest_p=smallest_p_value(n), title=title)
    if n == 0:
        return VerdictRow(group, metric, agent, other, better, nan, nan, nan, nan, nan, nan, 0, nan, nan, **common)
    x = np.array([a[s] for s in seeds])
    y = np.array([b[s] for s in seeds])
    paired = paired_difference(
        x, y, higher_is_better=better, reps=reps, confidence=confidence, rng=_row_rng(seed, group, metric, agent, other)
    )
    p_improvement = probability_of_improvement(x, y, higher_is_better=better) if n >= 2 else nan
    return VerdictRow(
        group,
        metric,
        agent,
        other,
        better,
        paired.difference,
        paired.low,
        paired.high,
        p_improvement,
        paired.p_value,
        nan,  # p_holm: set once every test of the setting is in
        n,
        float(x.mean()),
        float(y.mean()),
        **common,
    )


def verdict_table(
    values: Mapping,
    directions: Mapping[str, bool | str],
    *,
    baseline: str | None = None,
    reps: int = REPS,
    confidence: float = 0.95,
    alpha: float = ALPHA,
    seed: int = SEED,
    titles: Mapping[str, str] | None = None,
) -> list[VerdictRow]:
    """Rows of the verdict table, groups, metrics and agents in the order they first appear in ``values``.

    ``baseline``: compare every other agent with it (rows ``agent vs baseline``); None: every pair of agents
    once, the agent that appears first on the left (the order changes no number but the sign of the difference).
    Holm runs over every test of one group: all its pairs and metrics. ``titles``: metric -> display name."""
    if not isinstance(values, Mapping):
        raise MetricInputError(
            f"values: expected a mapping (group, metric, agent) -> {{seed: value}}, got {type(values).__name__}"
        )
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise MetricInputError(f"seed: expected a whole number >= 0 (the bootstrap's seed), got {seed!r}")
    if isinstance(alpha, bool) or not isinstance(alpha, float | int) or not 0 < alpha < 1:
        raise MetricInputError(f"alpha: expected a level strictly between 0 and 1, got {alpha!r}")
    keys = [_check_key(k) for k in values]
    metrics = list(dict.fromkeys(k[1] for k in keys))
    missing = [m for m in metrics if m not in directions]
    if missing:
        raise MetricInputError(f"directions: no direction for metric(s) {missing}; given for {sorted(directions)}")
    better = {m: _higher_is_better(m, directions[m]) for m in metrics}
    agents = list(dict.fromkeys(k[2] for k in keys))
    if baseline is not None and baseline not in agents:
        raise MetricInputError(f"baseline: {baseline!r} is not among the agents {agents}")
    if baseline is not None:
        pairs = [(agent, baseline) for agent in agents if agent != baseline]
    else:
        pairs = [(agents[i], agents[j]) for i in range(len(agents)) for j in range(i + 1, len(agents))]
    table = {k: _seed_values(k, values[k]) for k in keys}
    rows: list[VerdictRow] = []
    for group in dict.fromkeys(k[0] for k in keys):
        present = {k[2] for k in keys if k[0] == group}
        family = [
            _compare(
                group,
                m,
                agent,
                other,
                table.get((group, m, agent), {}),
                table.get((group, m, other), {}),
                better[m],
                reps=reps,
                confidence=confidence,
                seed=seed,
                alpha=float(alpha),
                title=(titles or {}).get(m, ""),
            )
            for agent, other in pairs
            if agent in present or other in present  # neither agent ran this setting: no row
            for m in metrics
            if (group, m, agent) in table or (group, m, other) in table
        ]
        adjusted = holm([r.p_value for r in family])
        tests = int(np.isfinite(adjusted).sum())
        rows += [replace(r, p_holm=float(p), tests=tests) for r, p in zip(family, adjusted)]
    return rows


# -- from a comparison's runs ------------------------------------------------------------------------------
def verdict_metrics(rows: Sequence[Row]) -> list[str]:
    """The headline metrics with a better direction that two or more agents measured (in some setting), in the
    protocol's headline order (its descriptor's ``headline``: what users of the field look at first)."""
    measured: dict[str, set[str]] = {}
    for r in rows:
        if r.role == "headline" and r.n > 0 and r.direction != "none":
            measured.setdefault(r.metric, set()).add(r.agent)
    rank = {r.metric: r.headline or 0 for r in rows}
    return sorted((m for m in measured if len(measured[m]) >= 2), key=lambda m: (rank[m], m))


def seed_values(runs: Sequence, keys: Sequence[str], rows: Sequence[Row], metrics: Sequence[str]) -> dict:
    """``(setting, metric, agent label) -> {seed: value}`` over the runs the comparison averaged (one per config and
    seed, as :func:`owl_eval.comparison.table.compare`), agents in the rows' order; NaN where a seed has no value."""
    labels = {r.identity: r.agent for r in rows}
    order = {label: i for i, label in enumerate(dict.fromkeys(r.agent for r in rows))}
    groups: dict[tuple, list] = {}
    for r in dedupe(runs):
        groups.setdefault(tuple((k, run_value(r, k)) for k in keys), []).append(r)
    out: dict = {}
    for group in sorted(groups, key=lambda g: (order.get(labels.get(split_group(g)[0], ""), len(order)), g)):
        identity, setting = split_group(group)
        if identity not in labels:
            continue
        for metric in metrics:
            out[(setting, metric, labels[identity])] = {
                run_seed(r): float(r.data.metrics.get(metric, math.nan)) for r in one_per_seed(groups[group])
            }
    return out


def verdicts(runs: Sequence, keys: Sequence[str], rows: Sequence[Row], *, reps: int = REPS) -> tuple[list, dict]:
    """The verdict rows of a comparison (every pair of agents, in every setting, on :func:`verdict_metrics`; []
    with fewer than two agents) and the per-seed values they were computed from (:func:`seed_values`)."""
    metrics = verdict_metrics(rows)
    if not metrics:
        return [], {}
    values = seed_values(runs, keys, rows, metrics)
    if len({agent for _, _, agent in values}) < 2:
        return [], {}
    directions = {r.metric: r.direction for r in rows if r.metric in metrics}
    titles = {r.metric: r.title for r in rows if r.metric in metrics and r.title}
    return verdict_table(values, directions, reps=reps, seed=SEED, titles=titles), values
