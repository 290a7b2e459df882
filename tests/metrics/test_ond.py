"""OND program metrics: hand-computed trials, a plain-loop reimplementation, bad input.

Expected values are computed by hand (the arithmetic is in the comments) or by ``loop_program_metrics``
below, a one-sample-at-a-time reading of METRICS.md section 1 that shares no code with owl_eval.protocols.ond.metrics.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from owl_eval.metrics.results import NA
from owl_eval.metrics.validation import MetricInputError
from owl_eval.protocols.ond.metrics import (
    DETECTION_THRESHOLD_GRID,
    SPECS,
    OndTrial,
    asymptotic_performance_task_improvement,
    correctly_detected,
    detected_early,
    detection_index,
    detection_vs_threshold,
    novelty_detection_performance,
    novelty_reaction_performance,
    open_set_metrics,
    overall_performance_task_improvement,
    program_metrics,
    top_k_accuracy,
    topk_correct,
)

# --------------------------------------------------------------------------------------------------
# helpers to write trials by hand
# --------------------------------------------------------------------------------------------------

RANKED_VALUES = {4: [0.4, 0.3, 0.2, 0.1], 5: [0.4, 0.3, 0.15, 0.1, 0.05]}


def row_with_rank(true_class: int, rank: int, n_columns: int) -> list[float]:
    """A score row in which ``true_class`` is the ``rank``-th highest (no ties)."""
    others = [c for c in range(n_columns) if c != true_class]
    order = others[:rank] + [true_class] + others[rank:]
    row = [0.0] * n_columns
    for position, column in enumerate(order):
        row[column] = RANKED_VALUES[n_columns][position]
    return row


def class_scores(gt_class, ranks, n_columns):
    return np.array([row_with_rank(g, r, n_columns) for g, r in zip(gt_class, ranks)])


def make_trial(
    gt_class,
    red_light=None,
    *,
    pwc=None,
    p_class=None,
    ranks=None,
    n_columns=4,
    batch_size=2,
    gt_novel=None,
    trial_id="t",
):
    gt_class = np.asarray(gt_class)
    n = gt_class.size
    if gt_novel is None:
        gt_novel = (gt_class == 0).astype(int)
    if pwc is None:
        pwc = np.zeros(n)
    if p_class is None:
        p_class = class_scores(gt_class, ranks if ranks is not None else [0] * n, n_columns)
    return OndTrial(
        gt_class,
        np.asarray(gt_novel),
        red_light,
        np.asarray(pwc, dtype=float),
        np.asarray(p_class, dtype=float),
        batch_size,
        trial_id=trial_id,
    )


# --------------------------------------------------------------------------------------------------
# detection: M1, M2, M2.1
# --------------------------------------------------------------------------------------------------


def detection_trials():
    return [
        # A: red light 3, first p >= 0.5 on the LAST sample (index 5): CDT (sail-on-client refuses it), FN = 5-3 = 2
        make_trial([1, 2, 3, 0, 0, 0], 3, pwc=[0.1, 0.2, 0.1, 0.3, 0.4, 0.9], trial_id="A-last-sample"),
        # B: red light 4, detection at 1 < 4: early (false-positive trial), not CDT
        make_trial([1, 1, 2, 2, 0, 0], 4, pwc=[0.1, 0.6, 0.2, 0.2, 0.9, 0.9], trial_id="B-early"),
        # C: no novelty, detector never fires: neither CDT nor early
        make_trial([1, 2, 3, 1], None, pwc=[0.1, 0.1, 0.1, 0.1], trial_id="C-no-novelty"),
        # D: red light 2, detector never fires: not CDT, not early
        make_trial([3, 3, 0, 1, 0], 2, pwc=[0.2] * 5, trial_id="D-never"),
        # E: red light 1, p = 0.5 exactly at index 2 (>= threshold): CDT, FN = 2-1 = 1
        make_trial([1, 0, 0, 2], 1, pwc=[0.2, 0.3, 0.5, 0.5], trial_id="E-at-threshold"),
    ]


def test_detection_metrics_by_hand():
    r = program_metrics(detection_trials())
    # CDT: A (2 FN), E (1 FN) -> M1 = 1.5; trials with novelty: A B D E -> M2 = 2/4 = 50 %
    assert r["m1_mean_fn_cdt"] == pytest.approx(1.5)
    assert r["m2_cdt_pct"] == pytest.approx(50.0)
    assert r["m2_cdt_pct_all"] == pytest.approx(40.0)  # 2 / 5 trials
    assert r["m21_fp_pct"] == pytest.approx(20.0)  # B only: 1 / 5


def test_detection_on_last_sample_counts_as_cdt():
    p = [0.1, 0.2, 0.1, 0.3, 0.4, 0.9]
    assert detection_index(p, threshold=0.5) == 5
    assert correctly_detected(p, 3, threshold=0.5) is True
    assert detected_early(p, 3, threshold=0.5) is False
    r = program_metrics([detection_trials()[0]])
    assert r["m2_cdt_pct"] == 100.0 and r["m1_mean_fn_cdt"] == 2.0


def test_detection_before_red_light_is_early_and_no_novelty_detection_is_early():
    assert detected_early([0.1, 0.6, 0.2, 0.2, 0.9, 0.9], 4, threshold=0.5) is True
    assert correctly_detected([0.1, 0.6, 0.2, 0.2, 0.9, 0.9], 4, threshold=0.5) is False
    # no novelty: any detection is a false positive; no detection is not
    assert detected_early([0.1, 0.7], None, threshold=0.5) is True
    assert detected_early([0.1, 0.2], None, threshold=0.5) is False
    assert correctly_detected([0.9, 0.9], None, threshold=0.5) is False


def test_detector_that_never_fires():
    assert detection_index([0.2, 0.3, 0.49], threshold=0.5) is None
    r = program_metrics([detection_trials()[3]])  # D only
    assert isinstance(r["m1_mean_fn_cdt"], NA) and "no correctly detected trial" in r["m1_mean_fn_cdt"].reason
    assert r["m2_cdt_pct"] == 0.0 and r["m21_fp_pct"] == 0.0


def test_trials_without_novelty_only():
    r = program_metrics([detection_trials()[2]])  # C only
    assert isinstance(r["m2_cdt_pct"], NA) and "no trial has novelty" in r["m2_cdt_pct"].reason
    assert r["m2_cdt_pct_all"] == 0.0
    assert isinstance(r["top1_post"], NA)
    assert r["top1_pre"] == r["top1"] == 1.0  # a trial without novelty is all pre-novelty


def test_threshold_grid_by_hand():
    r = program_metrics(detection_trials(), threshold_grid=True)
    # threshold 0.3: A d=3 (CDT, FN 0); B d=1 early; C never; D never; E d=1 (CDT, FN 0) -> M1 0, M2 50, M2.1 20
    assert r["m1_mean_fn_cdt@0.3"] == 0.0
    assert r["m2_cdt_pct@0.3"] == 50.0
    assert r["m21_fp_pct@0.3"] == 20.0
    # threshold 0.175: A d=1 < 3 early; B d=1 early; C never; D d=0 early; E d=0 early -> M2 0, M2.1 80, M1 N/A
    assert r["m2_cdt_pct@0.175"] == 0.0
    assert r["m21_fp_pct@0.175"] == 80.0
    assert isinstance(r["m1_mean_fn_cdt@0.175"], NA)
    # threshold 0.9: A d=5 CDT (FN 2); B d=4 CDT (FN 0); E never -> M1 1, M2 50, M2.1 0
    assert r["m1_mean_fn_cdt@0.9"] == 1.0
    assert r["m2_cdt_pct@0.9"] == 50.0
    assert r["m21_fp_pct@0.9"] == 0.0
    for t in DETECTION_THRESHOLD_GRID:
        for name in (
            "m1_mean_fn_cdt",
            "m2_cdt_pct",
            "m2_cdt_pct_all",
            "m21_fp_pct",
            "unknown_score_f1_post",
            "unknown_score_accuracy_pre",
        ):
            assert f"{name}@{t:g}" in r
    series = r.series["m2_cdt_pct_vs_threshold"]
    assert series.steps.tolist() == [175, 225, 300, 400, 500, 600, 700, 800, 900]
    assert series.values[0] == 0.0 and series.values[2] == 50.0


def test_detection_vs_threshold_table():
    table = detection_vs_threshold(detection_trials(), [0.175, 0.3, 0.9])
    assert table["threshold"].tolist() == [0.175, 0.3, 0.9]
    assert table["m21_fp_pct"].tolist() == [80.0, 20.0, 0.0]  # hand values of test_threshold_grid_by_hand
    assert math.isnan(table["m1_mean_fn_cdt"][0]) and table["m1_mean_fn_cdt"][1:].tolist() == [0.0, 1.0]
    assert set(table) >= {"m2_cdt_pct", "m2_cdt_pct_all", "unknown_score_precision_post", "unknown_score_recall_pre"}


# --------------------------------------------------------------------------------------------------
# classification: top-k, ties, batches
# --------------------------------------------------------------------------------------------------


def test_topk_ties_go_to_the_lower_column():
    uniform = [[0.25, 0.25, 0.25, 0.25]] * 4
    # all tied: columns ahead of class g are 0..g-1, so rank = g
    assert topk_correct([0, 1, 2, 3], uniform, k=1).tolist() == [True, False, False, False]
    assert topk_correct([0, 1, 2, 3], uniform, k=3).tolist() == [True, True, True, False]
    two_way = [[0.1, 0.4, 0.4, 0.1]] * 4
    # columns 1 and 2 tie at the top: 1 wins top-1; class 3 ties with column 0 (lower) -> rank 3
    assert topk_correct([1, 2, 0, 3], two_way, k=1).tolist() == [True, False, False, False]
    assert topk_correct([1, 2, 0, 3], two_way, k=3).tolist() == [True, True, True, False]
    assert top_k_accuracy([1, 2, 0, 3], two_way, k=3) == 0.75


def accuracy_trials():
    # T1: red light 3; ranks of the true class [0,1,3,0,2,0]:
    #     top-1 [1,0,0,1,0,1], top-3 [1,1,0,1,1,1]
    t1 = make_trial([1, 2, 3, 0, 0, 4], 3, ranks=[0, 1, 3, 0, 2, 0], n_columns=5, trial_id="T1")
    # T2: no novelty; ranks [0,0,4]: top-1 [1,1,0], top-3 [1,1,0]
    t2 = make_trial([1, 1, 2], None, ranks=[0, 0, 4], n_columns=5, trial_id="T2")
    return [t1, t2]


def baseline_trials():
    # T1 baseline ranks [0,0,3,1,1,0]: top-1 [1,1,0,0,0,1], top-3 [1,1,0,1,1,1]
    t1 = make_trial([1, 2, 3, 0, 0, 4], 3, ranks=[0, 0, 3, 1, 1, 0], n_columns=5, trial_id="T1")
    t2 = make_trial([1, 1, 2], None, ranks=[4, 4, 4], n_columns=5, trial_id="T2")
    return [t1, t2]


def test_top1_top3_pre_post_by_hand():
    r = program_metrics(accuracy_trials())
    # T1: top1 3/6, top3 5/6; pre (3 samples) 1/3 and 2/3; post 2/3 and 3/3. T2: top1 = top3 = 2/3, all pre.
    assert r["top1"] == pytest.approx((0.5 + 2 / 3) / 2)
    assert r["top3"] == pytest.approx((5 / 6 + 2 / 3) / 2)
    assert r["top1_pre"] == pytest.approx((1 / 3 + 2 / 3) / 2)
    assert r["top3_pre"] == pytest.approx((2 / 3 + 2 / 3) / 2)
    assert r["top1_post"] == pytest.approx(2 / 3)  # T2 has no post-novelty segment: left out
    assert r["top3_post"] == pytest.approx(1.0)


def test_top1_batch_series_by_hand():
    r = program_metrics(accuracy_trials())
    # batch_size 2. T1 batches top-1: [1,0] [0,1] [0,1] -> .5 .5 .5; T2: [1,1] [0] -> 1, 0
    series = r.series["top1_batch"]
    assert series.steps.tolist() == [0, 1, 2]
    assert series.values == pytest.approx([0.75, 0.25, 0.5])


# --------------------------------------------------------------------------------------------------
# baseline-dependent: M3/M4, M5, M6
# --------------------------------------------------------------------------------------------------


def test_nrp_opti_apti_by_hand():
    r = program_metrics(accuracy_trials(), baseline_trials(), asymptotic_width=2)
    # T1 only (T2 has no novelty). Agent post top-1 2/3, top-3 1; baseline pre top-1 2/3, top-3 2/3
    assert r["m3_nrp_top1"] == pytest.approx(100.0)  # 100 * (2/3) / (2/3)
    assert r["m3_nrp_top3"] == pytest.approx(150.0)  # 100 * 1 / (2/3)
    # M5: agent post top-1 2/3, baseline post top-1 [0,0,1] = 1/3 -> (2/3) / 1
    assert r["m5_opti_top1"] == pytest.approx(2 / 3)
    # M6, last 2 samples: agent [0,1] = 1/2, baseline [0,1] = 1/2 -> 1
    assert r["m6_apti_top1"] == pytest.approx(1.0)
    assert r["m3_nrp_top1_n_excluded"] == 0.0
    assert "m4_nrp_top1" not in r


def test_m6_asymptotic_width():
    r = program_metrics(accuracy_trials(), baseline_trials(), asymptotic_width=4)
    # last 4 samples of T1: agent top-1 [0,1,0,1] = 1/2, baseline [0,0,0,1] = 1/4 -> 2
    assert r["m6_apti_top1"] == pytest.approx(2.0)
    # width longer than the trial: the whole trial, agent 3/6, baseline 3/6 -> 1
    assert program_metrics(accuracy_trials(), baseline_trials(), asymptotic_width=100)["m6_apti_top1"] == pytest.approx(
        1.0
    )


def test_nrp_window_asymptotic_vs_post():
    post = program_metrics(accuracy_trials(), baseline_trials(), nrp_window="post", asymptotic_width=2)
    asym = program_metrics(accuracy_trials(), baseline_trials(), nrp_window="asymptotic", asymptotic_width=2)
    assert post["m3_nrp_top1"] == pytest.approx(100.0)
    # asymptotic: agent top-1 on the last 2 samples [0,1] = 1/2 -> 100 * (1/2) / (2/3) = 75
    assert asym["m3_nrp_top1"] == pytest.approx(75.0)
    # top-3 on the last 2 [1,1] = 1 -> 150, as post
    assert asym["m3_nrp_top3"] == pytest.approx(150.0)


def test_condition_given_names_m4():
    r = program_metrics(accuracy_trials(), baseline_trials(), condition="given")
    assert r["m4_nrp_top1"] == pytest.approx(100.0) and r["m4_nrp_top3"] == pytest.approx(150.0)
    assert "m3_nrp_top1" not in r and "m3_nrp_top3" not in r


def test_without_baseline_m3_to_m6_are_na():
    r = program_metrics(accuracy_trials())
    for name in ("m3_nrp_top1", "m3_nrp_top3", "m5_opti_top1", "m6_apti_top1"):
        assert isinstance(r[name], NA) and "baseline" in r[name].reason
    r = program_metrics(accuracy_trials(), condition="given")
    assert isinstance(r["m4_nrp_top3"], NA)


def test_given_condition_does_not_report_trial_detection():
    # The same trials as test_detection_metrics_by_hand (M1 1.5, M2 50, M2 all 40, M2.1 20 under system): under
    # given the agent is told the red light, so M1, M2 and M2.1 are N/A (and their grid variants and series).
    r = program_metrics(detection_trials(), condition="given", threshold_grid=True)
    for name in ("m1_mean_fn_cdt", "m2_cdt_pct", "m2_cdt_pct_all", "m21_fp_pct"):
        assert isinstance(r[name], NA) and "red light is given" in r[name].reason, name
        assert isinstance(r[f"{name}@0.3"], NA), name
        assert f"{name}_vs_threshold" not in r.series, name
    # per-sample detection on p_class[:, 0] is still a measurement: equal to the system condition's value
    system = program_metrics(detection_trials(), condition="system", threshold_grid=True)
    assert r["unknown_score_accuracy_post"] == system["unknown_score_accuracy_post"]
    assert system["m1_mean_fn_cdt"] == pytest.approx(1.5) and system["m21_fp_pct@0.3"] == 20.0


def test_agent_identical_to_baseline_has_no_m5_m6():
    # The agent is the baseline: M5 would be 0.5 and M6 1 by construction (T1: post top-1 2/3 vs 2/3 -> 0.5).
    r = program_metrics(accuracy_trials(), accuracy_trials(), asymptotic_width=2)
    for name in ("m5_opti_top1", "m6_apti_top1"):
        assert isinstance(r[name], NA) and "the agent is the baseline" in r[name].reason, name
    # NRP is still a measurement: 100 * post top-1 (2/3) / pre top-1 (1/3) = 200
    assert r["m3_nrp_top1"] == pytest.approx(200.0)
    # one sample different (T1 sample 5: rank 0 -> 1) is a different agent: M5 measured again,
    # agent post top-1 [1,0,1] = 2/3, baseline [1,0,0] = 1/3 -> (2/3) / (2/3 + 1/3) = 2/3
    other = accuracy_trials()
    other[0] = make_trial([1, 2, 3, 0, 0, 4], 3, ranks=[0, 1, 3, 0, 2, 1], n_columns=5, trial_id="T1")
    assert program_metrics(accuracy_trials(), other)["m5_opti_top1"] == pytest.approx(2 / 3)


def zero_baseline_trial(trial_id="T3"):
    # red light 2; baseline ranks [1,1,0,0]: pre top-1 0 (!), pre top-3 1; agent ranks [0,0,0,2]: post top-1 1/2, top-3 1
    agent = make_trial([1, 2, 0, 0], 2, ranks=[0, 0, 0, 2], n_columns=5, trial_id=trial_id)
    baseline = make_trial([1, 2, 0, 0], 2, ranks=[1, 1, 0, 0], n_columns=5, trial_id=trial_id)
    return agent, baseline


def test_baseline_with_zero_pre_novelty_accuracy_is_excluded():
    agent3, baseline3 = zero_baseline_trial()
    r = program_metrics(accuracy_trials() + [agent3], baseline_trials() + [baseline3])
    # top-1: T3 excluded -> mean over T1 = 100; top-3: T3 = 100 * 1 / 1 -> mean(150, 100) = 125
    assert r["m3_nrp_top1"] == pytest.approx(100.0)
    assert r["m3_nrp_top1_n_excluded"] == 1.0
    assert r["m3_nrp_top3"] == pytest.approx(125.0)
    assert r["m3_nrp_top3_n_excluded"] == 0.0
    # per trial: N/A with the reason
    value = novelty_reaction_performance(agent3.gt_class, agent3.p_class, baseline3.p_class, 2, k=1)
    assert isinstance(value, NA) and "baseline top-1 accuracy before the red light is 0" in value.reason
    assert novelty_reaction_performance(agent3.gt_class, agent3.p_class, baseline3.p_class, 2, k=3) == pytest.approx(
        100.0
    )
    # all trials excluded -> the metric is N/A
    only = program_metrics([agent3], [baseline3])
    assert isinstance(only["m3_nrp_top1"], NA) and "excluded" in only["m3_nrp_top1"].reason
    # M5 for T3: agent post top-1 1/2, baseline post top-1 [1,1] = 1 -> (1/2) / (3/2) = 1/3
    assert only["m5_opti_top1"] == pytest.approx(1 / 3)


def test_per_trial_reaction_functions_by_hand():
    t1, b1 = accuracy_trials()[0], baseline_trials()[0]
    assert novelty_reaction_performance(t1.gt_class, t1.p_class, b1.p_class, 3, k=1) == pytest.approx(100.0)
    assert novelty_reaction_performance(
        t1.gt_class, t1.p_class, b1.p_class, 3, k=1, window="asymptotic", asymptotic_width=2
    ) == pytest.approx(75.0)
    assert overall_performance_task_improvement(t1.gt_class, t1.p_class, b1.p_class, 3) == pytest.approx(2 / 3)
    assert asymptotic_performance_task_improvement(
        t1.gt_class, t1.p_class, b1.p_class, asymptotic_width=4
    ) == pytest.approx(2.0)
    assert isinstance(novelty_reaction_performance(t1.gt_class, t1.p_class, b1.p_class, None), NA)


# --------------------------------------------------------------------------------------------------
# per-sample novelty detection
# --------------------------------------------------------------------------------------------------


def p_class_with_unknown_score(p_unknown, n_columns=4):
    rest = (1.0 - np.asarray(p_unknown))[:, None] / (n_columns - 1)
    return np.column_stack([p_unknown, np.repeat(rest, n_columns - 1, axis=1)])


def m_ndp_by_the_reference_definition(p_world, gt_novel, mode, threshold):
    """sail-on-client 0.30 ``metrics.m_ndp`` written out as a plain loop from its definition (not its code):
    ``p > threshold``; post from the first novel sample (None without one); pre up to it, or the whole test
    when there is no novel sample or only novel ones; 0 on an empty precision/recall denominator."""
    first = next((i for i, g in enumerate(gt_novel) if g), None)
    if mode == "post":
        if first is None:
            return None
        rows = range(first, len(gt_novel))
    elif mode == "pre" and first is not None and not all(gt_novel):
        rows = range(first)
    else:
        rows = range(len(gt_novel))
    tp = fp = tn = fn = 0
    for i in rows:
        predicted = p_world[i] > threshold
        if predicted and gt_novel[i]:
            tp += 1
        elif predicted:
            fp += 1
        elif gt_novel[i]:
            fn += 1
        else:
            tn += 1
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 0.0 if precision == 0 and recall == 0 else 2 * precision * recall / (precision + recall)
    return {"accuracy": (tp + tn) / (tp + tn + fp + fn), "precision": precision, "recall": recall, "f1_score": f1}


def test_m_ndp_on_p_world_changed_by_hand():
    """sail-on-client's m_ndp thresholds P(world changed) with ``>``; values worked out by hand."""
    unknown = p_class_with_unknown_score  # p_class[:, 0] high exactly on the novel samples
    a = make_trial(
        [1, 2, 3, 0, 1, 0], 3, pwc=[0.2, 0.5, 0.6, 0.7, 0.5, 0.9], p_class=unknown([0.1, 0.1, 0.1, 0.9, 0.1, 0.9])
    )
    b = make_trial([1, 2], None, pwc=[0.6, 0.1], p_class=unknown([0.1, 0.1]), trial_id="no-novelty")
    c = make_trial([0, 0], 0, pwc=[0.9, 0.3], p_class=unknown([0.9, 0.9]), trial_id="all-novel")
    r = program_metrics([a, b, c])
    # a: predicted (> 0.5; the two 0.5 are not) [0,0,1,1,0,1] vs novel [0,0,0,1,0,1]:
    #    full TP 2 FP 1 TN 3 FN 0 -> accuracy 5/6, precision 2/3, recall 1, F1 2(2/3)/(5/3) = 0.8;
    #    pre (rows 0-2) FP 1 TN 2 -> 2/3, 0, 0, 0; post (rows 3-5) TP 2 TN 1 -> 1, 1, 1, 1.
    # b (no novelty): [1,0] vs [0,0]: FP 1 TN 1 -> 1/2, 0, 0, 0; pre = the whole test; post undefined (-1).
    # c (only novel): [1,0] vs [1,1]: TP 1 FN 1 -> 1/2, 1, 1/2, 2/3; pre = post = the whole test.
    expected = {
        "m_ndp_accuracy": (5 / 6 + 1 / 2 + 1 / 2) / 3,
        "m_ndp_precision": (2 / 3 + 0 + 1) / 3,
        "m_ndp_recall": (1 + 0 + 1 / 2) / 3,
        "m_ndp_f1_score": (0.8 + 0 + 2 / 3) / 3,
        "m_ndp_pre_accuracy": (2 / 3 + 1 / 2 + 1 / 2) / 3,
        "m_ndp_pre_precision": (0 + 0 + 1) / 3,
        "m_ndp_pre_recall": (0 + 0 + 1 / 2) / 3,
        "m_ndp_pre_f1_score": (0 + 0 + 2 / 3) / 3,
        "m_ndp_post_accuracy": (1 + 1 / 2) / 2,
        "m_ndp_post_precision": (1 + 1) / 2,
        "m_ndp_post_recall": (1 + 1 / 2) / 2,
        "m_ndp_post_f1_score": (1 + 2 / 3) / 2,
    }
    for name, value in expected.items():
        assert r[name] == pytest.approx(value, abs=1e-12), name
    # the unknown-class-score metric is a different quantity: p_class[:, 0] is 0.9 on the novel rows and 0.1
    # elsewhere, so it detects every novel sample and nothing else, while m_ndp (on p_world_changed) does not
    assert r["unknown_score_recall_post"] == 1.0 and r["unknown_score_precision_post"] == 1.0
    # under the given condition p_world_changed is not measured, the unknown score still is
    given = program_metrics([a, b, c], condition="given")
    assert isinstance(given["m_ndp_post_f1_score"], NA) and "given" in given["m_ndp_post_f1_score"].reason
    assert given["unknown_score_recall_post"] == 1.0


