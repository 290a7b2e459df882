"""Per-trial building blocks of the OND program metrics: pure functions of one trial's arrays.

:func:`owl_eval.protocols.ond.metrics.program_metrics` computes the same quantities for all trials at once; these are the
readable single-trial versions (and what a user calls on one trial). Conventions of METRICS.md
section 1: arrays are 0-based, column 0 of ``p_class`` is "unknown", pre-novelty is ``[:red_light]``,
post-novelty is ``[red_light:]``. An undefined value is returned as :class:`~owl_eval.metrics.results.NA`
with the reason.
"""

from __future__ import annotations

import numpy as np

from owl_eval.metrics.results import NA
from owl_eval.metrics.validation import MetricInputError, as_array, check_option
from owl_eval.protocols.ond.metrics.open_set import _open_set_metrics_unchecked
from owl_eval.protocols.ond.metrics.rank import true_class_rank

__all__ = [
    "detection_index",
    "correctly_detected",
    "detected_early",
    "rank_of_true_class",
    "topk_correct",
    "top_k_accuracy",
    "novelty_detection_performance",
    "novelty_reaction_performance",
    "overall_performance_task_improvement",
    "asymptotic_performance_task_improvement",
    "open_set_metrics",
]


# ---- validation helpers ----------------------------------------------------------------------------


def _scores(name, values, *, ndim=1):
    return as_array(name, values, ndim=ndim, allow_nan=False, low=0.0, high=1.0)


def _threshold(threshold) -> float:
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, (int, float, np.floating))
        or not 0.0 <= threshold <= 1.0
    ):
        raise MetricInputError(f"threshold: expected a number in [0, 1], got {threshold!r}")
    return float(threshold)


