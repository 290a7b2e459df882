"""Every text a person reads of a comparison: the tables (Markdown, CSV), the verdicts (CSV, JSON, LaTeX, lines),
the one-line summary of each pair, the parent run's description and the block printed at the end of a sweep.

Rounding happens here and only here: a mean to the digits its 95 % interval supports (:func:`owl_eval.stats.
plus_minus`, :func:`owl_eval.stats.round_to_ci`; one seed: 3 significant digits). CSV and JSON keep full precision
(``repr``), as do the parent run's metrics (:mod:`owl_eval.comparison.outputs`). An agent is named by its label and
a metric by its display name with its direction everywhere (:class:`owl_eval.comparison.table.Row`).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from owl_eval.comparison.grouping import setting_label
from owl_eval.comparison.table import Row
from owl_eval.comparison.verdict import VerdictRow
from owl_eval.stats import plus_minus, round_to_ci, significant

ARROWS = {"maximize": "↑", "minimize": "↓", "none": ""}
TEST_NAME = "two-sided paired sign-flip permutation test, Holm-adjusted over every test of a setting"
VERDICT_LINES = 8  # verdict lines printed at the end of a sweep; the rest are in verdict.csv
TOP_GROUPS = 5  # groups shown at the end of a sweep


# -- numbers -----------------------------------------------------------------------------------------------
def p_text(p: float) -> str:
    """A p-value for reading: 2 decimals from 0.1, 2 significant digits below (0.012, 0.0039), ``<0.001`` below
    that, ``n/a`` for NaN."""
    if math.isnan(p):
        return "n/a"
    if p < 0.001:
        return "<0.001"
    return f"{p:.2f}" if p >= 0.1 else f"{p:.2g}"


def difference_text(row: VerdictRow) -> str:
    """``+0.12 [0.08, 0.16]``, rounded to the digits the interval supports; ``n/a`` without a paired seed."""
    if not row.n_seeds:
        return "n/a"
    text = str(round_to_ci(row.difference, row.ci_low, row.ci_high, sign=True))
    return text + (" (no interval)" if row.n_seeds == 1 else "")


def mean_text(r: Row) -> str:
    """``0.87 ± 0.02`` (the half-width of the 95 % Student-t interval); one seed: 3 significant digits."""
    return significant(r.mean) if r.n < 2 or not math.isfinite(r.half_width) else plus_minus(r.mean, r.half_width)


def _settings(rows: Iterable) -> list[tuple]:
    return list(dict.fromkeys(r.setting for r in rows))


def _setting_keys(rows: Sequence[Row]) -> list[str]:
    return list(dict.fromkeys(k for r in rows for k, _ in r.setting))


# -- the comparison table ----------------------------------------------------------------------------------
def best_means(found: Sequence[Row]) -> set[float]:
    """The best mean among the groups measured on 2 or more seeds, by the metric's direction; none when there is no
    direction, fewer than two such groups, or every one has the same mean. A one-seed group is never best."""
    means = [r.mean for r in found if r.n >= 2 and math.isfinite(r.mean)]
    direction = found[0].direction if found else "none"
    if direction == "none" or len(means) < 2 or min(means) == max(means):
        return set()
    return {max(means) if direction == "maximize" else min(means)}


def best_rows(found: Sequence[Row]) -> set[int]:
    """Indices (into ``found``) of the best group of each setting (:func:`best_means`): the best agent is chosen
    among the groups that differ only in the agent."""
    by_setting: dict[tuple, list[int]] = {}
    for i, r in enumerate(found):
        by_setting.setdefault(r.setting, []).append(i)
    best = set()
    for members in by_setting.values():
        top = best_means([found[i] for i in members])
        best |= {i for i in members if found[i].n >= 2 and found[i].mean in top}
    return best


def _cell(r: Row, footnote: int | None) -> str:
    if r.n == 0:
        return f"N/A [{footnote}]"
    text = mean_text(r)
    return text + (f" (n={r.n})" if r.n == r.runs or not r.runs else f" (n={r.n} of {r.runs})")


LEGEND = (
    "Mean over seeds ± half-width of the 95 % Student-t confidence interval of the mean; n = seeds with a value. "
    "Bold: the best mean by the metric's direction (↑ higher, ↓ lower is better) among the agents of one setting "
    "measured on 2 or more seeds (a one-seed group is never best). N/A: not a measurement (reasons below). Each mean is "
    "rounded to the digits its interval supports; one seed: 3 significant digits. comparison.csv has full precision."
)


@dataclass(frozen=True)
class MeansTable:
    """One setting's table of means as every format shows it: ``lines`` of (metric with its arrow, cells), a cell
    being (text, whether it is the best)."""

    setting: str
    agents: list[str]
    lines: list[tuple[str, list[tuple[str, bool]]]]


@dataclass(frozen=True)
class MeansTables:
    tables: list[MeansTable]
    reasons: dict[str, int]  # N/A reason -> its footnote number
    nowhere: dict[str, list[str]]  # N/A reason -> the metrics N/A in every group for it (not in the tables)


def means_tables(rows: Sequence[Row]) -> MeansTables:
    """Metrics down, agents across, one table per setting; ``mean ± CI half-width (n)``, the best mean marked; a
    metric N/A in every group is listed apart by its reason, an N/A cell points to its reason."""
    keys = _setting_keys(rows)
    settings = _settings(rows)
    tables: list[MeansTable] = []
    reasons: dict[str, int] = {}
    nowhere: dict[str, list[str]] = {}
    for setting in settings:
        mine = [r for r in rows if r.setting == setting]
        agents = list(dict.fromkeys(r.agent for r in mine))
        cell = {(r.metric, r.agent): r for r in mine}
        lines = []
        for metric in dict.fromkeys(r.metric for r in mine):
            found = [cell[(metric, a)] for a in agents if (metric, a) in cell]
            if all(r.n == 0 for r in found):
                names = nowhere.setdefault(found[0].na_reason, [])
                names += [found[0].name] if found[0].name not in names else []
                continue
            best = {id(found[i]) for i in best_rows(found)}
            cells = []
            for a in agents:
                r = cell.get((metric, a))
                if r is None:
                    cells.append(("not run", False))
                    continue
                note = reasons.setdefault(r.na_reason, len(reasons) + 1) if r.n == 0 else None
                cells.append((_cell(r, note), id(r) in best))
            lines.append((f"{found[0].name} {ARROWS[found[0].direction]}".strip(), cells))
        label = setting_label(setting, keys) if (len(settings) > 1 or setting) else ""
        tables.append(MeansTable(label or ("all runs" if len(settings) > 1 else ""), agents, lines))
    return MeansTables(tables, reasons, nowhere)


def to_markdown(rows: Sequence[Row], *, title: str = "Headline metrics") -> str:
    """:func:`means_tables` as Markdown, the best mean in bold."""
    found = means_tables(rows)
    lines = [f"## {title}", "", LEGEND, ""]
    for table in found.tables:
        if table.setting:
            lines += [f"### {table.setting}", ""]
        lines += ["| metric | " + " | ".join(table.agents) + " |", "|---|" + "---:|" * len(table.agents)]
        for name, cells in table.lines:
            lines.append(f"| {name} | " + " | ".join(f"**{c}**" if best else c for c, best in cells) + " |")
        lines.append("")
    if found.reasons:
        lines += [*(f"[{i}] {reason}" for reason, i in found.reasons.items()), ""]
    if found.nowhere:
        lines += [
            "N/A in every group (not compared):",
            *(f"- {', '.join(names)}: {reason}" for reason, names in found.nowhere.items()),
        ]
    return "\n".join(lines).rstrip("\n") + "\n"


STATS = ("mean", "std", "ci95_low", "ci95_high")


def to_csv(rows: Sequence[Row]) -> str:
    """Every row at full precision (``repr``; NaN empty): the agent's label, the setting's keys (when the runs
    differ in any), the metric's key, display name, role and direction, the statistics, and ``na_reason`` when
    some group has no value (n = 0). Headline rows first."""
    keys = _setting_keys(rows)
    with_reason = any(r.na_reason for r in rows)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(
        ["agent", *keys, "metric", "name", "role", "direction", "n", *STATS, "runs"] + ["na_reason"] * with_reason
    )
    for r in sorted(rows, key=lambda r: r.role != "headline"):
        setting = dict(r.setting)
        stats = ["" if math.isnan(getattr(r, s)) else repr(getattr(r, s)) for s in STATS]
        w.writerow(
            [r.agent, *(setting.get(k, "") for k in keys), r.metric, r.name, r.role, r.direction, r.n, *stats, r.runs]
            + [r.na_reason] * with_reason
        )
    return buf.getvalue()


# -- verdicts --------------------------------------------------------------------------------------------
def verdict_line(row: VerdictRow) -> str:
    """``knn_novelty vs my_rf, Top-1 accuracy (higher is better): +0.05 [0.03, 0.07], better: knn_novelty,
    P(knn_novelty better) 0.94, p (Holm) 0.008, 10 seeds``; the setting leads when there is one."""
    setting = f"{row.setting}: " if row.setting else ""
    who = row.better or row.agent
    p_imp = "n/a" if math.isnan(row.p_improvement) else f"{row.p_better:.2f}"
    seeds = f"{row.n_seeds} seed" + ("" if row.n_seeds == 1 else "s")
    return (
        f"{setting}{row.agent} vs {row.other}, {row.name_with_direction}: {difference_text(row)}, {row.verdict}, "
        f"P({who} better) {p_imp}, p (Holm) {p_text(row.p_holm)}, {seeds}"
    )


def pair_lines(vrows: Sequence[VerdictRow]) -> list[str]:
    """One line per (setting, pair): ``knn_novelty vs my_rf: knn_novelty better on 4, my_rf better on 1, no
    significant difference on 2 of 7 headline metrics (10 seeds, two-sided, Holm)``; or, when the seeds cannot show
    a difference at all, says so."""
    pairs: dict[tuple, list[VerdictRow]] = {}
    for v in vrows:
        pairs.setdefault((v.setting, v.agent, v.other), []).append(v)
    out = []
    for (setting, agent, other), mine in pairs.items():
        lead = f"{setting}: " if setting else ""
        judged = [v for v in mine if v.n_seeds >= 2]
        seeds = sorted({v.n_seeds for v in judged})
        seeds_text = (f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}-{seeds[-1]}") + " seeds" if seeds else ""
        if not judged:
            out.append(f"{lead}{agent} vs {other}: no verdict (fewer than 2 seeds in common)")
            continue
        if not any(v.reachable for v in judged):
            worst = min(min(1.0, v.tests * v.smallest_p) for v in judged)
            out.append(
                f"{lead}{agent} vs {other}: no verdict possible: {seeds_text} cannot reach p < {judged[0].alpha:g} "
                f"over {judged[0].tests} tests (smallest possible p (Holm) {p_text(worst)}); run more seeds"
            )
            continue
        a = sum(v.better == agent for v in judged)
        b = sum(v.better == other for v in judged)
        out.append(
            f"{lead}{agent} vs {other}: {agent} better on {a}, {other} better on {b}, no significant difference on "
            f"{len(judged) - a - b} of {len(judged)} headline metrics ({seeds_text}, two-sided, Holm, "
            f"alpha {judged[0].alpha:g})"
        )
    return out


VERDICT_COLUMNS = [
    "setting",
    "metric",
    "name",
    "higher_is_better",
    "agent",
    "other",
    "better",
    "difference",
    "ci_low",
    "ci_high",
    "p_improvement",
    "p_value",
    "p_holm",
    "tests",
    "smallest_p",
    "n_seeds",
    "agent_mean",
    "other_mean",
    "confidence",
    "alpha",
]


def _record(row: VerdictRow) -> dict:
    """The row as a flat record of :data:`VERDICT_COLUMNS`, plus ``group`` (``{key: value}``) for JSON."""
    out = {c: getattr(row, c) for c in VERDICT_COLUMNS}
    group = row.group
    if isinstance(group, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in group):
        out["group"] = {str(k): str(v) for k, v in group}
    else:
        out["group"] = row.setting
    return out


def verdict_csv(rows: Sequence[VerdictRow]) -> str:
    """The verdict rows as CSV at full precision (NaN empty); no ``setting`` column when there is one setting."""
    columns = [c for c in VERDICT_COLUMNS if c != "setting" or any(r.setting for r in rows)]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        rec = _record(row)
        writer.writerow({k: "" if isinstance(v, float) and math.isnan(v) else v for k, v in rec.items()})
    return buffer.getvalue()


def verdict_json(rows: Sequence[VerdictRow]) -> str:
    """The verdict rows as a JSON list of records (the setting also as an object ``group``; NaN as null)."""
    records = [
        {k: None if isinstance(v, float) and math.isnan(v) else v for k, v in _record(row).items()} for row in rows
    ]
    return json.dumps(records, indent=2, allow_nan=False)


_LATEX_SPECIALS = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
    "<": r"\textless{}",
    ">": r"\textgreater{}",
}


def latex_escape(text: str) -> str:
    """Text safe in a LaTeX table cell: ``knn_novelty`` -> ``knn\\_novelty``, ``50%`` -> ``50\\%``."""
    return "".join(_LATEX_SPECIALS.get(c, c) for c in str(text))


def _latex_number(text: str) -> str:
    """A minus sign in math mode (a ``-`` in text mode is a hyphen)."""
    return text.replace("-", "$-$")


def verdict_latex(rows: Sequence[VerdictRow], *, label: str = "tab:verdict") -> str:
    """A complete ``table`` float (booktabs rules, a caption naming the directions, seeds, test and correction, and
    ``\\label{label}``): setting (when any), metric with its direction arrow, the pair, the difference [CI], the
    better agent in bold (``--`` when none), P(improvement) of the better one, Holm's p, seeds. Every name is
    LaTeX-escaped. Needs ``\\usepackage{booktabs}`` (said in a comment at the top)."""
    rows = list(rows)
    with_setting = any(r.setting for r in rows)
    levels = {r.confidence for r in rows} or {0.95}
    level = f"{100 * levels.pop():g}\\%" if len(levels) == 1 else ""
    alphas = {r.alpha for r in rows} or {0.05}
    alpha = f"{alphas.pop():g}" if len(alphas) == 1 else "alpha"
    header = ["Setting"] if with_setting else []
    header += [
        "Metric",
        "Agent",
        "vs",
        f"Difference [{level} CI]",
        "Better",
        "P(better)",
        r"$p_\mathrm{Holm}$",
        "Seeds",
    ]
    align = ("l" if with_setting else "") + "lll" + "rlrrr"
    body = [rf"\begin{{tabular}}{{{align}}}", r"\toprule", " & ".join(header) + r" \\", r"\midrule"]
    previous: str | None = None
    for r in rows:
        if with_setting and previous is not None and r.setting != previous:
            body.append(r"\midrule")
        previous = r.setting
        arrow = r"$\uparrow$" if r.higher_is_better else r"$\downarrow$"
        p_imp = "--" if math.isnan(r.p_improvement) else f"{r.p_better:.2f}"
        better = rf"\textbf{{{latex_escape(r.better)}}}" if r.better else "--"
        cells = [latex_escape(r.setting)] if with_setting else []
        cells += [f"{latex_escape(r.name)} {arrow}", latex_escape(r.agent), latex_escape(r.other)]
        cells += [
            _latex_number(difference_text(r)),
            better,
            p_imp,
            p_text(r.p_holm).replace("<", "$<$"),
            str(r.n_seeds),
        ]
        body.append(" & ".join(cells) + r" \\")
    body += [r"\bottomrule", r"\end{tabular}"]
    seeds = sorted({r.n_seeds for r in rows})
    seeds_text = (str(seeds[0]) if len(seeds) == 1 else f"{seeds[0]}--{seeds[-1]}") if seeds else "0"
    caption = (
        f"Paired comparison of agents over {seeds_text} seeds. Difference = agent $-$ other in the metric's units "
        rf"with its {level} percentile-bootstrap interval; $\uparrow$: higher is better, $\downarrow$: lower is "
        f"better. Better: the agent with the better mean where the two-sided paired sign-flip permutation test, "
        f"Holm-adjusted over every test of a setting, gives $p < {alpha}$. P(better): probability of improvement of "
        "that agent (of the left one where none is better)."
    )
    return (
        "\n".join(
            [
                r"% owl-eval verdict table; needs \usepackage{booktabs} in the preamble",
                r"\begin{table}[ht]",
                r"\centering",
                r"\small",
                rf"\caption{{{caption}}}",
                rf"\label{{{label}}}",
                *body,
                r"\end{table}",
            ]
        )
        + "\n"
    )


def better_text(v: VerdictRow) -> str:
    """The verdict in a table cell: the better agent, ``none``, ``none (too few seeds)`` or ``no verdict (n < 2)``."""
    if v.n_seeds < 2:
        return "no verdict (n < 2)"
    return v.better or ("none" if v.reachable else "none (too few seeds)")


def verdict_text_table(vrows: Sequence[VerdictRow]) -> str:
    """The verdicts as aligned plain text (a fixed-width block renders the same in every Markdown viewer)."""
    with_setting = any(v.setting for v in vrows)
    head = (["setting"] if with_setting else []) + ["metric", "pair", "difference [95% CI]", "better", "p (Holm)", "n"]
    table = [head]
    for v in vrows:
        cells = [v.setting] if with_setting else []
        cells += [
            f"{v.name} {ARROWS['maximize' if v.higher_is_better else 'minimize']}",
            f"{v.agent} vs {v.other}",
            difference_text(v),
            better_text(v),
            p_text(v.p_holm),
            str(v.n_seeds),
        ]
        table.append(cells)
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in table) + "\n"


def description(rows: Sequence[Row], vrows: Sequence[VerdictRow], *, view: str = "") -> str:
    """The sweep parent run's description (the run page of the MLflow UI shows its first lines collapsed): one line
    per pair first, then the verdict table as a fixed-width block, then where the rest is (``view``: the UI path of
    the runs table with the headline columns)."""
    lines = ["**Verdict:** " + line for line in pair_lines(vrows)] if vrows else []
    if not vrows:
        agents = list(dict.fromkeys(r.agent for r in rows))
        lines.append(f"**Comparison** of {len(agents)} agent(s): {', '.join(agents)} (no verdict: fewer than 2 agents)")
    lines = ["  \n".join(lines), ""]
    if vrows:
        lines += ["Difference = left - right agent, 95 % paired bootstrap interval; " + TEST_NAME + ".", ""]
        lines += ["```", verdict_text_table(vrows).rstrip("\n"), "```", ""]
    lines.append(
        "Open `comparison/report.html` in the artifacts for the tables and figures; `comparison/verdict.tex` for a paper."
    )
    if view:
        lines.append(f"[The sweep's runs with their headline metrics as columns]({view}).")
    return "\n".join(lines) + "\n"


def unfinished_note(unfinished: Sequence[str]) -> str:
    """The jobs a sweep's comparison could not count yet (still running in another launch), as a paragraph after
    its table; "" when it counted every job."""
    if not unfinished:
        return ""
    items = "".join(f"- {line}\n" for line in unfinished)
    return (
        f"\nNot counted: {len(unfinished)} job(s) of this sweep were still running in another launch "
        f"(`owl-eval-compare --sweep <this sweep's run id>` counts them once they finish):\n\n{items}"
    )


def console_block(
    rows: Sequence[Row],
    vrows: Sequence[VerdictRow],
    folder_text: str,
    run_id: str,
    open_line: str,
    *,
    reused_line: str = "",
    unfinished: Sequence[str] = (),
) -> str:
    """What a sweep prints at its end: where the files are, the best groups by the first headline metric, a line per
    pair, the verdict rows (the first :data:`VERDICT_LINES`), the runs reused from earlier launches
    (``reused_line``), the jobs not counted because they were still running elsewhere (``unfinished``), the parent
    run and how to open it."""
    lines = [f"comparison: {folder_text} (report.html, comparison.md, verdict.tex)"]
    found = [r for r in rows if r.role == "headline" and r.direction != "none" and r.n > 0 and math.isfinite(r.mean)]
    if found:
        metric = min(found, key=lambda r: (r.headline or 0, r.metric)).metric
        found = [r for r in found if r.metric == metric]
        ranked = sorted((r for r in found if r.n >= 2), key=lambda r: -r.mean if r.direction == "maximize" else r.mean)
        single = [r for r in found if r.n < 2]  # one seed: shown, never ranked
        keys = _setting_keys(rows)
        name = {id(r): r.agent + (f" ({setting_label(r.setting, keys)})" if r.setting else "") for r in found}
        lines.append(f"groups by {found[0].name_with_direction}, mean ± 95% CI over seeds:")
        width = max(len(name[id(r)]) for r in [*ranked[:TOP_GROUPS], *single])
        for r in ranked[:TOP_GROUPS]:
            lines.append(f"  {name[id(r)]:<{width}}  {mean_text(r)}  (n={r.n})")
        if len(ranked) > TOP_GROUPS:
            lines.append(f"  ... {len(ranked) - TOP_GROUPS} more groups in the table")
        for r in single:
            lines.append(f"  {name[id(r)]:<{width}}  {mean_text(r)}  (n={r.n}: not ranked)")
    if vrows:
        lines.append(f"verdicts ({TEST_NAME}; difference = agent - other, 95% bootstrap CI):")
        lines += [f"  {line}" for line in pair_lines(vrows)]
        lines += [f"  {verdict_line(v)}" for v in vrows[:VERDICT_LINES]]
        if len(vrows) > VERDICT_LINES:
            lines.append(f"  ... {len(vrows) - VERDICT_LINES} more in verdict.csv")
    if reused_line:
        lines.append(reused_line)
    if unfinished:
        lines.append(
            f"not counted, still running in another launch (owl-eval-compare --sweep {run_id} counts them later):"
        )
        lines += [f"  {line}" for line in unfinished]
    lines.append(f"sweep run: {run_id}")
    lines.append(open_line)
    return "\n".join(lines)