def test_m_ndp_equals_a_loop_over_the_reference_definition():
    """Random trials with scores on a 0.1 grid (so many sit exactly on a threshold) at every threshold of
    the grid: each program value is the mean over trials of the plain loop above."""
    rng = np.random.default_rng(3)
    trials = []
    for t in range(12):
        n = int(rng.integers(3, 12))
        red = [None, 0, int(rng.integers(1, n))][t % 3]
        gt_novel = np.zeros(n, int)
        if red is not None:
            gt_novel[red:] = rng.random(n - red) < 0.6
            gt_novel[red] = 1
            if t == 4:
                gt_novel[:] = 1  # only novel samples: pre-novelty is the whole test
        gt_class = np.where(gt_novel == 1, 0, rng.integers(1, 4, n))
        pwc = np.round(rng.random(n) * 10) / 10
        trials.append(make_trial(gt_class, red, pwc=pwc, gt_novel=gt_novel, trial_id=f"r{t}"))
    results = program_metrics(trials, threshold_grid=True)
    for threshold in DETECTION_THRESHOLD_GRID:
        for mode, prefix in (("full", "m_ndp"), ("pre", "m_ndp_pre"), ("post", "m_ndp_post")):
            per_trial = []
            for trial in trials:
                if mode == "pre" and trial.red_light == 0 and not trial.gt_novel.all():
                    continue  # an empty pre-novelty segment: the reference divides 0 by 0; left out
                value = m_ndp_by_the_reference_definition(
                    trial.p_world_changed.tolist(), trial.gt_novel.tolist(), mode, threshold
                )
                if value is not None:
                    per_trial.append(value)
            for rate in ("accuracy", "precision", "recall", "f1_score"):
                expected = sum(v[rate] for v in per_trial) / len(per_trial)
                got = results[f"{prefix}_{rate}@{threshold:g}"]
                assert got == pytest.approx(expected, abs=1e-12), (prefix, rate, threshold)