def _positive_int(name, value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise MetricInputError(f"{name}: expected a positive int, got {value!r}")
    return int(value)


def _red_light(red_light, n: int) -> int | None:
    if red_light is None:
        return None
    if isinstance(red_light, bool) or not isinstance(red_light, (int, np.integer)) or not 0 <= red_light < n:
        raise MetricInputError(f"red_light: expected None or an int index in [0, {n - 1}], got {red_light!r}")
    return int(red_light)


def _classes(gt_class, p_class, p_name="p_class"):
    scores = _scores(p_name, p_class, ndim=2)
    labels = as_array("gt_class", gt_class, shape=(scores.shape[0],), allow_nan=False)
    if labels.size and (labels.min() < 0 or labels.max() >= scores.shape[1] or (labels != np.round(labels)).any()):
        raise MetricInputError(
            f"gt_class: expected integer class ids in [0, {scores.shape[1] - 1}] (p_class has {scores.shape[1]} columns)"
        )
    return labels.astype(np.int64), scores


# ---- detection ------------------------------------------------------------------------------------


def detection_index(p_world_changed, *, threshold: float = 0.5) -> int | None:
    """First 0-based index with ``p_world_changed >= threshold``; None if the detector never fires.

    sail-on-client's ``get_first_detect_novelty`` returns this index + 1 (and N + 1 for "never").
    """
    threshold = _threshold(threshold)
    fired = _scores("p_world_changed", p_world_changed) >= threshold
    return int(np.argmax(fired)) if fired.any() else None


def correctly_detected(p_world_changed, red_light: int | None, *, threshold: float = 0.5) -> bool:
    """CDT: the trial has novelty and the first detection d exists with ``d >= red_light``.

    sail-on-client's ``m_is_cdt_and_is_early`` also requires the 1-based d < N, which refuses a detection
    on the last sample; METRICS.md fixes that off-by-one, so a last-sample detection is a CDT.
    """
    p = _scores("p_world_changed", p_world_changed)
    red_light = _red_light(red_light, p.size)
    d = detection_index(p, threshold=threshold)
    return red_light is not None and d is not None and d >= red_light


def detected_early(p_world_changed, red_light: int | None, *, threshold: float = 0.5) -> bool:
    """Early / false-positive trial (M2.1): a detection d exists and ``d < red_light`` (any d without novelty)."""
    p = _scores("p_world_changed", p_world_changed)
    red_light = _red_light(red_light, p.size)
    d = detection_index(p, threshold=threshold)
    return d is not None and (red_light is None or d < red_light)


# ---- classification -------------------------------------------------------------------------------


def rank_of_true_class(gt_class, p_class) -> np.ndarray:
    """Per sample, the 0-based rank of the true class among the K+1 scores, ties toward the lower column.

    rank_i = #{j : p_ij > p_i,g} + #{j < g : p_ij == p_i,g} with g = gt_class_i, i.e. the position of g in
    a stable sort by decreasing score. The sample is top-k correct iff rank < k.
    """
    labels, scores = _classes(gt_class, p_class)
    return true_class_rank(labels, scores)


def topk_correct(gt_class, p_class, *, k: int) -> np.ndarray:
    """Boolean per sample: ``gt_class`` is among the ``k`` highest scores (ties toward the lower column).

    Same as sail-on-client's ``topk_accuracy`` test ``np.argsort(-p_class)[:, :k]`` contains the label,
    except that ties are broken deterministically.
    """
    k = _positive_int("k", k)
    return rank_of_true_class(gt_class, p_class) < k


def top_k_accuracy(gt_class, p_class, *, k: int) -> float | NA:
    """Share of samples whose ``gt_class`` is among the ``k`` highest scores (sail-on-client ``topk_accuracy``,
    unrounded; ``sklearn.metrics.top_k_accuracy_score`` up to its tie handling). N/A on no samples."""
    correct = topk_correct(gt_class, p_class, k=k)
    if correct.size == 0:
        return NA("top-k accuracy of no samples is undefined")
    return float(correct.mean())


def novelty_detection_performance(gt_novel, p_unknown, *, threshold: float = 0.5) -> dict[str, float | NA]:
    """Per-sample novelty detection of the unknown-class score, ``p_unknown >= threshold``, against ``gt_novel``
    (one trial's ``unknown_score_*``).

    precision = TP / (TP + FP), recall = TP / (TP + FN), F1 = 2PR / (P + R), accuracy = (TP + TN) / n,
    with sail-on-client's convention that precision, recall and F1 with an empty denominator are 0. Not
    sail-on-client's ``m_ndp`` (the ``m_ndp_*`` metrics), which thresholds P(world changed) with ``>``;
    METRICS.md uses ``>=`` here (as the detection index). Returns those four rates and the counts
    ``tp, fp, tn, fn``; all NA on an empty segment.
    """
    threshold = _threshold(threshold)
    truth = as_array("gt_novel", gt_novel, ndim=1, allow_nan=False)
    if not np.isin(truth, (0, 1)).all():
        raise MetricInputError("gt_novel: expected 0/1 labels")
    predicted = _scores("p_unknown", p_unknown) >= threshold
    if predicted.shape != truth.shape:
        raise MetricInputError(f"p_unknown: shape {predicted.shape} does not match gt_novel shape {truth.shape}")
    if truth.size == 0:
        return {name: NA("no samples in this segment") for name in ("precision", "recall", "f1", "accuracy")}
    truth = truth.astype(bool)
    tp = int(np.sum(predicted & truth))
    fp = int(np.sum(predicted & ~truth))
    fn = int(np.sum(~predicted & truth))
    tn = truth.size - tp - fp - fn
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "accuracy": (tp + tn) / truth.size,
        "tp": tp,
        "fp": fp,
        "tn": tn,
        "fn": fn,
    }


# ---- reaction to novelty (need a baseline) ---------------------------------------------------------


def _agent_and_baseline(gt_class, p_class, baseline_p_class):
    labels, agent = _classes(gt_class, p_class)
    _, baseline = _classes(labels, baseline_p_class, p_name="baseline_p_class")
    if baseline.shape != agent.shape:
        raise MetricInputError(f"baseline_p_class: shape {baseline.shape} does not match p_class shape {agent.shape}")
    return labels, agent, baseline


