"""The verdict table: per setting, metric and pair of agents, the paired difference over the seeds both agents
ran, its bootstrap interval, the probability of improvement and a Holm-adjusted p-value, as rows, one-line
verdicts, CSV, JSON and a LaTeX (booktabs) table. Pure: values in, rows out (no MLflow; the comparison
command and a sweep's parent run find the values).

Input: ``values[(group, metric, agent)] = {seed: value}`` and ``directions[metric]`` (True / ``"maximize"``
when higher is better, False / ``"minimize"`` when lower is). A group is a setting other than the agent and
the seed: a tuple of ``(key, value)`` pairs as in :class:`owl_eval.runner.comparison.Row` without the agent
(``(("domain", "digits"),)``), a string, or ``()`` when there is one setting.

Per row (:class:`VerdictRow`), over the seeds both agents have a finite value for (NaN = missing; a seed one
agent lacks is left out, so ``n_seeds`` counts the pairs):

- ``difference``: mean over those seeds of agent - other, in the metric's units (a lower-is-better metric
  keeps its sign: -0.05 on an error rate is an improvement), with ``ci_low``/``ci_high`` from the paired
  bootstrap (:func:`owl_eval.stats.paired_difference`);
- ``p_improvement``: the probability of improvement of agent over other (:func:`owl_eval.stats.
  probability_of_improvement`, runs = seeds, one task: the chance a seed's run of agent beats a seed's run
  of other, ties 1/2), in the metric's better direction;
- ``p_value``: the one-sided paired sign-flip test of "no improvement"; ``p_holm``: it Holm-adjusted over
  the metrics of one comparison (one group, one pair of agents).

With fewer than two paired seeds the interval, ``p_improvement`` and the p-values are NaN (and the row is
still listed, so a missing comparison shows). Each row's bootstrap draws from its own generator, seeded by
``seed`` and the row's names, so adding an agent or a metric leaves the other rows unchanged.
"""

from __future__ import annotations

import csv
import io
import json
import math
import zlib
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace

import numpy as np

from owl_eval.errors import MetricInputError
from owl_eval.stats import holm, paired_difference, probability_of_improvement, round_to_ci

Group = Hashable  # tuple of (key, value) pairs, a string, or ()
Key = tuple[Group, str, str]  # (group, metric, agent)


@dataclass(frozen=True)
class VerdictRow:
    """One comparison of ``agent`` against ``other`` on one metric in one setting (see the module docstring)."""

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

    @property
    def setting(self) -> str:
        return setting_label(self.group)

    @property
    def improvement(self) -> float:
        """The difference signed so that > 0 is better (the negated difference when lower is better)."""
        return self.difference if self.higher_is_better else -self.difference


def setting_label(group: Group) -> str:
    """``(("domain", "digits"), ("condition", "given"))`` -> ``domain=digits, condition=given``; ``()`` -> ``""``."""
    if isinstance(group, str):
        return group
    if isinstance(group, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in group):
        return ", ".join(f"{k}={v}" for k, v in group)
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
    name = repr((setting_label(group), metric, agent, other)).encode()
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
) -> VerdictRow:
    seeds = sorted(set(a) & set(b))
    n = len(seeds)
    nan = math.nan
    if n == 0:
        return VerdictRow(group, metric, agent, other, better, nan, nan, nan, nan, nan, nan, 0, nan, nan, confidence)
    x = np.array([a[s] for s in seeds])
    y = np.array([b[s] for s in seeds])
    rng = _row_rng(seed, group, metric, agent, other)
    paired = paired_difference(x, y, higher_is_better=better, reps=reps, confidence=confidence, rng=rng)
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
        nan,  # p_holm: set once the comparison's metrics are all in
        n,
        float(x.mean()),
        float(y.mean()),
        confidence,
    )