def test_novelty_detection_performance_by_hand():
    p0 = [0.6, 0.1, 0.7, 0.5, 0.2, 0.9]
    gt_novel = [0, 0, 1, 0, 1, 1]
    trial = make_trial([1, 2, 0, 3, 0, 0], 2, gt_novel=gt_novel, p_class=p_class_with_unknown_score(p0), trial_id="ndp")
    no_novelty = make_trial([1, 2], None, p_class=p_class_with_unknown_score([0.4, 0.8]), trial_id="ndp-none")
    r = program_metrics([trial, no_novelty])
    # ndp trial, predictions p0 >= 0.5: [1,0,1,1,0,1]
    # pre [1,0] vs [0,0]: TP 0 FP 1 TN 1 -> precision 0, recall 0 (0/0 -> 0), F1 0, accuracy 1/2
    # post [1,1,0,1] vs [1,0,1,1]: TP 2 FP 1 FN 1 TN 0 -> precision 2/3, recall 2/3, F1 2/3, accuracy 1/2
    # no-novelty trial, pre [0,1] vs [0,0]: FP 1 TN 1 -> accuracy 1/2, precision 0
    assert r["unknown_score_precision_post"] == pytest.approx(2 / 3)
    assert r["unknown_score_recall_post"] == pytest.approx(2 / 3)
    assert r["unknown_score_f1_post"] == pytest.approx(2 / 3)
    assert r["unknown_score_accuracy_post"] == pytest.approx(0.5)
    assert r["unknown_score_accuracy_pre"] == pytest.approx(0.5)
    # No novel sample ever comes before the red light: pre precision, recall and F1 would be 0 by construction
    # (sail-on-client reports 0), so they are N/A with that reason; pre accuracy is a real false-alarm measure.
    for name in ("unknown_score_precision_pre", "unknown_score_recall_pre", "unknown_score_f1_pre"):
        assert isinstance(r[name], NA) and "by construction" in r[name].reason, name
    single = novelty_detection_performance(gt_novel[2:], p0[2:], threshold=0.5)
    assert (single["tp"], single["fp"], single["fn"], single["tn"]) == (2, 1, 1, 0)


