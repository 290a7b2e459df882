"""Trajectory prediction metrics (METRICS.md section 3; reference: DAI-Lab-HERALD General-Framework).

Arrays: ``true[N_S, N_A, N_O, 2]`` (General-Framework's ``Path_true[N_S, 1, ...]`` is accepted),
``pred[N_S, N_P, N_A, N_O, 2]``, ``mask[N_S, N_A, N_O]`` (bool, valid steps; masked steps may hold NaN
and count for nothing). Marginal ("indep") metrics average over valid agents, joint metrics over
samples with a valid agent. With d_pjt = ||x_jt - x^_pjt||, n_j the agent's valid steps, T_j its last:

    ADE  = 1/(|P| sum_i N_A,i) sum_i sum_p sum_j (1/n_j) sum_t d_pjt              (ADE_indep.py)
    FDE  = same with d_pjT_j                                                     (FDE_indep.py)
    joint: r_pt = sqrt( (1/n_t) sum_{j valid at t} d_pjt^2 ), averaged over steps with n_t >= 1
           (ADE_joint.py), FDE_joint = r_pt at the last such step                (FDE_joint.py)
    minADE_K / minFDE_K: min over a K-subset of predictions instead of the mean  (minADE20_*.py)
    miss rate: agent missed if every prediction has FDE > threshold; joint: any agent missed
    ML ADE/FDE: error of argmax_p of the KDE density of prediction p            (ADE_ML_*.py)
    KDE NLL: -log p_KDE(truth), averaged over non-singular KDEs                  (KDE_NLL_*.py)
    KDE ECE: (1/201) sum_k | #(m > k/200)/n + k/200 - 1 |, m = share of predictions with a higher
             density than the truth                                              (ECE_traj_*.py)
    Brier-minFDE: minFDE + (1 - p_best)^2, p = softmax of the predictions' log densities
    collision rate: share of predictions whose disc (radius r) overlaps another agent's truth
             (marginal) or another agent's prediction of the same index (joint)

A result that is not a finite float64 (errors of predictions at 1e308 overflow) is :class:`NA` with the
reason, never inf or a clipped 1.8e308; a KDE that overflows makes the KDE metrics N/A.

``step_count="sample"`` reproduces General-Framework's zero-fill (sample maximum step count for every
agent). K-subsets: ``rng.permutation(N_P)[:K]`` from the given Generator; all predictions if K >= N_P.
The whole table (chunked, streaming from .npz) is in :mod:`owl_eval.protocols.trajectory.metrics.table`; the batched KDE in
:mod:`owl_eval.protocols.trajectory.metrics.kde`; class metrics in :mod:`owl_eval.protocols.trajectory.metrics.classification`.
"""

from __future__ import annotations

import numpy as np

from owl_eval.metrics.results import NA
from owl_eval.protocols.trajectory.metrics.classification import auc, class_ece, classification_table, tnr_pr
from owl_eval.protocols.trajectory.metrics.context import (
    OVERFLOW_REASON,
    TrajContext,
    finalize_ece,
    finalize_kde_ratio,
    finalize_ratio,
)
from owl_eval.protocols.trajectory.metrics.core import check_paths, draw_subset, step_errors
from owl_eval.protocols.trajectory.metrics.declared import TRAJECTORY
from owl_eval.protocols.trajectory.metrics.kde import kde_log_probs as _kde_log_probs
from owl_eval.protocols.trajectory.metrics.table import (
    REGISTRY,
    specs_for,
    table_metric,
    trajectory_table,
    trajectory_table_stream,
)

__all__ = [
    "ade",
    "fde",
    "min_ade",
    "min_fde",
    "miss_rate",
    "ml_ade",
    "ml_fde",
    "kde_nll",
    "kde_ece",
    "brier_min_fde",
    "collision_rate",
    "displacement_by_step",
    "kde_log_probs",
    "auc",
    "class_ece",
    "tnr_pr",
    "classification_table",
    "trajectory_table",
    "trajectory_table_stream",
    "table_metric",
    "specs_for",
    "REGISTRY",
    "TRAJECTORY",
    "SPECS",
]


# Extreme inputs (predictions of 1e308) overflow to inf inside the reductions; the finalizers return N/A
# with the reason instead of inf, so numpy's overflow warnings would only be noise.
_quiet = np.errstate(over="ignore", invalid="ignore")


def _ctx(true, pred, mask, step_count="agent", log_probs=None, joint_log_probs=None):
    t, p, m = check_paths(true, pred, mask)
    return TrajContext(t, p, m, step_count=step_count, log_probs=log_probs, joint_log_probs=joint_log_probs)


def _what(joint):
    return "samples" if joint else "agents"


@_quiet
def ade(true, pred, mask, *, joint=False, num_preds=None, rng=None, step_count="agent"):
    """Average displacement error over all (or ``num_preds`` random) predictions (ADE_indep/joint.py)."""
    c = _ctx(true, pred, mask, step_count)
    idx = draw_subset(c.n_p, num_preds, rng)
    return finalize_ratio(c.mean_error_state("ade", joint, idx), _what(joint))


