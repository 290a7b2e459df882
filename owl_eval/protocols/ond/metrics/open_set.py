"""Open-set recognition metrics: novelty scores against novel/known labels, vectorised numpy.

Conventions (OpenOOD and the open-set literature): novel samples are the *positives*, a higher score
means "more novel". Every function validates its inputs first and returns :class:`~owl_eval.metrics.results.NA`
with a reason when the value is undefined (e.g. no novel or no known sample), instead of raising.

All curve metrics share one sort: samples are ordered by score, tied scores form one group, and the
curve moves by a whole group at a time (so tied samples are neither ordered arbitrarily nor split).
"""

from __future__ import annotations

import numpy as np

from owl_eval.metrics.results import NA
from owl_eval.metrics.validation import MetricInputError, as_array, check_same_shape
from owl_eval.protocols.ond.metrics.declared import OND
from owl_eval.protocols.ond.metrics.flat import FlatTrials

__all__ = ["auroc", "average_precision", "fpr_at_tpr", "oscr", "novelty_score_metrics", "binary_curve_counts"]


def _labels_and_scores(y_true, y_score, *, names=("y_true", "y_score")):
    labels = as_array(names[0], y_true, ndim=1, dtype=np.float64, allow_nan=False)
    if not np.isin(labels, (0.0, 1.0)).all():
        bad = labels[~np.isin(labels, (0.0, 1.0))][0]
        raise MetricInputError(f"{names[0]}: expected 0/1 labels (1 = novel), got {bad!r}")
    scores = as_array(names[1], y_score, ndim=1, finite=True)
    check_same_shape(names, (labels, scores))
    return labels.astype(bool), scores


def sort_descending_with_flags(score: np.ndarray, flags: np.ndarray, n_bits: int):
    """Sort ``score`` from high to low carrying small integer ``flags`` (< 2**n_bits) along.

    Returns (sorted scores, sorted flags, index of the last element of every tie group). The order of
    samples inside a tie group is unspecified: callers only read cumulative counts at group ends.

    Why not ``argsort``: for scores in [0, 1] the bit pattern of a non-negative float64, read as an
    unsigned integer, orders exactly like the float, and stays below 2**62; shifted left by
    ``n_bits`` <= 2 it still fits in 64 bits with the flags in the low bits. One ``np.sort`` of those
    keys (SIMD-accelerated) replaces ``argsort`` plus two gathers, about 3x faster on 10**6 samples.
    Other scores fall back to ``argsort``.
    """
    if n_bits > 2:
        raise ValueError("at most 2 flag bits fit next to a float64 in [0, 1]")
    if score.size and score.min() >= 0.0 and score.max() <= 1.0:
        key = np.add(score, 0.0).view(np.uint64) << np.uint64(n_bits)  # + 0.0 turns -0.0 into 0.0
        key |= flags.astype(np.uint64)
        key.sort()
        key = key[::-1]
        sorted_flags = (key & np.uint64((1 << n_bits) - 1)).astype(np.int64)
        sorted_score = (key >> np.uint64(n_bits)).view(np.float64)
    else:
        order = np.argsort(score)[::-1]
        sorted_score, sorted_flags = score[order], flags[order].astype(np.int64)
    group_end = np.append(np.flatnonzero(sorted_score[1:] != sorted_score[:-1]), sorted_score.size - 1)
    return sorted_score, sorted_flags, group_end


def binary_curve_counts(is_positive: np.ndarray, score: np.ndarray):
    """Cumulative (true positives, false positives) at every distinct score, highest score first.

    Entry ``i`` counts the samples whose score is >= the i-th highest distinct score, i.e. the counts
    obtained with the decision rule ``score >= threshold_i``. This is sklearn's ``_binary_clf_curve``
    (same numbers); written here so the three curve metrics below share one O(n log n) sort.
    Inputs must already be validated (bool labels, finite float scores of equal length).
    """
    sorted_score, sorted_positive, group_end = sort_descending_with_flags(score, is_positive, 1)
    true_pos = np.cumsum(sorted_positive)[group_end]
    false_pos = (group_end + 1) - true_pos
    return true_pos, false_pos, sorted_score[group_end]


def _need_both_classes(is_positive: np.ndarray, what: str):
    n_pos = int(is_positive.sum())
    n_neg = is_positive.size - n_pos
    if n_pos == 0:
        return NA(f"{what} is undefined without novel samples (no positives among {is_positive.size})")
    if n_neg == 0:
        return NA(f"{what} is undefined without known samples (all {is_positive.size} samples are novel)")
    return None


def auroc(y_true, y_score) -> float | NA:
    """Area under the ROC curve of ``y_score`` for detecting ``y_true == 1`` (novel).

    AUROC = P(score_novel > score_known) + 1/2 P(score_novel == score_known)  (Mann-Whitney U / (P N)):
    ties count one half. Computed as the trapezoidal area under (FPR, TPR) over distinct thresholds,
    which is the same number. Matches ``sklearn.metrics.roc_auc_score``.
    """
    is_pos, scores = _labels_and_scores(y_true, y_score)
    undefined = _need_both_classes(is_pos, "AUROC")
    if undefined is not None:
        return undefined
    return _auroc_from_counts(*binary_curve_counts(is_pos, scores)[:2])