# --------------------------------------------------------------------------------------------------
# open set through program_metrics
# --------------------------------------------------------------------------------------------------


def test_open_set_through_program_metrics_by_hand():
    # 4 samples, p_class rows [p_unknown, p_1, p_2]:
    #   known class 1: [0.1, 0.8, 0.1]  -> correct, confidence 0.8
    #   known class 2: [0.3, 0.5, 0.2]  -> predicted 1, wrong, confidence 0.5
    #   novel:         [0.6, 0.3, 0.1]  -> confidence 0.3
    #   novel:         [0.3, 0.4, 0.3]  -> confidence 0.4
    p = [[0.1, 0.8, 0.1], [0.3, 0.5, 0.2], [0.6, 0.3, 0.1], [0.3, 0.4, 0.3]]
    trial = make_trial([1, 2, 0, 0], 2, p_class=p, trial_id="os")
    r = program_metrics([trial])
    # AUROC of p_unknown: novel {0.6, 0.3} vs known {0.1, 0.3}: pairs 1 + 1 + 1 + 1/2 = 3.5 / 4
    assert r["auroc_novel"] == pytest.approx(0.875)
    # AP: 0.6 -> P 1, R 1/2; 0.3 -> tp 2 fp 1: P 2/3, R 1; 0.1 -> no recall gain. AP = 1/2 + (1/2)(2/3) = 5/6
    assert r["aupr_novel"] == pytest.approx(5 / 6)
    # 95% TPR needs threshold 0.3: known at or above 0.3: 1 of 2
    assert r["fpr_at_95tpr"] == pytest.approx(0.5)
    # OSCR, confidences: known-correct 0.8, known-wrong 0.5, novel 0.4, 0.3
    # points (FPR, CCR): (0,0) (0,1/2) [0.8] (0,1/2) [0.5] (1/2,1/2) [0.4] (1,1/2) [0.3]
    # area = 1/2 * 1/2 + 1/2 * 1/2 = 1/2 (CCR never exceeds 1/2: one of the two known is wrong)
    assert r["oscr"] == pytest.approx(0.5)
    assert open_set_metrics([1, 2, 0, 0], [0, 0, 1, 1], p)["oscr"] == pytest.approx(0.5)
    # the known-class argmax ignores column 0 and breaks ties toward the lower column:
    # row [0.2, 0.4, 0.4] with class 2 is wrong (column 1 wins), with class 1 right
    tied = [[0.2, 0.4, 0.4], [0.2, 0.4, 0.4], [0.9, 0.05, 0.05]]
    # confidences 0.4 (known, wrong), 0.4 (known, right), 0.05 (novel): (0,0) -> (0,1/2) -> (1,1/2): 1/2
    assert open_set_metrics([2, 1, 0], [0, 0, 1], tied)["oscr"] == pytest.approx(0.5)


