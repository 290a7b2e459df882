"""Verdicts between the agents of a comparison: which agent is better, by how much, how sure.

From the runs a comparison grouped (:mod:`owl_eval.runner.comparison`), per setting (a group without its agent)
and headline metric with a better direction, each agent's value per seed goes to :func:`owl_eval.verdict.
verdict_table`: the paired difference over the seeds both agents ran with its bootstrap interval, the
probability of improvement and Holm's p over the metrics of one pair (:mod:`owl_eval.stats`, after rliable).
Agents are ordered best first by the first such metric that two of them measured, so a line reads "the better
one vs the other".

A sweep's parent run gets them as ``verdict/verdict.csv``, ``verdict/verdict.json`` (an MLflow table),
``verdict/verdict.tex`` (booktabs), the figures ``verdict/differences.png`` and ``verdict/profile.png`` (with
``figures``), the table as the run's description (the run page of the MLflow UI shows it), and the headline
means under keys a person reads, ``<agent>/<metric>`` (``<agent>/<setting>/<metric>`` when the sweep varies
more than the agent), rounded to the digits their interval supports. ``owl-eval-compare`` prints the lines.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from owl_eval.runner.comparison import Row, dedupe, one_per_seed, run_seed, run_value
from owl_eval.verdict import VerdictRow, verdict_line, verdict_table

FOLDER = "verdict"
DESCRIPTION_TAG = "mlflow.note.content"  # the run's description on its page in the MLflow UI
REPS = 2000
SEED = 0  # the bootstrap's seed: the same runs give the same verdicts


def agent_name(agent: str) -> str:
    """``ond/knn_novelty`` -> ``knn_novelty``: how the agent is named in verdicts and parent-run keys."""
    return agent.rstrip("/").rsplit("/", 1)[-1]


def setting_of(row: Row) -> tuple[tuple[str, str], ...]:
    return tuple(item for item in row.group if item[0] != "agent")


def _headline_ranks(rows: Sequence[Row]) -> dict[str, int]:
    """Metric -> its place in its protocol's headline, as the runs' ``metric_keys.json`` says (``Row.headline``)."""
    ranks: dict[str, int] = {}
    for r in rows:
        if r.headline is not None:
            ranks[r.metric] = min(ranks.get(r.metric, r.headline), r.headline)
    return ranks


def headline_metrics(rows: Sequence[Row]) -> list[str]:
    """The headline metrics some group measured, in the protocol's headline order."""
    ranks = _headline_ranks(rows)
    measured = {r.metric for r in rows if r.n > 0 and r.metric in ranks}
    return sorted(measured, key=lambda m: (ranks[m], m))


def verdict_metrics(rows: Sequence[Row]) -> list[str]:
    """The headline metrics with a better direction that two or more agents measured (in some setting), in the
    protocol's headline order (its descriptor's ``headline``: what users of the field look at first)."""
    measured: dict[str, set[str]] = {}
    for r in rows:
        if r.n > 0 and r.direction != "none":
            measured.setdefault(r.metric, set()).add(dict(r.group)["agent"])
    ranks = _headline_ranks(rows)
    return sorted((m for m in measured if len(measured[m]) >= 2 and m in ranks), key=lambda m: (ranks[m], m))


def seed_values(runs: Sequence, keys: Sequence[str], metrics: Sequence[str]) -> dict:
    """``(setting, metric, agent) -> {seed: value}`` over the runs the comparison averaged (one per config and
    seed, as :func:`owl_eval.runner.comparison.compare`); NaN where a seed has no value."""
    groups: dict[tuple, list] = {}
    for r in dedupe(runs):
        groups.setdefault(tuple((k, run_value(r, k)) for k in keys), []).append(r)
    out: dict = {}
    for group, members in groups.items():
        setting = tuple(item for item in group if item[0] != "agent")
        agent = agent_name(dict(group)["agent"])
        for metric in metrics:
            out[(setting, metric, agent)] = {
                run_seed(r): float(r.data.metrics.get(metric, math.nan)) for r in one_per_seed(members)
            }
    return out


def agent_order(rows: Sequence[Row], metrics: Sequence[str]) -> list[str]:
    """Every agent of the rows, best first by its mean (over settings) on the first of ``metrics`` that two or more
    agents measured; agents without a value on it after, by name."""
    agents = sorted({agent_name(dict(r.group)["agent"]) for r in rows})
    for metric in metrics:
        means: dict[str, list[float]] = {}
        for r in rows:
            if r.metric == metric and r.n > 0 and math.isfinite(r.mean):
                means.setdefault(agent_name(dict(r.group)["agent"]), []).append(r.mean)
        if len(means) >= 2:
            sign = -1.0 if next(r.direction for r in rows if r.metric == metric) == "maximize" else 1.0
            ranked = sorted(means, key=lambda a: (sign * sum(means[a]) / len(means[a]), a))
            return ranked + [a for a in agents if a not in means]
    return agents


def verdicts(
    runs: Sequence, keys: Sequence[str], rows: Sequence[Row], *, reps: int = REPS
) -> tuple[list[VerdictRow], dict]:
    """The verdict rows of a comparison (see the module docstring; [] with fewer than two agents) and the
    per-seed values they were computed from (:func:`seed_values`)."""
    metrics = verdict_metrics(rows)
    if not metrics:
        return [], {}
    order = agent_order(rows, metrics)
    if len(order) < 2:
        return [], {}
    values = seed_values(runs, keys, metrics)
    rank = {a: i for i, a in enumerate(order)}
    ordered = dict(sorted(values.items(), key=lambda kv: rank.get(kv[0][2], len(rank))))
    directions = {r.metric: r.direction for r in rows if r.metric in metrics}
    return verdict_table(ordered, directions, reps=reps, seed=SEED), ordered