def _auroc_from_counts(tp: np.ndarray, fp: np.ndarray) -> float:
    tp = np.concatenate(([0], tp)).astype(np.float64)
    fp = np.concatenate(([0], fp)).astype(np.float64)
    # trapezoids: a tie group that holds both classes contributes a diagonal, i.e. the one-half credit
    area = np.sum(np.diff(fp) * (tp[1:] + tp[:-1])) / 2.0
    return float(area / (tp[-1] * fp[-1]))


def average_precision(y_true, y_score) -> float | NA:
    """Average precision of ``y_score`` for detecting ``y_true == 1``: AP = sum_n (R_n - R_{n-1}) P_n.

    P_n, R_n are precision and recall at the n-th distinct threshold (highest first), R_0 = 0; no
    interpolation. Matches ``sklearn.metrics.average_precision_score``. N/A without novel samples.
    """
    is_pos, scores = _labels_and_scores(y_true, y_score)
    n_pos = int(is_pos.sum())
    if n_pos == 0:
        return NA("average precision is undefined without novel samples (recall has no denominator)")
    return _average_precision_from_counts(*binary_curve_counts(is_pos, scores)[:2])


def _average_precision_from_counts(tp: np.ndarray, fp: np.ndarray) -> float:
    precision = tp / (tp + fp)
    recall_gain = np.diff(np.concatenate(([0], tp))) / tp[-1]
    return float(np.sum(recall_gain * precision))


def fpr_at_tpr(y_true, y_score, *, tpr: float = 0.95) -> float | NA:
    """False-positive rate at the highest threshold whose true-positive rate is at least ``tpr``.

    The threshold t is the lowest score that still catches ``tpr`` of the novel samples (the highest t
    with #(novel score >= t) / #novel >= tpr); FPR = #(known score >= t) / #known, so known samples tied
    with t count as false positives. Same as OpenOOD's ``fpr[argmax(tpr >= 0.95)]`` on sklearn's
    ``roc_curve``.
    """
    if not (isinstance(tpr, (int, float)) and 0.0 < tpr <= 1.0):
        raise MetricInputError(f"tpr: expected a number in (0, 1], got {tpr!r}")
    is_pos, scores = _labels_and_scores(y_true, y_score)
    undefined = _need_both_classes(is_pos, f"FPR at {tpr:g} TPR")
    if undefined is not None:
        return undefined
    return _fpr_at_tpr_from_counts(*binary_curve_counts(is_pos, scores)[:2], tpr=tpr)


def _fpr_at_tpr_from_counts(tp: np.ndarray, fp: np.ndarray, *, tpr: float) -> float:
    first = int(np.argmax(tp / tp[-1] >= tpr))  # exists: the last group has TPR = 1
    return float(fp[first] / fp[-1])


def novelty_score_metrics(y_true, y_score, *, tpr: float = 0.95) -> dict[str, float | NA]:
    """``auroc``, ``average_precision`` and ``fpr_at_tpr`` from one sort (same numbers as the three calls).

    Returns ``{"auroc": ..., "average_precision": ..., "fpr_at_tpr": ...}``, each a float or NA.
    """
    if not (isinstance(tpr, (int, float)) and 0.0 < tpr <= 1.0):
        raise MetricInputError(f"tpr: expected a number in (0, 1], got {tpr!r}")
    is_pos, scores = _labels_and_scores(y_true, y_score)
    return _novelty_score_metrics_unchecked(is_pos, scores, tpr=tpr)


def _novelty_score_metrics_unchecked(is_pos: np.ndarray, scores: np.ndarray, *, tpr: float) -> dict[str, float | NA]:
    undefined = _need_both_classes(is_pos, "this novelty-score metric")
    if undefined is not None and not is_pos.any():
        return {name: undefined for name in ("auroc", "average_precision", "fpr_at_tpr")}
    tp, fp, _ = binary_curve_counts(is_pos, scores)
    result: dict[str, float | NA] = {"average_precision": _average_precision_from_counts(tp, fp)}
    if undefined is not None:  # novel samples but no known sample: AP is defined, the ROC quantities are not
        result["auroc"] = result["fpr_at_tpr"] = undefined
    else:
        result["auroc"] = _auroc_from_counts(tp, fp)
        result["fpr_at_tpr"] = _fpr_at_tpr_from_counts(tp, fp, tpr=tpr)
    return result