# --------------------------------------------------------------------------------------------------
# randomised: the vectorised program metrics against a plain loop
# --------------------------------------------------------------------------------------------------


def loop_rank(scores, g):
    order = sorted(range(len(scores)), key=lambda j: (-scores[j], j))  # ties: lower column first
    return order.index(g)


def loop_mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def loop_rate(num, den):
    return num / den if den else 0.0


def loop_program_metrics(trials, baseline, threshold, width, window):
    """METRICS.md section 1, one trial and one sample at a time. None = N/A."""
    out = {}
    per = {name: [] for name in ["d", "top1", "top3", "top1_pre", "top3_pre", "top1_post", "top3_post"]}
    cdt_fn, n_cdt, n_early, n_novel = [], 0, 0, 0
    ndp = {f"{r}_{s}": [] for r in ("precision", "recall", "f1", "accuracy") for s in ("pre", "post")}
    novel_in_segment = {"pre": 0, "post": 0}
    nrp = {1: [], 3: []}
    opti, apti = [], []
    batches = {}
    all_novel, all_p0, all_conf, all_correct = [], [], [], []
    for i, t in enumerate(trials):
        n = len(t.gt_class)
        rl = t.red_light
        pwc = list(t.p_world_changed)
        d = next((j for j in range(n) if pwc[j] >= threshold), None)
        if rl is not None:
            n_novel += 1
        if rl is not None and d is not None and d >= rl:
            n_cdt += 1
            cdt_fn.append(d - rl)
        if d is not None and (rl is None or d < rl):
            n_early += 1
        ranks = [loop_rank(list(t.p_class[j]), int(t.gt_class[j])) for j in range(n)]
        split = n if rl is None else rl
        for k in (1, 3):
            ok = [1.0 if r < k else 0.0 for r in ranks]
            per[f"top{k}"].append(sum(ok) / n)
            per[f"top{k}_pre"].append(sum(ok[:split]) / split if split else None)
            per[f"top{k}_post"].append(sum(ok[split:]) / (n - split) if n - split else None)
        for j in range(n):
            b = j // t.batch_size
            batches.setdefault(b, {}).setdefault(i, []).append(1.0 if ranks[j] == 0 else 0.0)
        for seg, lo, hi in (("pre", 0, split), ("post", split, n)):
            if hi <= lo:
                continue
            tp = fp = fn = tn = 0
            for j in range(lo, hi):
                pred = t.p_class[j][0] >= threshold
                truth = t.gt_novel[j] == 1
                tp += pred and truth
                fp += pred and not truth
                fn += (not pred) and truth
                tn += (not pred) and (not truth)
                novel_in_segment[seg] += truth
            precision, recall = loop_rate(tp, tp + fp), loop_rate(tp, tp + fn)
            ndp[f"precision_{seg}"].append(precision)
            ndp[f"recall_{seg}"].append(recall)
            ndp[f"f1_{seg}"].append(loop_rate(2 * precision * recall, precision + recall))
            ndp[f"accuracy_{seg}"].append((tp + tn) / (hi - lo))
        for j in range(n):
            all_novel.append(int(t.gt_novel[j]))
            all_p0.append(float(t.p_class[j][0]))
            known = list(t.p_class[j][1:])
            best = max(range(len(known)), key=lambda c: (known[c], -c))
            all_conf.append(known[best])
            all_correct.append(best + 1 == t.gt_class[j])
        if baseline is not None and rl is not None:
            bt = baseline[i]
            branks = [loop_rank(list(bt.p_class[j]), int(bt.gt_class[j])) for j in range(n)]
            window_idx = range(rl, n) if window == "post" else range(max(0, n - width), n)
            for k in (1, 3):
                pre = sum(1 for j in range(rl) if branks[j] < k) / rl if rl else 0.0
                if pre > 0:
                    nrp[k].append(100 * sum(1 for j in window_idx if ranks[j] < k) / len(window_idx) / pre)
            a = sum(1 for j in range(rl, n) if ranks[j] == 0) / (n - rl)
            b = sum(1 for j in range(rl, n) if branks[j] == 0) / (n - rl)
            if a + b > 0:
                opti.append(a / (a + b))
            tail = range(max(0, n - width), n)
            a = sum(1 for j in tail if ranks[j] == 0) / len(tail)
            b = sum(1 for j in tail if branks[j] == 0) / len(tail)
            if b > 0:
                apti.append(a / b)
    out["m1_mean_fn_cdt"] = loop_mean(cdt_fn)
    out["m2_cdt_pct"] = 100 * n_cdt / n_novel if n_novel else None
    out["m2_cdt_pct_all"] = 100 * n_cdt / len(trials)
    out["m21_fp_pct"] = 100 * n_early / len(trials)
    for name, values in per.items():
        if name != "d":
            out[name] = loop_mean(values)
    for name, values in ndp.items():
        rate, seg = name.split("_")
        # a segment without any novel sample: precision, recall and F1 are 0 by construction -> N/A
        out[f"unknown_score_{name}"] = None if rate != "accuracy" and novel_in_segment[seg] == 0 else loop_mean(values)
    if baseline is not None:
        out["nrp_top1"], out["nrp_top3"] = loop_mean(nrp[1]), loop_mean(nrp[3])
        out["m5_opti_top1"], out["m6_apti_top1"] = loop_mean(opti), loop_mean(apti)
        same = all(np.array_equal(a.p_class, b.p_class) for a, b in zip(trials, baseline))
        if same:  # the agent is the baseline: M5 = 0.5 and M6 = 1 by construction -> N/A
            out["m5_opti_top1"] = out["m6_apti_top1"] = None
    # open set, from the definitions (pairs, thresholds)
    pos = [s for s, v in zip(all_p0, all_novel) if v]
    neg = [s for s, v in zip(all_p0, all_novel) if not v]
    if pos and neg:
        out["auroc_novel"] = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in pos for b in neg) / (
            len(pos) * len(neg)
        )
        for t in sorted(set(all_p0), reverse=True):
            if sum(1 for s in pos if s >= t) / len(pos) >= 0.95:
                out["fpr_at_95tpr"] = sum(1 for s in neg if s >= t) / len(neg)
                break
        points = [(0.0, 0.0)]
        n_known = len(neg)
        for t in sorted(set(all_conf), reverse=True):
            ccr = sum(1 for c, v, ok in zip(all_conf, all_novel, all_correct) if not v and ok and c >= t) / n_known
            fpr = sum(1 for c, v in zip(all_conf, all_novel) if v and c >= t) / len(pos)
            points.append((fpr, ccr))
        out["oscr"] = sum((x1 - x0) * (y0 + y1) / 2 for (x0, y0), (x1, y1) in zip(points, points[1:]))
        if len(set(all_p0)) == 1:  # one score for every sample: nothing is ranked -> N/A
            out["auroc_novel"] = out["fpr_at_95tpr"] = None
        if len(set(all_conf)) == 1:
            out["oscr"] = None
    if pos:
        ap, prev_recall = 0.0, 0.0
        for t in sorted(set(all_p0), reverse=True):
            tp = sum(1 for s in pos if s >= t)
            fp = sum(1 for s in neg if s >= t)
            ap += (tp / len(pos) - prev_recall) * tp / (tp + fp)
            prev_recall = tp / len(pos)
        out["aupr_novel"] = None if neg and len(set(all_p0)) == 1 else ap
    series = [loop_mean([sum(v) / len(v) for v in batches[b].values()]) for b in sorted(batches)]
    return out, series


