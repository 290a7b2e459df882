"""owl_eval.comparison.verdict: the verdict rows on data small enough to check by hand (worked in the comments),
against scipy's permutation test on data that is not, in both orders of a pair, and their text: one line, a line
per pair, CSV, JSON and the LaTeX float."""

from __future__ import annotations

import csv
import io
import json
import math
import shutil
import subprocess

import numpy as np
import pytest
from scipy.stats import permutation_test

from owl_eval.comparison.text import (
    latex_escape,
    p_text,
    pair_lines,
    verdict_csv,
    verdict_json,
    verdict_latex,
    verdict_line,
)
from owl_eval.comparison.verdict import VerdictRow, verdict_table
from owl_eval.errors import MetricInputError

# Seeds 0-3 are shared; seed 4 only closed_world ran; seed 5 is NaN (missing) for knn.
KNN = {0: 1.0, 1: 2.0, 2: 3.0, 3: 4.0, 5: math.nan}
CW = {0: 0.5, 1: 2.5, 2: 2.0, 3: 3.0, 4: 9.0, 5: 1.0}
VALUES = {
    ((), "m21", "knn_novelty"): KNN,
    ((), "m21", "closed_world"): CW,
    ((), "err", "knn_novelty"): KNN,
    ((), "err", "closed_world"): CW,
}
DIRECTIONS = {"m21": "maximize", "err": False}


def _row(**changes) -> VerdictRow:
    base = dict(
        group=(),
        metric="m21",
        agent="knn_novelty",
        other="closed_world",
        higher_is_better=True,
        difference=0.1234,
        ci_low=0.0812,
        ci_high=0.1609,
        p_improvement=0.94,
        p_value=0.004,
        p_holm=0.008,
        n_seeds=10,
        agent_mean=0.9,
        other_mean=0.78,
        smallest_p=2 / 1024,
        tests=2,
    )
    return VerdictRow(**(base | changes))


def test_rows_by_hand():
    m21, err = verdict_table(VALUES, DIRECTIONS, reps=500)
    # paired seeds 0-3: differences 0.5, -0.5, 1, 1 -> mean 0.5, n 4
    assert (m21.agent, m21.other, m21.metric, m21.n_seeds, m21.difference) == (
        "knn_novelty",
        "closed_world",
        "m21",
        4,
        0.5,
    )
    assert (m21.agent_mean, m21.other_mean) == (2.5, 2.0)  # (1+2+3+4)/4, (0.5+2.5+2+3)/4
    # two-sided: sign patterns of (0.5, 0.5, 1, 1) whose |sum| >= 2: (1+1) with the halves ++, +-, -+ (3) and
    # their mirror images (3): 6 of 16
    assert m21.p_value == err.p_value == 6 / 16
    # pairs knn > cw over 1,2,3,4 vs 0.5,2.5,2,3 (ties 1/2): 1 + 1.5 + 3.5 + 4 = 10 of 16
    assert m21.p_improvement == 10 / 16
    # err, lower is better: the difference keeps its sign (0.5: knn is worse); knn wins where lower: 6 of 16 pairs
    assert (err.difference, err.higher_is_better, err.p_improvement, err.improvement) == (0.5, False, 6 / 16, -0.5)
    # Holm over the setting's two tests: 0.375 x 2 = 0.75, then max(0.75, 0.375 x 1) = 0.75
    assert (m21.p_holm, err.p_holm) == pytest.approx((0.75, 0.75), abs=1e-12)
    assert m21.tests == err.tests == 2 and m21.smallest_p == 2 / 16
    # 4 seeds: the smallest p is 2/16 and Holm over 2 tests makes it 0.25: no outcome could show a difference
    assert not m21.reachable and m21.better == "" and m21.verdict.startswith("none possible: 4 seeds cannot reach")
    for row in (m21, err):  # bootstrap means of the differences lie within their range
        assert -0.5 <= row.ci_low <= 0.5 <= row.ci_high <= 1.0


