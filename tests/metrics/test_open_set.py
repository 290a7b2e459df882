"""Open-set metrics: hand cases, plain-loop definitions and sklearn."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

from owl_eval.metrics.results import NA
from owl_eval.metrics.validation import MetricInputError
from owl_eval.protocols.ond.metrics.open_set import auroc, average_precision, fpr_at_tpr, novelty_score_metrics, oscr

# ---- plain definitions, one sample or one pair at a time ----------------------------------------


def auroc_by_pairs(y, s):
    """P(novel scored above known) + 1/2 P(tie), by counting every (novel, known) pair."""
    wins = 0.0
    pairs = 0
    for yi, si in zip(y, s):
        for yj, sj in zip(y, s):
            if yi == 1 and yj == 0:
                pairs += 1
                wins += 1.0 if si > sj else 0.5 if si == sj else 0.0
    return wins / pairs


def fpr_at_tpr_by_thresholds(y, s, tpr):
    """Try thresholds from the highest score down; stop at the first whose TPR reaches ``tpr``."""
    n_pos = sum(y)
    n_neg = len(y) - n_pos
    for t in sorted(set(s), reverse=True):
        tp = sum(1 for yi, si in zip(y, s) if yi == 1 and si >= t)
        if tp / n_pos >= tpr:
            return sum(1 for yi, si in zip(y, s) if yi == 0 and si >= t) / n_neg
    raise AssertionError("unreachable")


def oscr_by_thresholds(novel, conf, correct):
    """CCR/FPR at every distinct threshold (plus 'accept nothing'), trapezoids between them."""
    n_known = sum(1 for v in novel if not v)
    n_novel = len(novel) - n_known
    points = [(0.0, 0.0)]
    for t in sorted(set(conf), reverse=True):
        ccr = sum(1 for v, c, ok in zip(novel, conf, correct) if not v and ok and c >= t) / n_known
        fpr = sum(1 for v, c in zip(novel, conf) if v and c >= t) / n_novel
        points.append((fpr, ccr))
    return sum((x1 - x0) * (y0 + y1) / 2 for (x0, y0), (x1, y1) in zip(points, points[1:]))


# ---- AUROC ---------------------------------------------------------------------------------------


def test_auroc_ties_count_one_half_by_hand():
    # novel 0.8, 0.5; known 0.5, 0.2: pairs (0.8>0.5)=1, (0.8>0.2)=1, (0.5==0.5)=1/2, (0.5>0.2)=1 -> 3.5/4
    assert auroc([1, 1, 0, 0], [0.8, 0.5, 0.5, 0.2]) == pytest.approx(0.875, abs=1e-15)
    # everything tied: every pair is one half
    assert auroc([1, 0, 1, 0], [0.3, 0.3, 0.3, 0.3]) == pytest.approx(0.5, abs=1e-15)
    # perfect and inverted rankings
    assert auroc([1, 0], [0.9, 0.1]) == 1.0
    assert auroc([1, 0], [0.1, 0.9]) == 0.0


def test_auroc_matches_pair_count_and_sklearn_on_random_ties():
    rng = np.random.default_rng(3)
    for _ in range(20):
        n = int(rng.integers(2, 60))
        y = rng.integers(0, 2, n)
        y[0], y[1] = 0, 1
        s = rng.integers(0, 5, n) / 4.0  # few distinct values: many ties
        assert auroc(y, s) == pytest.approx(auroc_by_pairs(y.tolist(), s.tolist()), abs=1e-12)
        assert auroc(y, s) == pytest.approx(roc_auc_score(y, s), abs=1e-12)


def test_auroc_is_na_with_one_class():
    result = auroc([0, 0, 0], [0.1, 0.2, 0.3])
    assert isinstance(result, NA) and "novel" in result.reason
    assert isinstance(auroc([1, 1], [0.1, 0.2]), NA)


# ---- average precision ---------------------------------------------------------------------------


def test_average_precision_by_hand():
    # thresholds 0.9: P=1 R=1/2; 0.8: P=1/2 R=1/2; 0.7: P=2/3 R=1; 0.1: P=1/2 R=1
    # AP = (1/2)(1) + 0 + (1/2)(2/3) + 0 = 5/6
    assert average_precision([1, 0, 1, 0], [0.9, 0.8, 0.7, 0.1]) == pytest.approx(5 / 6, abs=1e-15)
    # a tie group moves at once: 0.5 -> tp 1 fp 1 (P 1/2, R 1/2); 0.2 -> P 2/3, R 1: AP = 1/4 + 1/3
    assert average_precision([1, 0, 1], [0.5, 0.5, 0.2]) == pytest.approx(7 / 12, abs=1e-15)


def test_average_precision_matches_sklearn():
    rng = np.random.default_rng(5)
    for _ in range(20):
        n = int(rng.integers(2, 80))
        y = rng.integers(0, 2, n)
        y[0] = 1
        s = np.round(rng.random(n), 1)
        assert average_precision(y, s) == pytest.approx(average_precision_score(y, s), abs=1e-12)


def test_average_precision_na_without_positives():
    assert isinstance(average_precision([0, 0], [0.2, 0.4]), NA)


# ---- FPR at 95% TPR -------------------------------------------------------------------------------


def test_fpr_at_95tpr_by_hand_with_ties():
    # 20 novel: 19 at 0.9 and 1 at 0.1 -> threshold 0.9 already catches 19/20 = 95%.
    # known: 2 tied at 0.9 (count as false positives), 3 at 0.5, 5 at 0.05 -> FPR = 2/10
    y = [1] * 20 + [0] * 10
    s = [0.9] * 19 + [0.1] + [0.9] * 2 + [0.5] * 3 + [0.05] * 5
    assert fpr_at_tpr(y, s, tpr=0.95) == pytest.approx(0.2, abs=1e-15)
    # 10 novel: 9 at 0.9 (TPR 0.9 < 0.95), 1 at 0.3 -> threshold 0.3; known 0.3, 0.3 (ties count), 0.1, 0.1
    y = [1] * 10 + [0] * 4
    s = [0.9] * 9 + [0.3] + [0.3, 0.3, 0.1, 0.1]
    assert fpr_at_tpr(y, s, tpr=0.95) == pytest.approx(0.5, abs=1e-15)


def test_fpr_at_tpr_matches_threshold_loop():
    rng = np.random.default_rng(11)
    for _ in range(20):
        n = int(rng.integers(2, 70))
        y = rng.integers(0, 2, n)
        y[0], y[1] = 0, 1
        s = rng.integers(0, 8, n) / 7.0
        for tpr in (0.95, 0.5, 1.0):
            assert fpr_at_tpr(y, s, tpr=tpr) == pytest.approx(
                fpr_at_tpr_by_thresholds(y.tolist(), s.tolist(), tpr), abs=1e-12
            )


def test_novelty_score_metrics_equal_the_single_functions():
    y = [1, 0, 1, 1, 0, 0, 1]
    s = [0.2, 0.4, 0.4, 0.9, 0.1, 0.4, 0.7]
    combined = novelty_score_metrics(y, s)
    assert combined["auroc"] == auroc(y, s)
    assert combined["average_precision"] == average_precision(y, s)
    assert combined["fpr_at_tpr"] == fpr_at_tpr(y, s)


# ---- OSCR ----------------------------------------------------------------------------------------


def test_oscr_by_hand():
    # known A conf 0.9 correct, known B conf 0.5 correct, novel C 0.7, novel D 0.3
    # points (FPR, CCR): (0,0) (0,.5) (.5,.5) (.5,1) (1,1) -> area .25 + .5 = .75
    assert oscr([0, 0, 1, 1], [0.9, 0.5, 0.7, 0.3], [1, 1, 0, 0]) == pytest.approx(0.75, abs=1e-15)
    # same but B misclassified: CCR never exceeds 1/2 -> area .5 * .5 + .5 * .5 = .5
    assert oscr([0, 0, 1, 1], [0.9, 0.5, 0.7, 0.3], [1, 0, 0, 0]) == pytest.approx(0.5, abs=1e-15)
    # a correct known and a novel tied: one diagonal step from (0,0) to (1,1) -> 1/2
    assert oscr([0, 1], [0.8, 0.8], [1, 0]) == pytest.approx(0.5, abs=1e-15)
    # perfect separation and classification
    assert oscr([0, 0, 1], [0.9, 0.8, 0.1], [1, 1, 0]) == 1.0


def test_oscr_matches_threshold_loop():
    rng = np.random.default_rng(13)
    for _ in range(20):
        n = int(rng.integers(2, 60))
        novel = rng.integers(0, 2, n)
        novel[0], novel[1] = 0, 1
        conf = rng.integers(0, 6, n) / 5.0
        correct = rng.integers(0, 2, n)
        assert oscr(novel, conf, correct) == pytest.approx(
            oscr_by_thresholds(novel.tolist(), conf.tolist(), correct.tolist()), abs=1e-12
        )


def test_oscr_na_without_novel_samples():
    assert isinstance(oscr([0, 0], [0.5, 0.6], [1, 1]), NA)


# ---- input validation ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call, needle",
    [
        (lambda: auroc([1, 0, 2], [0.1, 0.2, 0.3]), "y_true"),
        (lambda: auroc([1, 0], [0.1, float("nan")]), "y_score"),
        (lambda: average_precision([1, 0], [0.1, 0.2, 0.3]), "y_score"),
        (lambda: fpr_at_tpr([1, 0], [0.1, 0.2], tpr=0), "tpr"),
        (lambda: oscr([1, 0], [0.1, 0.2], [1]), "correct"),
        (lambda: auroc([[1, 0]], [[0.1, 0.2]]), "y_true"),
    ],
)
def test_bad_input_names_the_argument(call, needle):
    with pytest.raises(MetricInputError, match=needle):
        call()


def test_ties_are_order_independent():
    # permuting the samples must not change any value (tie groups move together)
    y = np.array([1, 0, 1, 0, 1, 0, 0])
    s = np.array([0.5, 0.5, 0.5, 0.2, 0.9, 0.9, 0.1])
    correct = np.array([0, 1, 0, 1, 0, 0, 1])
    reference = (auroc(y, s), average_precision(y, s), fpr_at_tpr(y, s), oscr(y, s, correct))
    for perm in itertools.islice(itertools.permutations(range(7)), 0, 5040, 97):
        p = list(perm)
        assert (
            auroc(y[p], s[p]),
            average_precision(y[p], s[p]),
            fpr_at_tpr(y[p], s[p]),
            oscr(y[p], s[p], correct[p]),
        ) == pytest.approx(reference, abs=1e-12)


def test_scores_outside_unit_interval_and_negative_zero():
    # the fast path packs scores in [0, 1] into sort keys; anything else takes the argsort path:
    # both must give the definitions' numbers
    rng = np.random.default_rng(17)
    for _ in range(10):
        n = int(rng.integers(2, 50))
        y = rng.integers(0, 2, n)
        y[0], y[1] = 0, 1
        logits = rng.integers(-3, 4, n) * 2.5  # outside [0, 1], with ties
        assert auroc(y, logits) == pytest.approx(auroc_by_pairs(y.tolist(), logits.tolist()), abs=1e-12)
        assert average_precision(y, logits) == pytest.approx(average_precision_score(y, logits), abs=1e-12)
        correct = rng.integers(0, 2, n)
        assert oscr(y, logits, correct) == pytest.approx(
            oscr_by_thresholds(y.tolist(), logits.tolist(), correct.tolist()), abs=1e-12
        )
    # -0.0 == 0.0: one tie group, not two
    assert auroc([1, 0], [-0.0, 0.0]) == 0.5
    assert oscr([0, 1], [0.0, -0.0], [1, 0]) == 0.5