def _setting_part(setting: tuple[tuple[str, str], ...]) -> str:
    return "__".join(f"{k.rsplit('.', 1)[-1]}-{v}" for k, v in setting)


def headline_keys(rows: Sequence[Row], metrics: Sequence[str]) -> dict[str, float]:
    """Parent-run metrics a person reads: ``<agent>[/<setting>]/<metric>``, the mean over seeds rounded to the
    digits its interval supports (one seed: 3 significant digits), and ``<agent>[/<setting>]/n_seeds``.
    The full-precision statistics are in ``comparison/comparison.csv``."""
    from owl_eval.metrics.validation import MetricInputError
    from owl_eval.runner.tracking import metric_key
    from owl_eval.stats import round_to_ci

    out: dict[str, float] = {}
    for r in rows:
        setting = _setting_part(setting_of(r))
        prefix = metric_key(agent_name(dict(r.group)["agent"]) + (f"/{setting}" if setting else ""))
        out[f"{prefix}/n_seeds"[:250]] = max(out.get(f"{prefix}/n_seeds"[:250], 0), r.n)
        if r.metric not in metrics or r.n == 0 or not math.isfinite(r.mean):
            continue
        try:
            text = round_to_ci(r.mean, r.ci95_low, r.ci95_high).value
        except MetricInputError:  # a degenerate interval: the mean as it is
            text = repr(r.mean)
        out[f"{prefix}/{r.metric}"[:250]] = float(text)
    return out


def markdown(vrows: Sequence[VerdictRow]) -> str:
    """The verdicts as a Markdown table (the parent run's description) and their lines."""
    from owl_eval.verdict import difference_text, p_text

    lines = [
        "### Verdicts: agent vs other, paired over seeds",
        "",
        "| setting | metric | agent | other | difference [95 % CI] | P(improvement) | p (Holm) | seeds |",
        "|---|---|---|---|---|---:|---:|---:|",
    ]
    for v in vrows:
        better = "↑" if v.higher_is_better else "↓"
        diff = difference_text(v) if v.n_seeds else "n/a"
        p_imp = "n/a" if math.isnan(v.p_improvement) else f"{v.p_improvement:.2f}"
        lines.append(
            f"| {v.setting or '-'} | {v.metric} {better} | {v.agent} | {v.other} | {diff} | {p_imp} | "
            f"{p_text(v.p_holm)} | {v.n_seeds} |"
        )
    lines += [
        "",
        "Difference = agent - other in the metric's units (↓: lower is better, so a negative difference is an "
        "improvement); the interval is a paired bootstrap over seeds; P(improvement) as rliable (Agarwal et al. "
        "2021); p (Holm): one-sided paired sign-flip test, Holm-adjusted over the metrics of one pair. Files: "
        "verdict/verdict.csv, verdict.json, verdict.tex.",
    ]
    return "\n".join(lines) + "\n"


def lines(vrows: Sequence[VerdictRow]) -> list[str]:
    return [verdict_line(v) for v in vrows]


def profiles(values: dict, metric: str, higher_is_better: bool) -> dict:
    """Each agent's performance profile on ``metric`` (:func:`owl_eval.stats.performance_profile`): its values
    over every seed and setting, at 50 thresholds from the lowest to the highest value of any agent, with a
    seeded bootstrap band."""
    import numpy as np

    from owl_eval.stats import performance_profile

    scores: dict[str, list[float]] = {}
    for (_, m, agent), by_seed in values.items():
        if m == metric:
            scores.setdefault(agent, []).extend(v for v in by_seed.values() if math.isfinite(v))
    pooled = [v for vs in scores.values() for v in vs]
    if not pooled:
        return {}
    taus = np.linspace(min(pooled), max(pooled), 50)
    rng = np.random.default_rng(SEED)
    return {
        agent: performance_profile(
            np.asarray(vs), taus, higher_is_better=higher_is_better, band=len(vs) > 1, rng=rng, reps=REPS
        )
        for agent, vs in scores.items()
        if vs
    }


def log_to_parent(
    tracked_run, vrows: Sequence[VerdictRow], *, values: dict | None = None, figures: bool = True
) -> None:
    """The verdict files, figures and description on a sweep's parent run (see the module docstring)."""
    from owl_eval.verdict import COLUMNS, to_csv, to_latex

    if not vrows:
        return
    records = [
        {c: (v.setting if c == "setting" else getattr(v, c)) for c in COLUMNS}  # the CSV's columns, in order
        for v in vrows
    ]
    tracked_run.log_text(to_csv(vrows), f"{FOLDER}/verdict.csv")
    tracked_run.log_tables({f"{FOLDER}/verdict.json": {c: [r[c] for r in records] for c in COLUMNS}})
    tracked_run.log_text(to_latex(list(vrows)), f"{FOLDER}/verdict.tex")
    tracked_run.set_tags({DESCRIPTION_TAG: markdown(vrows)})
    if figures:
        from owl_eval.plots.verdict import differences_figure, profile_figure

        drawn = {"differences": differences_figure(vrows)}
        first = vrows[0]
        found = profiles(values or {}, first.metric, first.higher_is_better)
        if found:
            drawn["profile"] = profile_figure(first.metric, first.higher_is_better, found)
        tracked_run.log_figures(drawn, folder=FOLDER)