@_quiet
def fde(true, pred, mask, *, joint=False, num_preds=None, rng=None, step_count="agent"):
    """Final displacement error at each agent's last valid step (FDE_indep/joint.py)."""
    c = _ctx(true, pred, mask, step_count)
    idx = draw_subset(c.n_p, num_preds, rng)
    return finalize_ratio(c.mean_error_state("fde", joint, idx), _what(joint))


@_quiet
def min_ade(true, pred, mask, *, k=20, joint=False, rng=None, step_count="agent"):
    """minADE_K: per agent (joint: per sample) the best of K random predictions (minADE20_*.py)."""
    c = _ctx(true, pred, mask, step_count)
    idx = draw_subset(c.n_p, k, rng)
    return finalize_ratio(c.mean_error_state("ade", joint, idx, "min"), _what(joint))


@_quiet
def min_fde(true, pred, mask, *, k=20, joint=False, rng=None, step_count="agent"):
    """minFDE_K (minFDE20_*.py)."""
    c = _ctx(true, pred, mask, step_count)
    idx = draw_subset(c.n_p, k, rng)
    return finalize_ratio(c.mean_error_state("fde", joint, idx, "min"), _what(joint))


@_quiet
def miss_rate(true, pred, mask, *, threshold=2.0, num_preds=None, joint=False, rng=None, step_count="agent"):
    """Share of agents whose every prediction ends more than ``threshold`` away (> , not >=);
    joint: share of samples with at least one missed agent (Miss_rate_indep/joint.py)."""
    c = _ctx(true, pred, mask, step_count)
    idx = draw_subset(c.n_p, num_preds, rng)
    return finalize_ratio(c.miss_state(joint, float(threshold), idx), _what(joint))


@_quiet
def ml_ade(true, pred, mask, *, joint=False, log_probs=None, joint_log_probs=None, step_count="agent"):
    """ADE of the most likely prediction (argmax of the KDE / given log-probability; ADE_ML_*.py)."""
    c = _ctx(true, pred, mask, step_count, log_probs, joint_log_probs)
    return finalize_kde_ratio(c.ml_state("ade", joint))


@_quiet
def ml_fde(true, pred, mask, *, joint=False, log_probs=None, joint_log_probs=None, step_count="agent"):
    """FDE of the most likely prediction (FDE_ML_*.py)."""
    c = _ctx(true, pred, mask, step_count, log_probs, joint_log_probs)
    return finalize_kde_ratio(c.ml_state("fde", joint))


@_quiet
def kde_nll(true, pred, mask, *, joint=False, log_probs=None, joint_log_probs=None):
    """Mean of -log p_KDE(truth) over agents (joint: samples) with a non-singular KDE (KDE_NLL_*.py)."""
    c = _ctx(true, pred, mask, log_probs=log_probs, joint_log_probs=joint_log_probs)
    return finalize_kde_ratio(c.nll_state(joint))


@_quiet
def kde_ece(true, pred, mask, *, joint=False, log_probs=None, joint_log_probs=None):
    """The seed's 201-level trajectory calibration error (ECE_traj_indep/joint.py)."""
    c = _ctx(true, pred, mask, log_probs=log_probs, joint_log_probs=joint_log_probs)
    return finalize_ece(c.ece_state(joint))


@_quiet
def brier_min_fde(true, pred, mask, *, joint=False, log_probs=None, joint_log_probs=None, step_count="agent"):
    """minFDE + (1 - p_best)^2 over all predictions (Argoverse 2; Brier_minFDE_*.py)."""
    c = _ctx(true, pred, mask, step_count, log_probs, joint_log_probs)
    return finalize_kde_ratio(c.brier_state(joint))


@_quiet
def collision_rate(true, pred, mask, *, joint=False, radius=0.2):
    """Share of predictions (per agent, then averaged; joint: per sample) that collide, agents as discs."""
    c = _ctx(true, pred, mask)
    return finalize_ratio(c.collision_state(joint, float(radius)), _what(joint))


@_quiet
def displacement_by_step(true, pred, mask, *, joint=False):
    """Mean displacement (joint: mean RMS over agents) at each future step, ``[N_O]``; NaN where no data.

    :class:`NA` with the reason when an error overflows float64 (inputs of 1e308)."""
    t, p, m = check_paths(true, pred, mask)
    s, n = step_errors(t, p, m, joint=joint)
    if not np.isfinite(s[n > 0]).all():
        return NA(OVERFLOW_REASON)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, s / np.where(n > 0, n, 1), np.nan)


@_quiet
def kde_log_probs(true, pred, mask, *, joint=False, singular_rtol=1e-11):
    """KDE log densities ``(log_true, log_pred, ok)`` (see :func:`owl_eval.protocols.trajectory.metrics.kde.kde_log_probs`)."""
    t, p, m = check_paths(true, pred, mask)
    return _kde_log_probs(t, p, m, joint=joint, singular_rtol=singular_rtol)


# every registered trajectory metric (the table's names once each, per-K names as templates ``min_ade_{k}_marginal``:
# every K of metrics.k_values; then the class metrics), always current: what owl_eval.evaluation.registry reads
SPECS = TRAJECTORY.specs