def _both_ways(seed: int = 7):
    """10 seeds: A clearly better on acc (higher is better), B clearly better on err (lower is better), no
    difference on noise. Returns the rows with A first and with B first."""
    rng = np.random.default_rng(seed)
    a_acc = 0.8 + 0.01 * rng.standard_normal(10)
    b_acc = a_acc - 0.05 - 0.005 * rng.random(10)  # B below A on every seed
    a_err = 0.3 + 0.01 * rng.standard_normal(10)
    b_err = a_err - 0.04 - 0.005 * rng.random(10)  # B below A on every seed: B better
    noise_a, noise_b = rng.standard_normal(10), rng.standard_normal(10)
    by_seed = lambda x: dict(enumerate(x))  # noqa: E731
    series = {"acc": (a_acc, b_acc), "err": (a_err, b_err), "noise": (noise_a, noise_b)}
    directions = {"acc": True, "err": "minimize", "noise": True}
    a_first = {((), m, "A"): by_seed(a) for m, (a, _) in series.items()} | {
        ((), m, "B"): by_seed(b) for m, (_, b) in series.items()
    }
    b_first = {((), m, "B"): by_seed(b) for m, (_, b) in series.items()} | {
        ((), m, "A"): by_seed(a) for m, (a, _) in series.items()
    }
    return verdict_table(a_first, directions, reps=400), verdict_table(b_first, directions, reps=400), series


def test_each_winner_is_named_with_a_small_p_whichever_agent_is_first():
    a_first, b_first, series = _both_ways()
    by = lambda rows: {r.metric: r for r in rows}  # noqa: E731
    ab, ba = by(a_first), by(b_first)
    assert (ab["acc"].agent, ba["acc"].agent) == ("A", "B")
    # 10 seeds all one sign: exact two-sided p 2/2**10; Holm over the 3 tests of the setting: x 3
    for rows in (ab, ba):
        assert rows["acc"].better == "A" and rows["err"].better == "B" and rows["noise"].better == ""
        assert rows["acc"].p_value == rows["err"].p_value == 2 / 1024
        assert rows["acc"].p_holm == pytest.approx(3 * 2 / 1024, abs=1e-12)
        assert rows["acc"].reachable and rows["acc"].verdict == "better: A" and rows["err"].verdict == "better: B"
    for m in series:
        assert ba[m].difference == pytest.approx(-ab[m].difference, abs=1e-12)
        assert (ba[m].p_value, ba[m].p_holm) == (ab[m].p_value, ab[m].p_holm)
        # the pair in either order draws the same resamples: the interval mirrors
        assert (ba[m].ci_low, ba[m].ci_high) == pytest.approx((-ab[m].ci_high, -ab[m].ci_low), abs=1e-12)
        if ab[m].better:  # P(improvement) of the better agent, whichever side it is on
            assert ba[m].p_better == pytest.approx(ab[m].p_better, abs=1e-12)
    # P(improvement) is stated for the better agent: A beats B on acc in every one of the 100 pairs of seeds
    assert ab["acc"].p_better == ba["acc"].p_better == 1.0
    a_acc, b_acc = series["acc"]
    assert ab["acc"].difference == pytest.approx(float(np.mean(a_acc - b_acc)), abs=1e-12)


def test_p_values_match_scipys_permutation_test():
    rng = np.random.default_rng(3)
    for n in (5, 8, 12):
        a, b = rng.normal(size=n), rng.normal(0.6, 1.0, size=n)
        row = verdict_table({((), "m", "a"): dict(enumerate(a)), ((), "m", "b"): dict(enumerate(b))}, {"m": True})[0]
        ref = permutation_test(
            (a - b,), np.mean, permutation_type="samples", alternative="two-sided", n_resamples=np.inf
        ).pvalue
        assert row.p_value == pytest.approx(ref, abs=1e-12)