def random_trials(rng, n_trials, n_columns):
    agents, baselines = [], []
    for i in range(n_trials):
        n = int(rng.integers(1, 30))
        red_light = None if rng.random() < 0.25 else int(rng.integers(0, n))
        gt_novel = np.zeros(n, dtype=int)
        if red_light is not None:
            gt_novel[red_light:] = rng.random(n - red_light) < 0.6
            gt_novel[red_light] = 1
        gt_class = np.where(gt_novel == 1, 0, rng.integers(1, n_columns, n))
        batch_size = int(rng.integers(1, 6))
        for bucket in (agents, baselines):
            weights = rng.integers(0, 4, (n, n_columns)).astype(float)  # small integers: many ties
            weights[weights.sum(axis=1) == 0, 0] = 1.0
            p_class = weights / weights.sum(axis=1, keepdims=True)
            pwc = rng.integers(0, 11, n) / 10.0  # multiples of 0.1: thresholds hit exactly
            bucket.append(OndTrial(gt_class, gt_novel, red_light, pwc, p_class, batch_size, trial_id=f"r{i}"))
    return agents, baselines


@pytest.mark.parametrize("seed", range(6))
def test_vectorised_equals_plain_loop_on_random_trials(seed):
    rng = np.random.default_rng(seed)
    n_columns = int(rng.integers(2, 7))
    agents, baselines = random_trials(rng, 20, n_columns)
    threshold = [0.5, 0.3, 0.7, 0.4, 0.5, 0.2][seed]
    window = "post" if seed % 2 == 0 else "asymptotic"
    width = int(rng.integers(1, 15))
    condition = "system" if seed % 3 else "given"
    r = program_metrics(
        agents, baselines, threshold=threshold, asymptotic_width=width, nrp_window=window, condition=condition
    )
    expected, series = loop_program_metrics(agents, baselines, threshold, width, window)
    prefix = "m3" if condition == "system" else "m4"
    expected[f"{prefix}_nrp_top1"] = expected.pop("nrp_top1")
    expected[f"{prefix}_nrp_top3"] = expected.pop("nrp_top3")
    if condition == "given":  # the agent is told the red light: trial detection is not measured
        for name in ("m1_mean_fn_cdt", "m2_cdt_pct", "m2_cdt_pct_all", "m21_fp_pct"):
            expected[name] = None
    for name, value in expected.items():
        if value is None:
            assert isinstance(r[name], NA), name
        else:
            assert r[name] == pytest.approx(value, abs=1e-12), name
    assert r.series["top1_batch"].values == pytest.approx(series, abs=1e-12)


def test_grid_values_equal_single_threshold_runs():
    rng = np.random.default_rng(42)
    agents, _ = random_trials(rng, 20, 4)
    grid = program_metrics(agents, threshold_grid=True)
    table = detection_vs_threshold(agents)
    for t in (0.175, 0.3, 0.8):
        expected, _ = loop_program_metrics(agents, None, t, 100, "post")
        for name in (
            "m1_mean_fn_cdt",
            "m2_cdt_pct",
            "m21_fp_pct",
            "unknown_score_f1_post",
            "unknown_score_accuracy_pre",
        ):
            column = list(DETECTION_THRESHOLD_GRID).index(t)
            if expected[name] is None:
                assert isinstance(grid[f"{name}@{t:g}"], NA) and math.isnan(table[name][column])
            else:
                assert grid[f"{name}@{t:g}"] == pytest.approx(expected[name], abs=1e-12)
                assert table[name][column] == pytest.approx(expected[name], abs=1e-12)


# --------------------------------------------------------------------------------------------------
# declarations
# --------------------------------------------------------------------------------------------------


def test_every_reported_name_is_declared():
    declared = {s.name: s for s in SPECS}
    assert len(declared) == len(SPECS)
    agent3, baseline3 = zero_baseline_trial()
    for condition in ("system", "given"):
        r = program_metrics(
            accuracy_trials() + [agent3], baseline_trials() + [baseline3], condition=condition, threshold_grid=True
        )
        names = set(r.values) | set(r.na)
        assert names <= set(declared), names - set(declared)
        for name, value in r.values.items():
            low, high = declared[name].bounds
            assert low <= value <= high, name
    assert declared["m1_mean_fn_cdt"].direction == "minimize"
    assert declared["m21_fp_pct"].direction == "minimize"
    assert declared["m2_cdt_pct"].bounds == (0.0, 100.0)
    assert declared["m5_opti_top1"].bounds == (0.0, 1.0)
    assert declared["m3_nrp_top1"].direction == "maximize" and declared["m3_nrp_top1"].bounds[1] == math.inf
    assert all(s.protocol == "ond" for s in SPECS)


