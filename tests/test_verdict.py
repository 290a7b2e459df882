"""owl_eval.verdict: the verdict rows on data small enough to check by hand (worked in the comments), their
one-line form, CSV, JSON and LaTeX."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest

from owl_eval.errors import MetricInputError
from owl_eval.verdict import (
    VerdictRow,
    latex_escape,
    p_text,
    to_csv,
    to_json,
    to_latex,
    verdict_line,
    verdict_table,
)

# Seeds 0-3 are shared; seed 4 only the baseline ran; seed 5 is NaN (missing) for knn.
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
    # sign patterns of the 16 with signed sum >= 2: 3 (see test_stats) -> p 3/16
    assert m21.p_value == 3 / 16
    # pairs knn > cw over 1,2,3,4 vs 0.5,2.5,2,3 (ties 1/2): 1 + 1.5 + 3.5 + 4 = 10 of 16
    assert m21.p_improvement == 10 / 16
    # err, lower is better: the difference keeps its sign (0.5: knn is worse); gains -0.5, 0.5, -1, -1 (sum -2):
    # only the all-minus pattern is below -> p 15/16; knn wins where lower: 6 of 16 pairs
    assert (err.difference, err.higher_is_better, err.p_value, err.p_improvement) == (0.5, False, 15 / 16, 6 / 16)
    assert err.improvement == -0.5
    # Holm over the two metrics: 3/16 x 2 = 0.375; 15/16 x 1 = 0.9375
    assert (m21.p_holm, err.p_holm) == pytest.approx((0.375, 0.9375))
    # bootstrap means of the differences lie within their range
    for row in (m21, err):
        assert -0.5 <= row.ci_low <= 0.5 <= row.ci_high <= 1.0


def test_holm_runs_within_one_group_and_pair_only():
    values = dict(VALUES)
    other = (("domain", "b"),)
    values[(other, "m21", "knn_novelty")] = KNN
    values[(other, "m21", "closed_world")] = CW
    rows = verdict_table(values, DIRECTIONS, reps=200)
    lone = [r for r in rows if r.group == other]
    assert len(lone) == 1 and lone[0].p_holm == lone[0].p_value == 3 / 16  # a family of one: unadjusted


def test_pairs_and_baseline():
    values = {((), "m21", agent): {s: float(s + i) for s in range(3)} for i, agent in enumerate(["a", "b", "c"])}
    everyone = verdict_table(values, {"m21": True}, reps=100)
    assert [(r.agent, r.other) for r in everyone] == [("a", "b"), ("a", "c"), ("b", "c")]
    against = verdict_table(values, {"m21": True}, baseline="b", reps=100)
    assert [(r.agent, r.other) for r in against] == [("a", "b"), ("c", "b")]
    assert [r.difference for r in against] == [-1.0, 1.0]  # a is 1 below b on every seed, c 1 above


def test_a_row_does_not_change_when_an_agent_is_added():
    alone = verdict_table(VALUES, DIRECTIONS, reps=300, seed=3)
    more = dict(VALUES)
    more[((), "m21", "odin")] = {0: 0.0, 1: 1.0}
    more[((), "err", "odin")] = {0: 0.0, 1: 1.0}
    again = verdict_table(more, DIRECTIONS, reps=300, seed=3)
    assert again[:2] == alone
    assert verdict_table(VALUES, DIRECTIONS, reps=300, seed=3) == alone  # deterministic


def test_one_seed_and_no_seed():
    values = {
        ((), "m21", "a"): {0: 0.9, 1: 0.8},
        ((), "m21", "b"): {0: 0.7},
        ((), "acc", "a"): {0: 0.5},
    }
    one, none = verdict_table(values, {"m21": True, "acc": True}, reps=100)
    assert one.n_seeds == 1 and one.difference == pytest.approx(0.2)
    assert math.isnan(one.ci_low) and math.isnan(one.p_improvement) and math.isnan(one.p_holm)
    assert verdict_line(one) == "a vs b, m21: +0.200 (no interval), P(improvement) n/a, p (Holm) n/a, 1 seed"
    assert none.n_seeds == 0 and math.isnan(none.difference)
    assert verdict_line(none) == "a vs b, acc: n/a, P(improvement) n/a, p (Holm) n/a, 0 seeds"


def test_verdict_line():
    # half-width (0.1609 - 0.0812) / 2 = 0.04: one digit, 2 decimals
    assert verdict_line(_row()) == (
        "knn_novelty vs closed_world, m21: +0.12 [0.08, 0.16], P(improvement) 0.94, p (Holm) 0.008, 10 seeds"
    )
    line = verdict_line(_row(group=(("domain", "digits"),), metric="fpr", higher_is_better=False, difference=-0.05))
    assert line.startswith("domain=digits: knn_novelty vs closed_world, fpr (lower is better): -0.05 [0.08, 0.16]")
    assert [p_text(p) for p in (0.2, 0.0123, 0.004, 0.0004, math.nan)] == ["0.20", "0.01", "0.004", "<0.001", "n/a"]


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
    with pytest.raises(MetricInputError, match=r"values\[\(\(\), 'm21', 'a'\)\]\[0\]: expected a number, got 'x'"):
        verdict_table({((), "m21", "a"): {0: "x"}}, DIRECTIONS)


# -- files -------------------------------------------------------------------------------------------------
def test_csv_and_json_records():
    rows = verdict_table(VALUES, DIRECTIONS, reps=100) + [_row(p_holm=math.nan, group=(("domain", "d"),))]
    records = list(csv.DictReader(io.StringIO(to_csv(rows))))
    assert [r["metric"] for r in records] == ["m21", "err", "m21"]
    assert records[0]["difference"] == "0.5" and records[0]["n_seeds"] == "4" and records[0]["p_value"] == "0.1875"
    assert records[2]["setting"] == "domain=d" and records[2]["p_holm"] == ""  # NaN as empty
    parsed = json.loads(to_json(rows))
    assert parsed[0]["p_improvement"] == 0.625 and parsed[0]["higher_is_better"] is True
    assert parsed[2]["group"] == {"domain": "d"} and parsed[2]["p_holm"] is None  # NaN as null


def test_latex_escapes_names_and_bolds_the_best():
    group = (("domain", "a&b"),)
    rows = [
        _row(group=group, agent="knn_novelty", difference=0.30, ci_low=0.2, ci_high=0.4),
        _row(group=group, agent="odin", difference=0.10, ci_low=0.0, ci_high=0.2),
        _row(group=group, metric="fpr%", higher_is_better=False, agent="knn_novelty", difference=-0.1),
        _row(group=group, metric="fpr%", higher_is_better=False, agent="odin", difference=-0.3, ci_low=-0.4),
        _row(group=(("domain", "c"),), agent="odin"),  # alone in its setting: not bold
    ]
    tex = to_latex(rows)
    lines = tex.splitlines()
    assert lines[0] == r"\begin{tabular}{llllrrrr}" and lines[1] == r"\toprule" and lines[-1] == r"\end{tabular}"
    assert lines[2].startswith("Setting & Metric & Agent & vs & Difference [95\\% CI]")
    assert r"\bottomrule" in lines and lines.count(r"\midrule") == 2  # under the header, between settings
    body = lines[4:-2]
    # higher is better: knn +0.30 beats odin +0.10; lower is better: odin -0.30 beats knn -0.10.
    # knn's half-width 0.1 starts with 1: two digits, 2 decimals
    assert body[0] == (
        r"domain=a\&b & m21 $\uparrow$ & knn\_novelty & closed\_world & \textbf{+0.30 [0.20, 0.40]} & 0.94 & 0.008 & 10 \\"
    )
    assert r"\textbf" not in body[1]
    assert r"\textbf" not in body[2] and r"fpr\% $\downarrow$" in body[2]
    # half-width (0.16 + 0.4) / 2 = 0.28: one digit, 1 decimal
    assert r"\textbf{$-$0.3 [$-$0.4, 0.2]}" in body[3]
    assert r"\textbf" not in body[5]
    wrapped = to_latex(rows[:1], caption="Agents & 95% CIs", label="tab:verdict")
    assert r"\caption{Agents \& 95\% CIs}" in wrapped and r"\label{tab:verdict}" in wrapped
    assert wrapped.startswith(r"\begin{table}") and wrapped.rstrip().endswith(r"\end{table}")


def test_latex_escape():
    assert latex_escape(r"a_b&c%d$e#f{g}h~i^j\k") == (
        r"a\_b\&c\%d\$e\#f\{g\}h\textasciitilde{}i\textasciicircum{}j\textbackslash{}k"
    )


def test_latex_without_settings_has_no_setting_column():
    tex = to_latex([_row()])
    assert tex.splitlines()[0] == r"\begin{tabular}{lllrrrr}"
    assert "Metric & Agent & vs" in tex.splitlines()[2]