def test_holm_runs_over_every_test_of_one_setting():
    values = {((), "m", agent): {s: float(s * (i + 1)) for s in range(8)} for i, agent in enumerate("abc")}
    rows = verdict_table(values, {"m": True}, reps=100)
    # 3 pairs x 1 metric in one setting: a family of 3; each pair differs with one sign on seeds 1-7 (seed 0 ties):
    # the pattern sums tie the observed one in the 2 patterns that flip only seed 0's zero, either side: 4 of 256
    assert [r.tests for r in rows] == [3, 3, 3]
    assert [r.p_value for r in rows] == [4 / 256] * 3
    assert [r.p_holm for r in rows] == pytest.approx([3 * 4 / 256] * 3, abs=1e-12)
    other = (("domain", "b"),)
    values[(other, "m", "a")] = values[((), "m", "a")]
    values[(other, "m", "b")] = values[((), "m", "b")]
    lone = [r for r in verdict_table(values, {"m": True}, reps=100) if r.group == other]
    # c did not run there: its rows are listed with 0 seeds (a missing comparison shows) and no p
    assert [(r.agent, r.other, r.n_seeds) for r in lone] == [("a", "b", 8), ("a", "c", 0), ("b", "c", 0)]
    assert lone[0].tests == 1 and lone[0].p_holm == lone[0].p_value == 4 / 256  # its own family of one


def test_pairs_and_baseline():
    values = {((), "m21", agent): {s: float(s + i) for s in range(3)} for i, agent in enumerate(["a", "b", "c"])}
    everyone = verdict_table(values, {"m21": True}, reps=100)
    assert [(r.agent, r.other) for r in everyone] == [("a", "b"), ("a", "c"), ("b", "c")]
    against = verdict_table(values, {"m21": True}, baseline="b", reps=100)
    assert [(r.agent, r.other) for r in against] == [("a", "b"), ("c", "b")]
    assert [r.difference for r in against] == [-1.0, 1.0]  # a is 1 below b on every seed, c 1 above


def test_a_row_does_not_change_when_an_agent_is_added_but_its_holm_family_grows():
    alone = verdict_table(VALUES, DIRECTIONS, reps=300, seed=3)
    more = dict(VALUES)
    more[((), "m21", "odin")] = {0: 0.0, 1: 1.0}
    more[((), "err", "odin")] = {0: 0.0, 1: 1.0}
    again = verdict_table(more, DIRECTIONS, reps=300, seed=3)
    same = ("difference", "ci_low", "ci_high", "p_value", "p_improvement")
    assert [[getattr(r, f) for f in same] for r in again[:2]] == [[getattr(r, f) for f in same] for r in alone]
    assert again[0].tests == 6 and alone[0].tests == 2
    assert verdict_table(VALUES, DIRECTIONS, reps=300, seed=3) == alone  # deterministic


def test_one_seed_and_no_seed_have_no_verdict():
    values = {
        ((), "m21", "a"): {0: 0.9, 1: 0.8},
        ((), "m21", "b"): {0: 0.7},
        ((), "acc", "a"): {0: 0.5},
    }
    one, none = verdict_table(values, {"m21": True, "acc": True}, reps=100)
    assert one.n_seeds == 1 and one.difference == pytest.approx(0.2)
    assert math.isnan(one.ci_low) and math.isnan(one.p_improvement) and math.isnan(one.p_holm)
    assert one.better == "" and one.verdict == "no verdict: 1 paired seed"
    assert verdict_line(one) == (
        "a vs b, m21 (higher is better): +0.200 (no interval), no verdict: 1 paired seed, P(a better) n/a, "
        "p (Holm) n/a, 1 seed"
    )
    assert none.n_seeds == 0 and math.isnan(none.difference) and none.verdict == "no verdict: 0 paired seeds"
    assert pair_lines([one]) == ["a vs b: no verdict (fewer than 2 seeds in common)"]


