"""The verdicts drawn: paired differences with their intervals (rliable's "interval estimates" read as
differences) and the performance profile of each agent (rliable's score distributions).

Rows come from :func:`owl_eval.verdict.verdict_table`; the profile from :func:`owl_eval.stats.
performance_profile`. Drawing only: every number is computed before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

MAX_PANELS = 12


def differences_figure(vrows: Sequence[Any]):
    """One panel per metric: each (setting, agent vs other) difference as a point with its bootstrap interval
    and a line at 0; the panel title says which side is better."""
    import matplotlib.pyplot as plt

    metrics = list(dict.fromkeys(v.metric for v in vrows))[:MAX_PANELS]
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
        better = "higher" if mine[0].higher_is_better else "lower"
        ax.set_title(f"{metric} ({better} is better)", fontsize=9)
        ax.set_xlabel("difference, agent - other (95 % CI)", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(metrics) :]:
        ax.set_visible(False)
    fig.tight_layout()
    return fig


def profile_figure(metric: str, higher_is_better: bool, profiles: Mapping[str, Any]):
    """Each agent's performance profile on ``metric``: the fraction of its runs scoring above tau (below, when
    lower is better), with the bootstrap band when computed."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for agent, profile in profiles.items():
        (line,) = ax.step(profile.taus, profile.fraction, where="post", label=agent)
        if profile.low is not None and profile.high is not None:
            ax.fill_between(profile.taus, profile.low, profile.high, step="post", alpha=0.2, color=line.get_color())
    ax.set_xlabel(f"{metric} threshold tau")
    ax.set_ylabel(f"fraction of runs with {metric} {'>' if higher_is_better else '<'} tau")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"performance profile: {metric}", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
