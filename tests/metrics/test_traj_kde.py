"""The batched KDE against scipy.stats.gaussian_kde, one KDE at a time, on fresh random inputs.

Covers both evaluation paths (one point per KDE, the NLL; many points, the table), chunk boundaries,
partially observed agents, and degenerate predictions (identical, collinear) that scipy cannot factorise.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats as st

from owl_eval.protocols.trajectory.metrics import kde_nll, trajectory_table
from owl_eval.protocols.trajectory.metrics.kde import (
    _lower_inverse,
    kde_log_probs,
    kde_logpdf_batched,
)


def _scipy_logpdf(data, points):
    """scipy's KDE of data[N, d] at points[M, d]; None where scipy cannot factorise the covariance."""
    try:
        return st.gaussian_kde(data.T).logpdf(points.T)
    except np.linalg.LinAlgError:
        return None


@pytest.mark.parametrize("n,d,m", [(30, 2, 1), (30, 2, 7), (50, 9, 1), (50, 9, 51), (25, 11, 1)])
def test_batched_logpdf_equals_scipy_per_group(n, d, m):
    rng = np.random.default_rng(n * 100 + d * 10 + m)
    g = 13
    data = rng.normal(size=(g, n, d)) * rng.uniform(0.1, 3.0, (g, 1, d)) + rng.uniform(-50, 50, (g, 1, d))
    points = data[:, rng.integers(0, n, m)] + rng.normal(0, 0.5, (g, m, d))
    # a small chunk budget makes several internal chunks
    logp, ok = kde_logpdf_batched(data, points, chunk_elements=3 * n * max(m, d))
    assert ok.all()
    for i in range(g):
        np.testing.assert_allclose(logp[i], _scipy_logpdf(data[i], points[i]), rtol=0, atol=1e-9)


def test_batched_logpdf_leaves_the_callers_data_unchanged():
    rng = np.random.default_rng(1)
    data = rng.normal(size=(4, 20, 3))
    before = data.copy()
    kde_logpdf_batched(data, data[:, :1])
    np.testing.assert_array_equal(data, before)


def test_lower_inverse_inverts_random_triangles():
    rng = np.random.default_rng(2)
    for d in (1, 2, 5, 24, 37):
        chol = np.tril(rng.normal(size=(6, d, d)))
        chol[:, np.arange(d), np.arange(d)] = rng.uniform(0.5, 2.0, (6, d))
        inv = _lower_inverse(chol)
        np.testing.assert_allclose(np.matmul(chol, inv), np.broadcast_to(np.eye(d), chol.shape), atol=1e-10)
        assert np.all(np.triu(inv, 1) == 0)


def _paths(rng, n_s=9, n_p=40, n_a=3, n_o=5):
    true = rng.normal(size=(n_s, n_a, n_o, 2)).cumsum(2)
    pred = true[:, None] + rng.normal(0, 0.3, (n_s, n_p, n_a, n_o, 2)).cumsum(3)
    mask = np.ones((n_s, n_a, n_o), bool)
    mask[0, 1, 3:] = False  # agent observed for 3 steps
    mask[1, 2, :] = False  # agent absent
    mask[2, 0, [0, 2]] = False  # gaps
    # degenerate KDEs: identical predictions, predictions on a line
    pred[3, :, 0] = pred[3, 0, 0]
    pred[4, :, 1] = true[4, 1] + rng.normal(size=(n_p, 1, 1)) * np.array([1.0, 2.0])
    # masked steps hold NaN (allowed, and must not leak into any KDE)
    return np.where(mask[..., None], true, np.nan), np.where(mask[:, None, ..., None], pred, np.nan), mask


@pytest.mark.parametrize("joint", [False, True])
@pytest.mark.parametrize("truth_only", [False, True])
def test_kde_log_probs_equal_scipy_with_degenerate_agents(joint, truth_only):
    rng = np.random.default_rng(7 + joint + 2 * truth_only)
    true, pred, mask = _paths(rng)
    log_true, log_pred, ok = kde_log_probs(true, pred, mask, joint=joint, truth_only=truth_only)
    n_s, n_p, n_a = pred.shape[:3]
    keys = [(s,) for s in range(n_s)] if joint else [(s, a) for s in range(n_s) for a in range(n_a)]
    n_singular = 0
    for key in keys:
        m = mask[key[0]] if joint else mask[key]
        if not m.any():
            assert not ok[key] and np.isnan(log_true[key])
            continue
        sel = (slice(None),) + ((m,) if joint else (key[1], m))
        data = pred[key[0]][sel].reshape(n_p, -1)
        truth = (true[key[0]][m] if joint else true[key][m]).reshape(1, -1)
        ref = _scipy_logpdf(data, np.vstack([truth, data]))
        degenerate = key[0] in (3, 4) and (joint or key[1] == (0 if key[0] == 3 else 1))
        if degenerate:  # scipy raises or returns meaningless numbers; ours is N/A
            n_singular += 1
            assert not ok[key] and np.isnan(log_true[key])
            continue
        assert ok[key]
        assert abs(log_true[key] - ref[0]) <= 1e-9
        if not truth_only:
            got = log_pred[key[0]] if joint else log_pred[key[0], :, key[1]]
            np.testing.assert_allclose(got, ref[1:], rtol=0, atol=1e-9)
    assert n_singular == 2


def test_kde_nll_equals_the_tables_nll():
    """kde_nll (truth-only KDE) and the table (full KDE shared by all KDE metrics) give the same number."""
    true, pred, mask = _paths(np.random.default_rng(11))
    res = trajectory_table(true, pred, mask, rng=np.random.default_rng(0), k_values=(5,))
    for joint in (False, True):
        assert kde_nll(true, pred, mask, joint=joint) == pytest.approx(
            res[f"kde_nll_{'joint' if joint else 'marginal'}"], rel=0, abs=1e-12
        )
