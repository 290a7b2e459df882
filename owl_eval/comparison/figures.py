"""Every figure of a comparison: the means with their intervals (one panel per headline metric), the paired
differences with their intervals (rliable's "interval estimates" read as differences) and the performance profile
of each agent (rliable's score distributions). Drawing only: every number is computed before
(:mod:`owl_eval.comparison.table`, :mod:`owl_eval.comparison.verdict`, :func:`owl_eval.stats.performance_profile`).
Agents are named by their labels and metrics by their display names, as in every table.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from owl_eval.comparison.grouping import setting_label
from owl_eval.comparison.table import Row
from owl_eval.comparison.text import best_rows
from owl_eval.comparison.verdict import REPS, SEED

MAX_PANELS = 24
MAX_VERDICT_PANELS = 12
ARROWS = {"maximize": "higher is better ↑", "minimize": "lower is better ↓", "none": ""}


def png(fig) -> bytes:
    """The figure as PNG bytes (closed afterwards): the same picture goes to the files, the run and the report."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    try:
        fig.savefig(buffer, format="png", dpi=110)
    finally:
        plt.close(fig)
    return buffer.getvalue()


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def panel_metrics(rows: Sequence[Row], limit: int = MAX_PANELS) -> list[str]:
    """Metrics worth a panel: the headline metrics measured in at least one group, in the protocol's headline order
    (rows come in that order); when there is none, the directed metrics, else any measured one."""
    measured = list(dict.fromkeys(r.metric for r in rows if r.n > 0))
    headline = {r.metric for r in rows if r.role == "headline" and r.direction != "none"}
    directed = {r.metric for r in rows if r.direction != "none"}
    return (
        [m for m in measured if m in headline][:limit]
        or [m for m in measured if m in directed][:limit]
        or measured[:limit]
    )


def _group_names(rows: Sequence[Row]) -> dict[tuple, str]:
    keys = list(dict.fromkeys(k for r in rows for k, _ in r.setting))
    return {r.group: r.agent + (f"\n{setting_label(r.setting, keys)}" if r.setting else "") for r in rows}


def comparison_figure(rows: Sequence[Row], metrics: list[str] | None = None):
    """Bars = mean over seeds, whiskers = 95 % Student-t interval; the best agent of each setting (2 or more seeds)
    outlined; a group without a value (N/A) is marked "N/A" and never outlined."""
    plt = _pyplot()
    metrics = metrics or panel_metrics(rows)
    names = _group_names(rows)
    groups = list(dict.fromkeys(r.group for r in rows))
    labels = [names[g] for g in groups]
    cell = {(r.metric, r.group): r for r in rows}
    cols = min(4, max(1, len(metrics)))
    nrows = max(1, math.ceil(len(metrics) / cols))
    fig, axes = plt.subplots(nrows, cols, figsize=(3.2 * cols, 0.6 + 2.4 * nrows), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, metric in zip(axes.flat, metrics):
        found = [cell.get((metric, g)) for g in groups]
        means = [r.mean if r is not None and r.n else math.nan for r in found]
        lo = [r.mean - r.ci95_low if r is not None and r.n > 1 else 0.0 for r in found]
        hi = [r.ci95_high - r.mean if r is not None and r.n > 1 else 0.0 for r in found]
        direction = next((r.direction for r in found if r is not None), "none")
        bars = ax.bar(
            range(len(labels)),
            means,
            yerr=[lo, hi],
            capsize=4,
            color=[colors[i % len(colors)] for i in range(len(labels))],
            alpha=0.8,
        )
        present = [(i, r) for i, r in enumerate(found) if r is not None]
        best = {present[j][0] for j in best_rows([r for _, r in present])}
        for i, bar in enumerate(bars):
            if i in best:
                bar.set_edgecolor("black")
                bar.set_linewidth(2)
            elif (r := found[i]) is not None and r.n == 0:
                ax.text(i, 0, "N/A", ha="center", va="bottom", fontsize=7, color="tab:gray")
        name = next(r.name for r in found if r is not None)
        ax.set_title(f"{name}\n{ARROWS[direction]}", fontsize=8)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=7)
        ax.tick_params(axis="y", labelsize=7)
    for ax in list(axes.flat)[len(metrics) :]:
        ax.axis("off")
    fig.suptitle(
        "Mean over seeds, whiskers = 95 % Student-t confidence interval; best (2+ seeds) outlined", fontsize=10
    )
    fig.tight_layout()
    return fig


def differences_figure(vrows: Sequence[Any]):
    """One panel per metric: each (setting, agent vs other) difference as a point with its bootstrap interval
    and a line at 0; the panel title says which side is better."""
    plt = _pyplot()
    metrics = list(dict.fromkeys(v.metric for v in vrows))[:MAX_VERDICT_PANELS]
    cols = min(3, len(metrics))
    nrows = -(-len(metrics) // cols)
    height = max(2.0, 0.45 * max(sum(1 for v in vrows if v.metric == m) for m in metrics) + 1.2)
    fig, axes = plt.subplots(nrows, cols, figsize=(5.2 * cols, height * nrows), squeeze=False)
    for ax, metric in zip(axes.flat, metrics):
        mine = [v for v in vrows if v.metric == metric]
        y = np.arange(len(mine))[::-1]
        diff = np.array([v.difference for v in mine], dtype=float)
        low = np.array([v.ci_low for v in mine], dtype=float)
        high = np.array([v.ci_high for v in mine], dtype=float)
        has_ci = np.isfinite(low) & np.isfinite(high)
        err = np.vstack([np.where(has_ci, diff - low, 0.0), np.where(has_ci, high - diff, 0.0)])
        ax.errorbar(diff, y, xerr=err, fmt="o", color="tab:blue", ecolor="tab:blue", capsize=3)
        ax.axvline(0.0, color="0.5", lw=0.8, ls="--")
        ax.set_yticks(y, [f"{v.agent} vs {v.other}" + (f"\n{v.setting}" if v.setting else "") for v in mine])
        ax.set_title(mine[0].name_with_direction, fontsize=9)
        ax.set_xlabel("difference, agent - other (95 % CI)", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(metrics) :]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def profile_figure(name: str, higher_is_better: bool, profiles: Mapping[str, Any]):
    """Each agent's performance profile on ``metric``: the fraction of its runs scoring above tau (below, when
    lower is better), with the bootstrap band when computed."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for agent, profile in profiles.items():
        (line,) = ax.step(profile.taus, profile.fraction, where="post", label=agent)
        if profile.low is not None and profile.high is not None:
            ax.fill_between(profile.taus, profile.low, profile.high, step="post", alpha=0.2, color=line.get_color())
    ax.set_xlabel(f"{name}: threshold tau")
    ax.set_ylabel(f"fraction of runs {'>' if higher_is_better else '<'} tau")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"performance profile: {name}", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def profiles(values: dict, metric: str, higher_is_better: bool) -> dict:
    """Each agent's performance profile on ``metric`` (:func:`owl_eval.stats.performance_profile`): its values
    over every seed and setting, at 50 thresholds from the lowest to the highest value of any agent, with a
    seeded bootstrap band."""
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