# --------------------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------------------

GOOD = dict(
    gt_class=[1, 0, 2],
    gt_novel=[0, 1, 0],
    red_light=1,
    p_world_changed=[0.1, 0.5, 0.9],
    p_class=[[0.2, 0.5, 0.3], [0.6, 0.2, 0.2], [0.1, 0.1, 0.8]],
    batch_size=2,
    trial_id="trial-7",
)


def bad(**changes):
    return {**GOOD, **changes}


@pytest.mark.parametrize(
    "fields, array, detail",
    [
        (bad(p_class=[[0.2, 0.5, 0.3], [0.6, 0.2, 0.2]]), "p_class", "shape"),
        (bad(p_world_changed=[0.1, 0.5]), "p_world_changed", "shape"),
        (bad(gt_novel=[[0, 1, 0]]), "gt_novel", "1-D"),
        (bad(p_world_changed=[0.1, float("nan"), 0.9]), "p_world_changed", "NaN at sample 1 (batch 0"),
        (
            bad(p_class=[[0.2, 0.5, 0.3], [0.6, 0.2, 0.2], [0.1, float("nan"), 0.8]]),
            "p_class",
            "NaN at sample 2 (batch 1",
        ),
        (bad(p_world_changed=[0.1, 1.5, 0.9]), "p_world_changed", "outside [0, 1]"),
        (bad(p_class=[[0.2, 0.5, 0.3], [1.2, -0.2, 0.0], [0.1, 0.1, 0.8]]), "p_class", "outside [0, 1]"),
        (bad(p_class=[[0.2, 0.5, 0.3], [0.6, 0.2, 0.2], [0.1, 0.1, 0.7]]), "p_class", "sum to 1"),
        (bad(gt_novel=[0, 2, 0]), "gt_novel", "0/1"),
        (bad(gt_class=[1, 0, 3]), "gt_class", "[0, 2]"),
        (bad(red_light=2), "red_light", "first novel sample"),
        (bad(red_light=None), "red_light", "first novel sample"),
        (bad(batch_size=0), "batch_size", "positive"),
    ],
)
def test_bad_trial_names_the_trial_and_array(fields, array, detail):
    with pytest.raises(MetricInputError) as error:
        OndTrial(**fields)
    message = str(error.value)
    assert "trial-7" in message and array in message and detail in message, message


def test_rows_within_tolerance_are_accepted():
    OndTrial(**bad(p_class=[[0.2, 0.5, 0.3 + 5e-7], [0.6, 0.2, 0.2], [0.1, 0.1, 0.8]]))
    with pytest.raises(MetricInputError, match="sum to 1"):
        OndTrial(**bad(p_class=[[0.2, 0.5, 0.3 + 2e-6], [0.6, 0.2, 0.2], [0.1, 0.1, 0.8]]))


def test_baseline_must_be_aligned():
    agents = accuracy_trials()
    with pytest.raises(MetricInputError, match="2 agent trials"):
        program_metrics(agents, baseline_trials()[:1])
    other_gt = make_trial([1, 2, 3, 0, 0, 1], 3, n_columns=5, trial_id="T1")
    with pytest.raises(MetricInputError, match=r"baseline\[0\].*gt_class.*sample 5"):
        program_metrics(agents, [other_gt, baseline_trials()[1]])
    shorter = make_trial([1, 1], None, n_columns=5, trial_id="T2")
    with pytest.raises(MetricInputError, match=r"baseline\[1\].*length"):
        program_metrics(agents, [baseline_trials()[0], shorter])


@pytest.mark.parametrize(
    "options, needle",
    [
        (dict(nrp_window="last"), "nrp_window"),
        (dict(condition="oracle"), "condition"),
        (dict(threshold=1.5), "threshold"),
        (dict(asymptotic_width=0), "asymptotic_width"),
    ],
)
def test_bad_options(options, needle):
    with pytest.raises(MetricInputError, match=needle):
        program_metrics(accuracy_trials(), **options)


def test_bad_trial_lists():
    with pytest.raises(MetricInputError, match="at least one"):
        program_metrics([])
    with pytest.raises(MetricInputError, match=r"trials\[1\]"):
        program_metrics([accuracy_trials()[0], "not a trial"])
    with pytest.raises(MetricInputError, match="columns"):
        program_metrics([accuracy_trials()[0], make_trial([1, 2], None, n_columns=4)])


# --------------------------------------------------------------------------------------------------
# agreement with the reference where METRICS.md does not change the number (only if installed)
# --------------------------------------------------------------------------------------------------


def test_agrees_with_sail_on_client_on_ordinary_inputs():
    reference = pytest.importorskip("sail_on_client.evaluate.metrics")
    utils = pytest.importorskip("sail_on_client.evaluate.utils")
    rng = np.random.default_rng(7)
    for _ in range(10):
        n, red_light = 50, int(rng.integers(5, 45))
        gt_novel = np.zeros(n, dtype=int)
        gt_novel[red_light:] = rng.random(n - red_light) < 0.5
        gt_novel[red_light] = 1
        gt_class = np.where(gt_novel == 1, 0, rng.integers(1, 6, n))
        p_class = rng.dirichlet(np.ones(6), n)  # continuous: no ties, no score exactly at a threshold
        pwc = rng.random(n)
        # detection index: reference is 1-based, N + 1 for "never"
        first = reference.m_num_stats(pwc, gt_novel)["P_indx_0.5"]
        ours = detection_index(pwc, threshold=0.5)
        assert first == (n + 1 if ours is None else ours + 1)
        # top-k on any slice (the reference rounds to 5 decimals)
        for k in (1, 3):
            assert top_k_accuracy(gt_class, p_class, k=k) == pytest.approx(
                utils.topk_accuracy(p_class, gt_class, k=k), abs=5e-6
            )
        # per-sample detection after the red light
        ndp = reference.m_ndp(p_class[:, 0], gt_novel, mode="post_novelty")
        mine = novelty_detection_performance(gt_novel[red_light:], p_class[red_light:, 0], threshold=0.5)
        for rate, key in (
            ("precision", "precision_0.5"),
            ("recall", "recall_0.5"),
            ("f1", "f1_score_0.5"),
            ("accuracy", "accuracy_0.5"),
        ):
            assert mine[rate] == pytest.approx(ndp[key], abs=5e-6)
        # sail-on-client's m_ndp on P(world changed) (our m_ndp_* names), one trial
        trial = make_trial(gt_class, red_light, pwc=pwc, p_class=p_class, gt_novel=gt_novel)
        results = program_metrics([trial])
        for mode, prefix in (("full_test", "m_ndp"), ("pre_novelty", "m_ndp_pre"), ("post_novelty", "m_ndp_post")):
            expected = reference.m_ndp(pwc, gt_novel, mode=mode)
            for rate in ("accuracy", "precision", "recall", "f1_score"):
                value = results[f"{prefix}_{rate}"]
                if isinstance(value, NA):  # pre-novelty precision/recall/F1: 0 by construction in the reference
                    assert expected[f"{rate}_0.5"] == 0 and "by construction" in value.reason
                else:
                    assert value == pytest.approx(expected[f"{rate}_0.5"], abs=5e-6)