def test_verdict_line_names_the_better_agent_and_its_probability():
    # half-width (0.1609 - 0.0812) / 2 = 0.04: one digit, 2 decimals
    assert verdict_line(_row(title="Top-1 accuracy")) == (
        "knn_novelty vs closed_world, Top-1 accuracy (higher is better): +0.12 [0.08, 0.16], better: knn_novelty, "
        "P(knn_novelty better) 0.94, p (Holm) 0.008, 10 seeds"
    )
    # lower is better and the left agent's value is higher: the right one is better, P stated for it (1 - 0.2)
    line = verdict_line(
        _row(group=(("domain", "digits"),), metric="fpr", higher_is_better=False, difference=0.05, p_improvement=0.2)
    )
    assert line == (
        "domain=digits: knn_novelty vs closed_world, fpr (lower is better): +0.05 [0.08, 0.16], better: closed_world, "
        "P(closed_world better) 0.80, p (Holm) 0.008, 10 seeds"
    )
    assert [p_text(p) for p in (0.2, 0.0123, 0.004, 0.0004, math.nan)] == ["0.20", "0.012", "0.004", "<0.001", "n/a"]
    assert [p_text(p) for p in (0.0117, 0.0039, 0.03)] == ["0.012", "0.0039", "0.03"]


def test_pair_lines_count_each_side_and_say_when_seeds_are_too_few():
    rows = [
        _row(metric="a"),
        _row(metric="b"),
        _row(metric="c", difference=-0.1),
        _row(metric="d", p_holm=0.3),
    ]
    assert pair_lines(rows) == [
        "knn_novelty vs closed_world: knn_novelty better on 2, closed_world better on 1, no significant difference "
        "on 1 of 4 headline metrics (10 seeds, two-sided, Holm, alpha 0.05)"
    ]
    few = [_row(n_seeds=3, smallest_p=0.25, tests=7, p_holm=1.0)]
    assert pair_lines(few) == [
        "knn_novelty vs closed_world: no verdict possible: 3 seeds cannot reach p < 0.05 over 7 tests "
        "(smallest possible p (Holm) 1.00); run more seeds"
    ]
    assert few[0].better == "" and not few[0].reachable


def test_bad_input():
    with pytest.raises(MetricInputError, match=r"directions: no direction for metric\(s\) \['err'\]"):
        verdict_table(VALUES, {"m21": True})
    with pytest.raises(MetricInputError, match=r"directions\['m21'\]: expected True/'maximize'.*got 'none'"):
        verdict_table(VALUES, {"m21": "none", "err": False})
    with pytest.raises(MetricInputError, match="baseline: 'ppo' is not among the agents"):
        verdict_table(VALUES, DIRECTIONS, baseline="ppo")
    with pytest.raises(MetricInputError, match=r"values: expected keys \(group, metric, agent\)"):
        verdict_table({("m21", "a"): {0: 1.0}}, DIRECTIONS)
    with pytest.raises(MetricInputError, match=r"seed: expected a whole number >= 0"):
        verdict_table(VALUES, DIRECTIONS, seed=-1)
    with pytest.raises(MetricInputError, match=r"alpha: expected a level strictly between 0 and 1, got 1.5"):
        verdict_table(VALUES, DIRECTIONS, alpha=1.5)
    with pytest.raises(MetricInputError, match=r"values\[\(\(\), 'm21', 'a'\)\]\[0\]: expected a number, got 'x'"):
        verdict_table({((), "m21", "a"): {0: "x"}}, DIRECTIONS)


# -- files -------------------------------------------------------------------------------------------------
def test_csv_and_json_records_at_full_precision():
    rows = verdict_table(VALUES, DIRECTIONS, reps=100) + [_row(p_holm=math.nan, group=(("domain", "d"),))]
    records = list(csv.DictReader(io.StringIO(verdict_csv(rows))))
    assert [r["metric"] for r in records] == ["m21", "err", "m21"]
    assert records[0]["difference"] == "0.5" and records[0]["n_seeds"] == "4" and records[0]["p_value"] == "0.375"
    assert records[0]["better"] == "" and records[0]["tests"] == "2"
    assert records[2]["setting"] == "domain=d" and records[2]["p_holm"] == ""  # NaN as empty
    parsed = json.loads(verdict_json(rows))
    assert parsed[0]["p_improvement"] == 0.625 and parsed[0]["higher_is_better"] is True
    assert parsed[2]["group"] == {"domain": "d"} and parsed[2]["p_holm"] is None  # NaN as null
    one_setting = list(csv.DictReader(io.StringIO(verdict_csv(rows[:2]))))
    assert "setting" not in one_setting[0]  # no empty column