def oscr(is_novel, confidence, correct) -> float | NA:
    """Open-set classification rate (Dhamija et al. 2018, "Reducing Network Agnostophobia").

    Sweep a threshold t on ``confidence`` (the highest known-class score): a known sample counts when
    it is correctly classified and accepted (confidence >= t), a novel sample is a false positive when
    accepted. OSCR = area under CCR(t) = #(known, correct, conf >= t) / #known against
    FPR(t) = #(novel, conf >= t) / #novel, from (0, 0) to (1, closed-set accuracy), trapezoidal over
    distinct thresholds (ties move together, like the ROC above). 1.0 = perfect.

    ``correct`` is only read for known samples.
    """
    is_novel_b, conf = _labels_and_scores(is_novel, confidence, names=("is_novel", "confidence"))
    correct_arr = as_array("correct", correct, ndim=1, allow_nan=False)
    check_same_shape(("is_novel", "correct"), (is_novel_b, correct_arr))
    return _oscr_unchecked(is_novel_b, conf, correct_arr != 0)


def _oscr_unchecked(is_novel_b: np.ndarray, conf: np.ndarray, correct_b: np.ndarray) -> float | NA:
    undefined = _need_both_classes(is_novel_b, "OSCR")
    if undefined is not None:
        return undefined
    known_correct = (~is_novel_b) & correct_b
    n_known = int((~is_novel_b).sum())
    n_novel = is_novel_b.size - n_known
    # flags: bit 0 = novel, bit 1 = known and correctly classified
    flags = is_novel_b.astype(np.int64) | (known_correct.astype(np.int64) << 1)
    _, sorted_flags, group_end = sort_descending_with_flags(conf, flags, 2)
    ccr = np.concatenate(([0], np.cumsum(sorted_flags >> 1)[group_end])) / n_known
    fpr = np.concatenate(([0], np.cumsum(sorted_flags & 1)[group_end])) / n_novel
    return float(np.sum(np.diff(fpr) * (ccr[1:] + ccr[:-1])) / 2.0)


# ---- the open-set metrics of a test: every sample of every trial, p_class[:, 0] as the novelty score


@OND.family(
    OND.spec(
        "auroc_novel",
        True,
        (0.0, 1.0),
        title="AUROC (novel vs known)",
        description="AUROC of p_class[:, 0] for novel samples over all samples (ties count one half)",
    ),
    OND.spec(
        "aupr_novel",
        True,
        (0.0, 1.0),
        description="average precision of p_class[:, 0] for novel samples (sklearn average_precision_score)",
    ),
    OND.spec(
        "fpr_at_95tpr",
        False,
        (0.0, 1.0),
        description="share of known samples scored at or above the threshold that catches 95% of novel samples",
    ),
    OND.spec(
        "oscr",
        True,
        (0.0, 1.0),
        title="OSCR",
        description="open-set classification rate (Dhamija et al. 2018) on the highest known-class score",
    ),
    needs=("flat",),
)
def _open_set(flat: FlatTrials) -> dict[str, float | NA]:
    """:func:`~owl_eval.protocols.ond.metrics.blocks.open_set_metrics` over all samples of all trials pooled."""
    return _open_set_metrics_unchecked(flat.gt_class, flat.gt_novel, flat.p_class, flat.rank)


def _constant(values: np.ndarray) -> bool:
    return values.size > 0 and values.min() == values.max()


def _open_set_metrics_unchecked(labels, novel, scores, rank) -> dict[str, float | NA]:
    """``open_set_metrics`` on checked arrays, reusing ``rank`` = rank_of_true_class(labels, scores).

    A ranking metric of a score that is the same for every sample is fixed by construction (AUROC 0.5, AP =
    share of novel samples, FPR@95TPR 1; OSCR = closed-set accuracy / 2), so it is N/A with that reason.
    """
    score_metrics = _novelty_score_metrics_unchecked(novel, scores[:, 0], tpr=0.95)
    if _constant(scores[:, 0]) and novel.any() and not novel.all():
        why = (
            f"the novelty score p_class[:, 0] is {scores[0, 0]:g} for all {labels.size} samples: "
            "{} by construction, not a measurement"
        )
        score_metrics = {
            "auroc": NA(why.format("AUROC would be 0.5")),
            "average_precision": NA(why.format("AP would be the share of novel samples")),
            "fpr_at_tpr": NA(why.format("FPR@95TPR would be 1")),
        }
    # Correct known-class prediction without a second argmax: the true class g >= 1 is first among the
    # known columns iff nothing but column 0 is ranked ahead of it; column 0 is ahead iff p_0 >= p_g
    # (ties go to the lower column).
    true_score = scores[np.arange(labels.size), labels]
    column0_ahead = scores[:, 0] >= true_score
    correct = (labels >= 1) & (rank - column0_ahead == 0)
    confidence = scores[:, 1:].max(axis=1)
    open_set = _oscr_unchecked(novel, confidence, correct)
    if not isinstance(open_set, NA) and _constant(confidence):
        open_set = NA(
            f"the known-class confidence max(p_class[:, 1:]) is {confidence[0]:g} for all {labels.size} "
            "samples: OSCR would be the closed-set accuracy / 2 by construction, not a measurement"
        )
    return {
        "auroc_novel": score_metrics["auroc"],
        "aupr_novel": score_metrics["average_precision"],
        "fpr_at_95tpr": score_metrics["fpr_at_tpr"],
        "oscr": open_set,
    }
