"""Open-set hand cases not in test_open_set.py / test_ond.py: samples pooled over several trials (one
without novelty), ties that mix novel and known samples inside one group, p_unknown tied with the
true class's score, and constant scores (the closed-world baseline), which rank nothing."""

from __future__ import annotations

import pytest

from owl_eval.metrics.results import NA
from owl_eval.protocols.ond.metrics import OndTrial, program_metrics
from owl_eval.protocols.ond.metrics.open_set import auroc, fpr_at_tpr, oscr


def trial(gt_class, p_class, trial_id):
    gt_novel = [1 if g == 0 else 0 for g in gt_class]
    red = gt_novel.index(1) if 1 in gt_novel else None
    return OndTrial(
        gt_class=gt_class,
        gt_novel=gt_novel,
        red_light=red,
        p_world_changed=[0.0] * len(gt_class),
        p_class=p_class,
        batch_size=2,
        trial_id=trial_id,
    )


def test_open_set_pooled_over_trials_with_mixed_tie_groups():
    # rows [p_unknown, p_1, p_2]                   known-class prediction (argmax of p_1, p_2; ties -> column 1)
    a = trial(
        [1, 2, 0, 0],
        [
            [0.2, 0.7, 0.1],  # A0 known 1: predicts 1, right, confidence 0.7
            [0.4, 0.2, 0.4],  # A1 known 2: predicts 2, right (p_unknown ties p_2: irrelevant), conf 0.4
            [0.4, 0.3, 0.3],  # A2 novel, confidence 0.3
            [0.7, 0.2, 0.1],
        ],
        "A",
    )  # A3 novel, confidence 0.2
    b = trial(
        [1, 2],
        [
            [0.7, 0.2, 0.1],  # B0 known 1: predicts 1, right, confidence 0.2
            [0.2, 0.5, 0.3],
        ],
        "B",
    )  # B1 known 2: predicts 1, wrong, confidence 0.5
    r = program_metrics([a, b])
    # AUROC on p_unknown, all 6 samples (B has no novelty: its samples are known negatives)
    #   novel {0.7, 0.4}, known {0.2, 0.4, 0.7, 0.2}
    #   0.7: beats 0.2, 0.4, 0.2 (3) + tie 0.7 (1/2) = 3.5;  0.4: beats 0.2, 0.2 (2) + tie 0.4 (1/2) = 2.5
    #   (3.5 + 2.5) / (2 * 4) = 0.75
    assert r["auroc_novel"] == pytest.approx(0.75, abs=1e-12)
    # AP: threshold 0.7 takes {A3 novel, B0 known}: P 1/2, R 1/2; 0.4 takes {A1 known, A2 novel}: P 2/4, R 1
    #   AP = (1/2)(1/2) + (1/2)(1/2) = 1/2
    assert r["aupr_novel"] == pytest.approx(0.5, abs=1e-12)
    # 95% TPR needs both novel -> threshold 0.4; known at or above 0.4: A1 (0.4), B0 (0.7) -> 2/4
    assert r["fpr_at_95tpr"] == pytest.approx(0.5, abs=1e-12)
    # OSCR on confidence = max(p_1, p_2); 4 known (A0, A1, B0 right; B1 wrong), 2 novel
    #   0.7 A0 -> (FPR 0, CCR 1/4); 0.5 B1 wrong -> (0, 1/4); 0.4 A1 -> (0, 2/4); 0.3 A2 -> (1/2, 2/4);
    #   0.2 {A3 novel, B0 right} one group -> (1, 3/4): a diagonal
    #   area = (1/2)(2/4) + (1/2)(2/4 + 3/4)/2 = 1/4 + 5/16 = 9/16
    assert r["oscr"] == pytest.approx(9 / 16, abs=1e-12)
    # the same samples in one trial give the same pooled values (order does not matter)
    one = trial(
        [1, 1, 2, 0, 2, 0],
        [[0.7, 0.2, 0.1], [0.2, 0.7, 0.1], [0.2, 0.5, 0.3], [0.7, 0.2, 0.1], [0.4, 0.2, 0.4], [0.4, 0.3, 0.3]],
        "one",
    )
    pooled = program_metrics([one])
    for name, value in (("auroc_novel", 0.75), ("aupr_novel", 0.5), ("fpr_at_95tpr", 0.5), ("oscr", 9 / 16)):
        assert pooled[name] == pytest.approx(value, abs=1e-12), name


def test_oscr_one_tie_group_with_right_wrong_and_novel():
    # known right 0.5, known wrong 0.5, novel 0.5, novel 0.1 (2 known, 2 novel)
    #   0.5 group: CCR 1/2 (the wrong one never counts), FPR 1/2 -> diagonal from (0, 0): (1/2)(1/2)/2 = 1/8
    #   0.1: FPR 1, CCR 1/2 -> (1/2)(1/2) = 1/4;  total 3/8
    assert oscr([0, 0, 1, 1], [0.5, 0.5, 0.5, 0.1], [1, 0, 0, 0]) == pytest.approx(3 / 8, abs=1e-15)


def test_constant_unknown_score_is_not_a_measurement():
    # the closed-world baseline: p_unknown = 0 everywhere, so every sample is in one tie group and the
    # novelty-score metrics are fixed by construction (AUROC 1/2, AP = 2 novel of 5, FPR@95TPR 1): N/A
    t = trial(
        [1, 2, 0, 2, 0], [[0.0, 0.9, 0.1], [0.0, 0.3, 0.7], [0.0, 0.6, 0.4], [0.0, 0.8, 0.2], [0.0, 0.5, 0.5]], "c"
    )
    r = program_metrics([t])
    for name in ("auroc_novel", "aupr_novel", "fpr_at_95tpr"):
        assert isinstance(r[name], NA) and "is 0 for all 5 samples" in r[name].reason, name
    # OSCR ranks by the known-class confidence, which varies: a measurement.
    #   confidences known 0.9 (right), 0.7 (right), 0.8 (class 2 predicted 1: wrong); novel 0.6, 0.5
    #   0.9 -> (0, 1/3); 0.8 wrong -> (0, 1/3); 0.7 -> (0, 2/3); 0.6 -> (1/2, 2/3); 0.5 -> (1, 2/3)
    #   area = 1 * 2/3
    assert r["oscr"] == pytest.approx(2 / 3, abs=1e-12)
    # the plain functions keep sklearn's numbers on a constant score (roc_curve gives FPR 1 at TPR 1)
    assert fpr_at_tpr([0, 1, 0], [0.0, 0.0, 0.0]) == 1.0
    assert auroc([0, 1, 0], [0.3, 0.3, 0.3]) == 0.5


def test_constant_known_class_confidence_has_no_oscr():
    # every row [p_u, 0.5, 0.5 - p_u]: confidence 0.5 everywhere -> OSCR would be accuracy / 2; p_unknown varies
    t = trial([1, 0, 1, 0], [[0.1, 0.5, 0.4], [0.4, 0.5, 0.1], [0.2, 0.5, 0.3], [0.3, 0.5, 0.2]], "flat")
    r = program_metrics([t])
    assert isinstance(r["oscr"], NA) and "OSCR would be the closed-set accuracy / 2" in r["oscr"].reason
    # novel scores 0.4, 0.3 both above known 0.1, 0.2: AUROC 1
    assert r["auroc_novel"] == 1.0