def verdict_table(
    values: Mapping,
    directions: Mapping[str, bool | str],
    *,
    baseline: str | None = None,
    reps: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> list[VerdictRow]:
    """Rows of the verdict table, groups, metrics and agents in the order they first appear in ``values``.

    ``baseline``: compare every other agent against it (rows ``agent vs baseline``); None: every pair of
    agents once, the agent that appears first on the left. Holm runs over the metrics of each (group, pair).
    """
    if not isinstance(values, Mapping):
        raise MetricInputError(
            f"values: expected a mapping (group, metric, agent) -> {{seed: value}}, got {type(values).__name__}"
        )
    if isinstance(seed, bool) or not isinstance(seed, int | np.integer) or seed < 0:
        raise MetricInputError(f"seed: expected a whole number >= 0 (the bootstrap's seed), got {seed!r}")
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
        for agent, other in pairs:
            if agent not in present and other not in present:
                continue  # neither agent ran this setting
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
                )
                for m in metrics
                if (group, m, agent) in table or (group, m, other) in table
            ]
            adjusted = holm([r.p_value for r in family])
            rows += [_with_holm(r, float(p)) for r, p in zip(family, adjusted)]
    return rows


def _with_holm(row: VerdictRow, p_holm: float) -> VerdictRow:
    return replace(row, p_holm=p_holm)


# -- text ------------------------------------------------------------------------------------------------
def p_text(p: float) -> str:
    """A p-value for reading: 2 decimals from 0.01, 3 below, ``<0.001`` below that, ``n/a`` for NaN."""
    if math.isnan(p):
        return "n/a"
    if p < 0.001:
        return "<0.001"
    return f"{p:.3f}" if p < 0.01 else f"{p:.2f}"


def difference_text(row: VerdictRow) -> str:
    """``+0.12 [0.08, 0.16]``, rounded to the digits the interval supports (:func:`owl_eval.stats.round_to_ci`)."""
    return str(round_to_ci(row.difference, row.ci_low, row.ci_high, sign=True))


def verdict_line(row: VerdictRow) -> str:
    """``knn_novelty vs closed_world, m21: +0.12 [0.08, 0.16], P(improvement) 0.94, p (Holm) 0.008, 10 seeds``.

    The setting leads when there is one (``domain=digits: ...``); a lower-is-better metric says so."""
    setting = f"{row.setting}: " if row.setting else ""
    metric = row.metric if row.higher_is_better else f"{row.metric} (lower is better)"
    diff = difference_text(row) if row.n_seeds else "n/a"
    if row.n_seeds == 1:
        diff += " (no interval)"
    p_imp = "n/a" if math.isnan(row.p_improvement) else f"{row.p_improvement:.2f}"
    seeds = f"{row.n_seeds} seed" + ("" if row.n_seeds == 1 else "s")
    return (
        f"{setting}{row.agent} vs {row.other}, {metric}: {diff}, P(improvement) {p_imp}, "
        f"p (Holm) {p_text(row.p_holm)}, {seeds}"
    )


# -- files -----------------------------------------------------------------------------------------------
COLUMNS = [
    "setting",
    "metric",
    "higher_is_better",
    "agent",
    "other",
    "difference",
    "ci_low",
    "ci_high",
    "p_improvement",
    "p_value",
    "p_holm",
    "n_seeds",
    "agent_mean",
    "other_mean",
    "confidence",
]


def _record(row: VerdictRow) -> dict:
    """The row as a flat record: setting (label), group (``{key: value}`` when pairs, else the label), fields."""
    fields = asdict(row)
    group = fields.pop("group")
    pairs = isinstance(group, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in group)
    out = {
        "setting": setting_label(group),
        "group": {str(k): str(v) for k, v in group} if pairs else setting_label(group),
    }
    return out | fields


