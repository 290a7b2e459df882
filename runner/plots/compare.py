"""Comparison figure of a sweep: one panel per metric, one bar per group with its 95 % CI over seeds."""
from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MAX_PANELS = 24
ARROWS = {"maximize": "higher is better ↑", "minimize": "lower is better ↓", "none": ""}


def headline_metrics(rows, limit: int = MAX_PANELS) -> list[str]:
    """Metrics worth a panel: those with a better direction, agent's own (not baseline, not per-threshold) first."""
    metrics = list(dict.fromkeys(r.metric for r in rows))
    directed = {r.metric for r in rows if r.direction != "none"}
    plain = [m for m in metrics if m in directed and not m.startswith("baseline.") and "_at_" not in m]
    rest = [m for m in metrics if m in directed and m not in plain]
    return (plain + rest)[:limit] or metrics[:limit]


def comparison_figure(rows, metrics: list[str] | None = None):
    """Bars = mean over seeds, whiskers = 95 % Student-t interval; the best group (by direction) outlined."""
    metrics = metrics or headline_metrics(rows)
    labels = list(dict.fromkeys(r.label for r in rows))
    cell = {(r.metric, r.label): r for r in rows}
    cols = min(4, max(1, len(metrics)))
    nrows = math.ceil(len(metrics) / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(3.2 * cols, 0.6 + 2.4 * nrows), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, metric in zip(axes.flat, metrics):
        found = [cell.get((metric, g)) for g in labels]
        means = [r.mean if r is not None and r.n else math.nan for r in found]
        lo = [r.mean - r.ci95_low if r is not None and r.n > 1 else 0.0 for r in found]
        hi = [r.ci95_high - r.mean if r is not None and r.n > 1 else 0.0 for r in found]
        direction = next((r.direction for r in found if r is not None), "none")
        bars = ax.bar(range(len(labels)), means, yerr=[lo, hi], capsize=4,
                      color=[colors[i % len(colors)] for i in range(len(labels))], alpha=0.8)
        finite = [m for m in means if math.isfinite(m)]
        if direction != "none" and len(finite) > 1:
            best = (max if direction == "maximize" else min)(finite)
            for bar, m in zip(bars, means):
                if m == best:
                    bar.set_edgecolor("black")
                    bar.set_linewidth(2)
        ax.set_title(f"{metric}\n{ARROWS[direction]}", fontsize=8)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=7)
        ax.tick_params(axis="y", labelsize=7)
    for ax in list(axes.flat)[len(metrics):]:
        ax.axis("off")
    fig.suptitle("Mean over seeds with 95 % confidence interval (Student t); best outlined", fontsize=10)
    fig.tight_layout()
    return fig
