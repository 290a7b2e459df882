"""How a comparison of runs is shown: the Markdown and CSV tables and the figure (one panel per metric).

Rows come from :func:`owl_eval.runner.compare.compare`. Tables round each mean to the digits its interval supports
(:func:`owl_eval.stats.plus_minus`; one seed: 3 significant digits; the CSV keeps full precision); ``±`` is the half-width of the 95 % Student-t interval; an N/A cell (no value in any seed) shows
its reason and is never "best"; nothing is best when every measured group has the same mean.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from owl_eval.stats import plus_minus

# a comparison row (owl_eval.runner.compare.Row): plots read its fields and import nothing from the runner
Row = Any

MAX_PANELS = 24
ARROWS = {"maximize": "higher is better ↑", "minimize": "lower is better ↓", "none": ""}
STATS = ("mean", "std", "ci95_low", "ci95_high")


# -- tables ------------------------------------------------------------------------------------------------
def significant(value: float, digits: int = 3) -> str:
    """``value`` rounded to ``digits`` significant digits, without an exponent between 1e-4 and 1e6."""
    if not math.isfinite(value):
        return str(value)
    rounded = float(f"{value:.{digits}g}")
    if rounded == 0:
        return "0"
    if 1e-4 <= abs(rounded) < 1e6:
        text = f"{rounded:.{max(0, digits - 1 - math.floor(math.log10(abs(rounded))))}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    return f"{rounded:.{digits - 1}e}"


def to_csv(rows: Sequence[Row]) -> str:
    """Full precision (``repr``); ``na_reason`` says why a group has no value (n = 0)."""
    import csv
    import io

    keys = [k for k, _ in rows[0].group] if rows else ["agent"]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([*keys, "metric", "direction", "n", *STATS, "runs", "na_reason"])
    for r in rows:
        w.writerow(
            [
                *(v for _, v in r.group),
                r.metric,
                r.direction,
                r.n,
                *(repr(getattr(r, s)) for s in STATS),
                r.runs,
                r.na_reason,
            ]
        )
    return buf.getvalue()


def best_means(found: Sequence[Row]) -> set[float]:
    """The best mean among measured groups by the metric's direction; none when there is no direction, fewer
    than two measured groups, or every measured group has the same mean (nothing is better)."""
    means = [r.mean for r in found if r.n > 0 and math.isfinite(r.mean)]
    direction = found[0].direction if found else "none"
    if direction == "none" or len(means) < 2 or min(means) == max(means):
        return set()
    return {max(means) if direction == "maximize" else min(means)}


def setting(r: Row) -> tuple:
    """What a group holds besides its agent (domain, condition, ...): only groups of one setting compete."""
    return tuple(item for item in r.group if item[0] != "agent")


def best_rows(found: Sequence[Row]) -> set[int]:
    """Indices (into ``found``) of the best group of each setting: a digits run is never "better" than an
    activity run; the best agent is chosen among the groups that differ only in the agent."""
    by_setting: dict[tuple, list[int]] = {}
    for i, r in enumerate(found):
        by_setting.setdefault(setting(r), []).append(i)
    best = set()
    for members in by_setting.values():
        top = best_means([found[i] for i in members])
        best |= {i for i in members if found[i].n > 0 and found[i].mean in top}
    return best


def _cell(r: Row, best: bool, footnote: int | None) -> str:
    if r.n == 0:
        return f"N/A [{footnote}]"
    text = significant(r.mean) if r.n < 2 else plus_minus(r.mean, r.half_width)
    text += f" (n={r.n})" if r.n == r.runs or not r.runs else f" (n={r.n} of {r.runs})"
    return f"**{text}**" if best else text


LEGEND = (
    "Mean over seeds ± half-width of the 95 % Student-t confidence interval of the mean; n = seeds with a "
    "value. **Bold**: best mean by the metric's declared direction (↑ higher, ↓ lower is better) among the groups "
    "that differ only in the agent (same domain, condition, ...). N/A: not a "
    "measurement (reasons below), never best. Each mean is rounded to the digits its interval supports (the half-width "
    "to 1 significant digit, 2 when it starts with 1); one seed: 3 significant digits. comparison.csv has full precision."
)


def to_markdown(rows: Sequence[Row]) -> str:
    """Metrics down, groups across; ``mean ± CI half-width (n)``; the best mean in bold where a direction exists."""
    labels = list(dict.fromkeys(r.label for r in rows))
    metrics = list(dict.fromkeys(r.metric for r in rows))
    cell = {(r.metric, r.label): r for r in rows}
    arrows = {"maximize": "↑", "minimize": "↓", "none": ""}
    reasons: dict[str, int] = {}
    lines = [LEGEND, "", "| metric | better | " + " | ".join(labels) + " |", "|---|:-:|" + "---:|" * len(labels)]
    nowhere: dict[str, list[str]] = {}  # metrics N/A in every group: listed below the table, by reason
    for m in metrics:
        found = [cell[(m, g)] for g in labels if (m, g) in cell]
        if all(r.n == 0 for r in found):
            nowhere.setdefault(found[0].na_reason, []).append(m)
            continue
        best = {id(found[i]) for i in best_rows(found)}
        cells = []
        for g in labels:
            r = cell.get((m, g))
            if r is None:
                cells.append("")
                continue
            note = reasons.setdefault(r.na_reason, len(reasons) + 1) if r.n == 0 else None
            cells.append(_cell(r, id(r) in best, note))
        lines.append(f"| {m} | {arrows[found[0].direction]} | " + " | ".join(cells) + " |")
    if reasons:
        lines += ["", *(f"[{i}] {reason}" for reason, i in reasons.items())]
    if nowhere:
        lines += [
            "",
            "N/A in every group (not compared):",
            *(f"- {', '.join(names)}: {reason}" for reason, names in nowhere.items()),
        ]
    return "\n".join(lines) + "\n"


# -- figure ------------------------------------------------------------------------------------------------
def headline_metrics(rows, limit: int = MAX_PANELS) -> list[str]:
    """Metrics worth a panel: measured in at least one group and with a better direction, the protocol's headline
    metrics first in its headline order (``Row.headline``, from the runs' ``metric_keys.json``)."""
    measured = list(dict.fromkeys(r.metric for r in rows if r.n > 0))
    directed = {r.metric for r in rows if r.direction != "none"}
    rank = {r.metric: r.headline for r in rows if r.headline is not None}
    plain = sorted((m for m in measured if m in directed and m in rank), key=lambda m: rank[m])
    rest = [m for m in measured if m in directed and m not in plain]
    return (plain + rest)[:limit] or measured[:limit]


def comparison_figure(rows, metrics: list[str] | None = None):
    """Bars = mean over seeds, whiskers = 95 % Student-t interval; the best agent of each setting outlined;
    a group without a value (N/A) is marked "N/A" and never outlined."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = metrics or headline_metrics(rows)
    labels = list(dict.fromkeys(r.label for r in rows))
    cell = {(r.metric, r.label): r for r in rows}
    cols = min(4, max(1, len(metrics)))
    nrows = max(1, math.ceil(len(metrics) / cols))
    fig, axes = plt.subplots(nrows, cols, figsize=(3.2 * cols, 0.6 + 2.4 * nrows), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, metric in zip(axes.flat, metrics):
        found = [cell.get((metric, g)) for g in labels]
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
        present = [i for i, r in enumerate(found) if r is not None]
        best = {present[j] for j in best_rows([found[i] for i in present])}
        for i, bar in enumerate(bars):
            if i in best:
                bar.set_edgecolor("black")
                bar.set_linewidth(2)
            elif (r := found[i]) is not None and r.n == 0:
                ax.text(i, 0, "N/A", ha="center", va="bottom", fontsize=7, color="tab:gray")
        ax.set_title(f"{metric}\n{ARROWS[direction]}", fontsize=8)
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, rotation=30, ha="right", fontsize=7)
        ax.tick_params(axis="y", labelsize=7)
    for ax in list(axes.flat)[len(metrics) :]:
        ax.axis("off")
    fig.suptitle(
        "Mean over seeds, whiskers = 95 % Student-t confidence interval; best outlined, N/A never best", fontsize=10
    )
    fig.tight_layout()
    return fig