def test_m_ndp_equals_sail_on_client_on_ties_and_edge_trials():
    """Scores on a 0.1 grid (exactly at thresholds), trials without novelty and made only of novel samples,
    every threshold of the grid: our m_ndp_* of one trial equal the reference's m_ndp (rounded to 5 decimals)."""
    reference = pytest.importorskip("sail_on_client.evaluate.metrics")
    rng = np.random.default_rng(11)
    for t in range(30):
        n = int(rng.integers(2, 15))
        red = [None, 0, int(rng.integers(1, n))][t % 3]
        gt_novel = np.zeros(n, dtype=int)
        if red is not None:
            gt_novel[red:] = 1 if t % 2 else rng.random(n - red) < 0.5
            gt_novel[red] = 1
        if red == 0 and not gt_novel.all():
            continue  # empty pre-novelty segment: the reference divides 0 by 0 (left out of ours)
        pwc = np.round(rng.random(n) * 10) / 10
        trial = make_trial(np.where(gt_novel == 1, 0, 1), red, pwc=pwc, gt_novel=gt_novel)
        results = program_metrics([trial], threshold_grid=True)
        for mode, prefix in (("full_test", "m_ndp"), ("pre_novelty", "m_ndp_pre"), ("post_novelty", "m_ndp_post")):
            expected = reference.m_ndp(pwc, gt_novel, mode=mode)
            for threshold in DETECTION_THRESHOLD_GRID:
                for rate in ("accuracy", "precision", "recall", "f1_score"):
                    value, theirs = results[f"{prefix}_{rate}@{threshold:g}"], expected[f"{rate}_{threshold}"]
                    if theirs == -1:  # post-novelty of a trial without novelty
                        assert isinstance(value, NA), (prefix, rate, threshold)
                    elif isinstance(value, NA):  # 0 by construction: no novel sample in the segment
                        assert theirs == 0 and "by construction" in value.reason
                    else:
                        assert value == pytest.approx(theirs, abs=5e-6), (t, prefix, rate, threshold)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the reference's 0/0 on an empty pre-novelty segment
def test_many_trials_agree_with_sail_on_client_per_trial_then_averaged():
    """Several trials of 1..29 samples at once (one sample, no novelty, only novel samples, the red light on the
    first or the last sample, scores on a 1/40 grid and exactly at each threshold): every m_ndp_* at every
    threshold is the mean over trials of sail-on-client's ``m_ndp`` of each trial; M2 and M2.1 are its
    ``m_num_stats`` + ``m_is_cdt_and_is_early`` with the documented last-sample fix, M1 the mean of
    P_indx - GT_indx over those trials; top-1/top-3 on [0, N), [0, red_light) and [red_light, N) are its
    ``topk_accuracy`` on the same rows (continuous scores: no ties, where METRICS.md differs)."""
    reference = pytest.importorskip("sail_on_client.evaluate.metrics")
    utils = pytest.importorskip("sail_on_client.evaluate.utils")
    image = pytest.importorskip("sail_on_client.evaluate.image_classification")
    rng = np.random.default_rng(2026)
    for case in range(40):
        trials, raw = [], []
        k = int(rng.integers(2, 12))
        for t in range(int(rng.integers(1, 6))):
            n = int(rng.integers(1, 30))
            gt_novel = np.zeros(n, dtype=int)
            kind = (case + t) % 5
            if kind == 1:
                gt_novel[:] = 1
            elif kind >= 2:
                red = [0, n - 1, int(rng.integers(0, n))][kind - 2]
                gt_novel[red:] = rng.random(n - red) < 0.6
                gt_novel[red] = 1
            red = int(np.flatnonzero(gt_novel)[0]) if gt_novel.any() else None
            gt_class = np.where(gt_novel == 1, 0, rng.integers(1, k + 1, n))
            pwc = np.round(rng.random(n) * 40) / 40
            pwc[rng.random(n) < 0.3] = rng.choice(DETECTION_THRESHOLD_GRID)
            p_class = rng.dirichlet(np.ones(k + 1), n)
            trials.append(make_trial(gt_class, red, pwc=pwc, p_class=p_class, gt_novel=gt_novel, trial_id=str(t)))
            raw.append((gt_class, gt_novel, red, pwc, p_class))
        results = program_metrics(trials, threshold_grid=True)
        ndp = [
            {m: reference.m_ndp(r[3], r[1], mode=m) for m in ("full_test", "pre_novelty", "post_novelty")} for r in raw
        ]
        stats_of = [reference.m_num_stats(r[3], r[1]) for r in raw]
        for threshold in DETECTION_THRESHOLD_GRID:
            for mode, prefix in (("full_test", "m_ndp"), ("pre_novelty", "m_ndp_pre"), ("post_novelty", "m_ndp_post")):
                for rate in ("accuracy", "precision", "recall", "f1_score"):
                    theirs = []
                    for (_, gt_novel, red, pwc, _), by_mode in zip(raw, ndp):
                        if mode == "post_novelty" and red is None:
                            continue  # the reference's -1
                        if mode == "pre_novelty" and red == 0 and not gt_novel.all():
                            continue  # empty segment: the reference divides 0 by 0; left out of ours (METRICS.md)
                        theirs.append(by_mode[mode][f"{rate}_{threshold}"])
                    value = results[f"{prefix}_{rate}@{threshold:g}"]
                    if isinstance(value, NA):
                        assert not theirs or not any(theirs), (case, prefix, rate, threshold)
                    else:
                        assert value == pytest.approx(np.mean(theirs), abs=5e-6), (case, prefix, rate, threshold)
            cdt, early, delay = [], [], []
            for (_, gt_novel, _, pwc, _), stats in zip(raw, stats_of):
                gt_index, p_index = stats["GT_indx"], stats[f"P_indx_{threshold}"]
                flags = image.ImageClassificationMetrics.m_is_cdt_and_is_early(None, gt_index, p_index, len(pwc))
                # METRICS.md: a detection on the last sample is a CDT (the reference requires P_indx < N)
                is_cdt = bool(flags["Is CDT"]) or (gt_novel.any() and p_index == len(pwc))
                cdt.append(is_cdt)
                early.append(bool(flags["Is Early"]))
                if is_cdt:
                    delay.append(p_index - gt_index)
            n_novel = sum(g.any() for _, g, _, _, _ in raw)
            if n_novel:
                assert results[f"m2_cdt_pct@{threshold:g}"] == pytest.approx(100 * sum(cdt) / n_novel)
            assert results[f"m21_fp_pct@{threshold:g}"] == pytest.approx(100 * sum(early) / len(raw))
            m1 = results[f"m1_mean_fn_cdt@{threshold:g}"]
            assert isinstance(m1, NA) if not delay else m1 == pytest.approx(np.mean(delay))
        for top in (1, 3):
            for segment in ("", "_pre", "_post"):
                theirs = []
                for gt_class, _, red, _, p_class in raw:
                    n = gt_class.size
                    lo, hi = {
                        "": (0, n),
                        "_pre": (0, n if red is None else red),
                        "_post": (n if red is None else red, n),
                    }[segment]
                    if hi > lo:
                        theirs.append(utils.topk_accuracy(p_class[lo:hi], gt_class[lo:hi], k=top))
                value = results[f"top{top}{segment}"]
                if theirs:
                    assert value == pytest.approx(np.mean(theirs), abs=5e-6), (case, top, segment)
                else:
                    assert isinstance(value, NA)