def _latex_rows():
    group = (("domain", "a&b"),)
    return [
        _row(group=group, agent="knn_novelty", difference=0.30, ci_low=0.2, ci_high=0.4, title="Top-1 accuracy"),
        _row(group=group, metric="fpr%", higher_is_better=False, agent="odin", difference=-0.3, ci_low=-0.4),
        _row(group=(("domain", "c"),), agent="odin", p_holm=0.2),
    ]


def test_latex_is_a_complete_float_with_escaped_names():
    tex = verdict_latex(_latex_rows())
    lines = tex.splitlines()
    assert lines[0].startswith("%") and r"\usepackage{booktabs}" in lines[0]
    assert lines[1] == r"\begin{table}[ht]" and lines[-1] == r"\end{table}"
    caption = next(line for line in lines if line.startswith(r"\caption{"))
    for words in (
        "10 seeds",
        "higher is better",
        "lower is better",
        "two-sided paired sign-flip",
        "Holm",
        "$p < 0.05$",
    ):
        assert words in caption
    assert r"\label{tab:verdict}" in lines
    start = lines.index(r"\begin{tabular}{llllrlrrr}")
    assert lines[start + 1] == r"\toprule" and lines[start + 2].startswith("Setting & Metric & Agent & vs")
    body = lines[start + 4 : lines.index(r"\bottomrule")]
    # the better agent bold in its own column; names escaped; a minus in math mode
    assert body[0] == (
        r"domain=a\&b & Top-1 accuracy $\uparrow$ & knn\_novelty & closed\_world & +0.30 [0.20, 0.40] & "
        r"\textbf{knn\_novelty} & 0.94 & 0.008 & 10 \\"
    )
    assert r"fpr\% $\downarrow$ & odin & closed\_world & $-$0.3 [$-$0.4, 0.2] & \textbf{odin}" in body[1]
    assert body[2] == r"\midrule" and r"& -- & 0.94 & 0.20 & 10 \\" in body[3]  # not significant: no better agent


def test_latex_compiles(tmp_path):
    """Compiled with pdflatex where one is installed (CI installs texlive-latex-base and -recommended); elsewhere
    checked structurally: every environment that opens closes, in order."""
    tex = verdict_latex(_latex_rows())
    stack = []
    for line in tex.splitlines():
        for token in ("begin", "end"):
            marker = "\\" + token + "{"
            if line.startswith(marker):
                name = line[len(marker) : line.index("}")]
                if token == "begin":
                    stack.append(name)
                else:
                    assert stack.pop() == name
    assert stack == []
    engine = shutil.which("pdflatex")
    if engine is None:
        pytest.skip(
            "pdflatex not installed (apt-get install texlive-latex-base texlive-latex-recommended): checked structurally only"
        )
    doc = "\\documentclass{article}\n\\usepackage{booktabs}\n\\begin{document}\n" + tex + "\\end{document}\n"
    (tmp_path / "paper.tex").write_text(doc)
    done = subprocess.run(
        [engine, "-interaction=nonstopmode", "-halt-on-error", "paper.tex"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-2000:]
    assert (tmp_path / "paper.pdf").stat().st_size > 1000


def test_latex_escape():
    assert latex_escape(r"a_b&c%d$e#f{g}h~i^j\k<l") == (
        r"a\_b\&c\%d\$e\#f\{g\}h\textasciitilde{}i\textasciicircum{}j\textbackslash{}k\textless{}l"
    )


def test_latex_without_settings_has_no_setting_column():
    tex = verdict_latex([_row()])
    assert r"\begin{tabular}{lllrlrrr}" in tex.splitlines()
    assert "Metric & Agent & vs" in tex