def novelty_reaction_performance(
    gt_class,
    p_class,
    baseline_p_class,
    red_light: int | None,
    *,
    k: int = 1,
    window: str = "post",
    asymptotic_width: int = 100,
) -> float | NA:
    """NRP (M3 under system detection, M4 under given detection) of one trial.

    NRP = 100 * P_post,agent / P_pre,baseline with P top-k accuracy; P_pre on ``[:red_light]``; P_post on
    ``[red_light:]`` (``window="post"``, sail-on-client ``m_nrp`` on ``m_acc``'s post_top-k) or on the last
    ``asymptotic_width`` samples (``window="asymptotic"``, the seed's "asymptotic task performance").
    N/A without novelty, without pre-novelty samples, or when the baseline's P_pre is 0 (the reference
    divides by zero).
    """
    k = _positive_int("k", k)
    check_option("window", window, ("post", "asymptotic"))
    width = _positive_int("asymptotic_width", asymptotic_width)
    labels, agent, baseline = _agent_and_baseline(gt_class, p_class, baseline_p_class)
    red_light = _red_light(red_light, labels.size)
    if red_light is None:
        return NA("the trial has no novelty (red_light is None)")
    if red_light == 0:
        return NA("the trial has no pre-novelty sample (red_light is 0): baseline P_pre is undefined")
    agent_correct = true_class_rank(labels, agent) < k
    baseline_pre = float(np.mean(true_class_rank(labels[:red_light], baseline[:red_light]) < k))
    if baseline_pre == 0.0:
        return NA(f"baseline top-{k} accuracy before the red light is 0: NRP = P_post / P_pre is undefined")
    window_correct = agent_correct[red_light:] if window == "post" else agent_correct[-width:]
    return 100.0 * float(window_correct.mean()) / baseline_pre


def overall_performance_task_improvement(gt_class, p_class, baseline_p_class, red_light: int | None) -> float | NA:
    """M5 (OPTI) of one trial: P_post,agent / (P_post,agent + P_post,baseline), top-1 on ``[red_light:]``.

    0.5 = parity with the baseline. N/A without novelty or when both accuracies are 0.
    (sail-on-client 0.30.0 does not implement M5; this is the seed's formula.)
    """
    labels, agent, baseline = _agent_and_baseline(gt_class, p_class, baseline_p_class)
    red_light = _red_light(red_light, labels.size)
    if red_light is None:
        return NA("the trial has no novelty (red_light is None)")
    agent_post = float(np.mean(true_class_rank(labels[red_light:], agent[red_light:]) == 0))
    baseline_post = float(np.mean(true_class_rank(labels[red_light:], baseline[red_light:]) == 0))
    if agent_post + baseline_post == 0.0:
        return NA("agent and baseline both have top-1 accuracy 0 after the red light")
    return agent_post / (agent_post + baseline_post)


def asymptotic_performance_task_improvement(
    gt_class, p_class, baseline_p_class, *, asymptotic_width: int = 100
) -> float | NA:
    """M6 (APTI) of one trial: top-1 of the agent over top-1 of the baseline on the last ``asymptotic_width``
    samples (the whole trial when it is shorter). N/A when the baseline's accuracy there is 0.
    (sail-on-client 0.30.0 does not implement M6; this is the seed's formula.)
    """
    width = _positive_int("asymptotic_width", asymptotic_width)
    labels, agent, baseline = _agent_and_baseline(gt_class, p_class, baseline_p_class)
    if labels.size == 0:
        return NA("no samples")
    agent_acc = float(np.mean(true_class_rank(labels[-width:], agent[-width:]) == 0))
    baseline_acc = float(np.mean(true_class_rank(labels[-width:], baseline[-width:]) == 0))
    if baseline_acc == 0.0:
        return NA(f"baseline top-1 accuracy on the last {width} samples is 0")
    return agent_acc / baseline_acc


# ---- open set -------------------------------------------------------------------------------------


def open_set_metrics(gt_class, gt_novel, p_class) -> dict[str, float | NA]:
    """Open-set recognition metrics with ``p_class[:, 0]`` as the novelty score, novel samples positive.

    ``auroc_novel`` (ties one half, = ``sklearn.metrics.roc_auc_score``), ``aupr_novel``
    (= ``sklearn.metrics.average_precision_score``), ``fpr_at_95tpr`` (see
    :func:`owl_eval.protocols.ond.metrics.open_set.fpr_at_tpr`) and ``oscr`` (Dhamija et al. 2018) with the highest known-class
    score ``max(p_class[:, 1:])`` as confidence and ``argmax(p_class[:, 1:]) + 1 == gt_class`` (ties to
    the lower column) as a correct known-class prediction. A score that is the same for every sample ranks
    nothing: the metrics built on it are N/A with that reason (the plain functions of :mod:`owl_eval.protocols.ond.metrics.open_set`
    keep sklearn's numbers, e.g. AUROC 0.5).
    """
    labels, scores = _classes(gt_class, p_class)
    novel = as_array("gt_novel", gt_novel, shape=(labels.size,), allow_nan=False)
    if not np.isin(novel, (0, 1)).all():
        raise MetricInputError("gt_novel: expected 0/1 labels (1 = novel)")
    return _open_set_metrics_unchecked(labels, novel.astype(bool), scores, true_class_rank(labels, scores))
