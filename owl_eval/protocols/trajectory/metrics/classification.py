"""Classification-type trajectory scenarios: AUC, ECE of class probabilities, TNR at perfect recall.

Inputs as General-Framework's ``get_true_and_predicted_class_probabilities``: ``p_true[N_S, N_C]``
one-hot, ``p_pred[N_S, N_C]`` rows summing to 1. Each is declared on its function (``@TRAJECTORY.metric``); the
trajectory evaluation computes them with the class options (``metrics.auc_score``, ``class_ece_bins``,
``tnr_pr_positive``).
"""

from __future__ import annotations

import numpy as np
from scipy.stats import rankdata

from owl_eval.metrics.results import NA
from owl_eval.metrics.validation import MetricInputError, as_array, check_option
from owl_eval.protocols.trajectory.metrics.declared import TRAJECTORY

_CLASS_INPUTS = ("p_true", "p_pred")


def _check(p_true, p_pred, one_d_ok=False):
    p_pred = np.asarray(p_pred, dtype=float)
    if one_d_ok and p_pred.ndim == 1:
        p_pred = p_pred[:, None]
        p_true = np.asarray(p_true, dtype=float)[:, None] if np.ndim(p_true) == 1 else p_true
    p_pred = as_array("p_pred", p_pred, ndim=2, allow_nan=False, low=0.0, high=1.0)
    p_true = as_array("p_true", p_true, shape=p_pred.shape, allow_nan=False)
    if not np.isin(p_true, (0.0, 1.0)).all():
        raise MetricInputError("p_true: expected one-hot rows of 0 and 1")
    return p_true, p_pred


@TRAJECTORY.metric(
    "auc",
    higher_is_better=True,
    bounds=(0.0, 1.0),
    latex=r"\emph{AUC}",
    description="one-vs-rest ROC AUC weighted by class frequency (AUC_ROC.py)",
    needs=_CLASS_INPUTS,
)
def auc(p_true, p_pred, *, score="raw"):
    """One-vs-rest ROC AUC, weighted by class frequency, with average ranks for ties.

    AUC_k = (sum_{i: p_ik = 1} r_ik - N_k (N_k + 1) / 2) / (N_k (N_S - N_k)),
    F = sum_k (N_k / N_S) AUC_k, with r_ik the (average) rank of sample i by score for class k.
    Equals ``sklearn.metrics.roc_auc_score(..., average="weighted", multi_class="ovr")``.
    ``score="general_framework"`` ranks by p_k / (p_k + max_{k' != k} p_k') as AUC_ROC.py (identical
    for two classes). Classes absent from ``p_true`` get weight 0.
    """
    check_option("score", score, ("raw", "general_framework"))
    p_true, p_pred = _check(p_true, p_pred)
    n, c = p_pred.shape
    s = p_pred
    if score == "general_framework" and c > 1:
        others = np.stack([np.delete(p_pred, k, axis=1).max(1) for k in range(c)], axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            s = np.nan_to_num(p_pred / (p_pred + others), nan=0.5)
    n_k = p_true.sum(0)
    if (n_k > 0).sum() < 2:
        return NA("AUC needs at least two classes present in p_true")
    ranks = rankdata(s, method="average", axis=0)
    used = (n_k > 0) & (n_k < n)
    l_k = (ranks * p_true).sum(0) - 0.5 * n_k * (n_k + 1)
    auc_k = l_k[used] / (n_k[used] * (n - n_k[used]))
    return float((auc_k * n_k[used]).sum() / n)


@TRAJECTORY.metric(
    "class_ece",
    higher_is_better=False,
    bounds=(0.0, 1.0),
    latex=r"\emph{ECE}",
    description="ECE of class probabilities, equal-count bins (ECE_class.py)",
    needs=_CLASS_INPUTS,
)
def class_ece(p_true, p_pred, *, n_bins=10):
    """Expected calibration error over all (sample, class) probabilities, equal-count bins.

    The N = N_S N_C predicted probabilities are sorted (stable), the outcomes averaged over equal
    predicted values (as ECE_class.py), and cut into ``n_bins`` bins J_b = {floor(N b / B), ...,
    floor(N (b+1) / B) - 1}; ECE = sum_b |J_b| / N * |mean_{J_b} p_true - mean_{J_b} p_pred|.
    """
    p_true, p_pred = _check(p_true, p_pred)
    if int(n_bins) < 1:
        raise MetricInputError(f"n_bins: expected a positive integer, got {n_bins!r}")
    t, p = p_true.ravel(), p_pred.ravel()
    order = np.argsort(p, kind="stable")
    t, p = t[order], p[order]
    uniq, inv = np.unique(p, return_inverse=True)
    t = (np.bincount(inv, weights=t) / np.bincount(inv))[inv]
    n = len(p)
    b = min(int(n_bins), n)
    edges = (np.arange(b + 1) * (n / b)).astype(int)
    edges[-1] = n
    err = 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        if hi > lo:
            err += (hi - lo) / n * abs(t[lo:hi].mean() - p[lo:hi].mean())
    return float(err)


@TRAJECTORY.metric(
    "tnr_pr",
    higher_is_better=True,
    bounds=(0.0, 1.0),
    latex=r"\emph{TNR-PR}",
    description="true negative rate at perfect recall (TNR_PR.py)",
    needs=_CLASS_INPUTS,
)
def tnr_pr(p_true, p_pred, *, positive_class=0):
    """True negative rate at perfect recall (TNR_PR.py).

    threshold = min over positives (p_true = 1 for ``positive_class``, e.g. "accepted") of the predicted
    probability; F = share of negatives whose predicted probability is < threshold. 1-D inputs are the
    binary outcome and the probability of the positive class.
    """
    p_true, p_pred = _check(p_true, p_pred, one_d_ok=True)
    if not 0 <= positive_class < p_pred.shape[1]:
        raise MetricInputError(f"positive_class: expected 0..{p_pred.shape[1] - 1}, got {positive_class}")
    pos = p_true[:, positive_class].astype(bool)
    score = p_pred[:, positive_class]
    if not pos.any() or pos.all():
        return NA("TNR-PR needs both positive and negative samples")
    return float(np.mean(score[~pos] < score[pos].min()))


def classification_table(p_true, p_pred, *, n_bins=10, positive_class=None, auc_score="raw"):
    """``auc``, ``class_ece`` and (when ``positive_class`` is given) ``tnr_pr`` as a MetricResults."""
    from owl_eval.metrics.results import MetricResults

    res = MetricResults()
    res.set("auc", auc(p_true, p_pred, score=auc_score))
    res.set("class_ece", class_ece(p_true, p_pred, n_bins=n_bins))
    if positive_class is not None:
        res.set("tnr_pr", tnr_pr(p_true, p_pred, positive_class=positive_class))
    return res