def to_csv(rows: Iterable[VerdictRow]) -> str:
    """The rows as CSV text (:data:`COLUMNS`; the group as its ``key=value, ...`` label; NaN as empty)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        rec = _record(row)
        writer.writerow({k: "" if isinstance(v, float) and math.isnan(v) else v for k, v in rec.items()})
    return buffer.getvalue()


def to_json(rows: Iterable[VerdictRow]) -> str:
    """The rows as a JSON list of records (the group as an object ``{key: value}``; NaN as null)."""
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
}


def latex_escape(text: str) -> str:
    """Text safe in a LaTeX table cell: ``knn_novelty`` -> ``knn\\_novelty``, ``50%`` -> ``50\\%``."""
    return "".join(_LATEX_SPECIALS.get(c, c) for c in str(text))


def _latex_number(text: str) -> str:
    """A minus sign in math mode (a ``-`` in text mode is a hyphen)."""
    return text.replace("-", "$-$")


def _best(rows: Sequence[VerdictRow]) -> set[int]:
    """Indexes of the rows with the largest improvement in their (setting, metric), when it holds 2 or more."""
    blocks: dict[tuple[str, str], list[int]] = {}
    for i, r in enumerate(rows):
        if not math.isnan(r.difference):
            blocks.setdefault((r.setting, r.metric), []).append(i)
    best: set[int] = set()
    for members in blocks.values():
        if len(members) < 2:
            continue
        top = max(rows[i].improvement for i in members)
        best |= {i for i in members if rows[i].improvement == top}
    return best


def to_latex(rows: Sequence[VerdictRow], *, caption: str | None = None, label: str | None = None) -> str:
    """A booktabs ``tabular`` (in a ``table`` when a caption or label is given): setting (when any), metric
    (with an arrow for its better direction), agent, other, difference [CI] rounded with
    :func:`owl_eval.stats.round_to_ci`, P(improvement), Holm p, seeds. In each (setting, metric) with two or
    more comparisons the largest improvement is bold. Names are LaTeX-escaped; needs ``\\usepackage{booktabs}``.
    """
    rows = list(rows)
    with_setting = any(r.setting for r in rows)
    levels = {r.confidence for r in rows}
    level = f"{100 * levels.pop():g}\\% CI" if len(levels) == 1 else "CI"
    header = ["Setting"] if with_setting else []
    header += ["Metric", "Agent", "vs", f"Difference [{level}]", "P(improvement)", r"$p_\mathrm{Holm}$", "Seeds"]
    align = ("l" if with_setting else "") + "lll" + "rrrr"
    best = _best(rows)
    lines = [rf"\begin{{tabular}}{{{align}}}", r"\toprule", " & ".join(header) + r" \\", r"\midrule"]
    previous: str | None = None
    for i, r in enumerate(rows):
        if with_setting and previous is not None and r.setting != previous:
            lines.append(r"\midrule")
        previous = r.setting
        arrow = r"$\uparrow$" if r.higher_is_better else r"$\downarrow$"
        diff = _latex_number(difference_text(r)) if r.n_seeds else "n/a"
        if i in best:
            diff = rf"\textbf{{{diff}}}"
        p_imp = "n/a" if math.isnan(r.p_improvement) else f"{r.p_improvement:.2f}"
        p_holm = p_text(r.p_holm).replace("<", "$<$")
        cells = [latex_escape(r.setting)] if with_setting else []
        cells += [f"{latex_escape(r.metric)} {arrow}", latex_escape(r.agent), latex_escape(r.other)]
        cells += [diff, p_imp, p_holm, str(r.n_seeds)]
        lines.append(" & ".join(cells) + r" \\")
    lines += [r"\bottomrule", r"\end{tabular}"]
    body = "\n".join(lines)
    if caption is None and label is None:
        return body + "\n"
    parts = [r"\begin{table}", r"\centering"]
    if caption is not None:
        parts.append(rf"\caption{{{latex_escape(caption)}}}")
    if label is not None:
        parts.append(rf"\label{{{label}}}")
    return "\n".join([*parts, body, r"\end{table}"]) + "\n"


__all__ = [
    "COLUMNS",
    "VerdictRow",
    "difference_text",
    "latex_escape",
    "p_text",
    "setting_label",
    "to_csv",
    "to_json",
    "to_latex",
    "verdict_line",
    "verdict_table",
]
