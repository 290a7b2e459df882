"""Batched Gaussian KDE of trajectory predictions (the numbers of ``scipy.stats.gaussian_kde``).

For every KDE (marginal: one per valid agent of a sample; joint: one per sample) the N_P predictions
over the valid steps only (dimension ``d = 2 x number of valid steps``; joint: the valid steps of all
agents concatenated) are the data. Scott's rule on the full covariance, as scipy's default:

    factor = N_P ** (-1 / (d + 4)),   Sigma = factor^2 * cov(data, ddof=1),  Sigma = L L^T
    log p(x) = logsumexp_i( -0.5 ||L^-1 (x - x_i)||^2 ) - log N_P - sum(log diag L) - d/2 log(2 pi)

evaluated at the truth and at every prediction. All KDEs of the same dimension are computed at once:
batched covariance (matmul), batched Cholesky, whitening, squared distances by the Gram identity and a
hand-written logsumexp (max shift, exp, sum, log), in internal chunks to bound memory.

A KDE is *singular* (result NaN, counted by the caller as N/A) when N_P <= d, when the Cholesky fails,
or when a conditional variance ``diag(L)^2`` is below ``singular_rtol`` times the largest variance
(predictions that are identical or lie in a lower-dimensional subspace). scipy raises
``LinAlgError`` in the first two cases and returns meaningless numbers in the third. A KDE *overflows*
(result NaN, reported apart from the singular ones) when its covariance or a log density is not a
finite float64: predictions spread over ~1e150 or more (say 1e308) square beyond float64's range.
"""
from __future__ import annotations

import contextlib

import numpy as np

try:  # a dependency of scikit-learn, so normally present
    from threadpoolctl import threadpool_limits
except ImportError:  # pragma: no cover
    threadpool_limits = None

_LOG_2PI = np.log(2.0 * np.pi)
# elements of the [G, M, N_P] distance block per internal chunk (8 bytes each)
CHUNK_ELEMENTS = 2_000_000


def kde_logpdf_batched(data, points, *, singular_rtol=1e-11, chunk_elements=CHUNK_ELEMENTS, return_overflow=False):
    """Log density of ``points[G, M, d]`` under the Gaussian KDE of ``data[G, N, d]``, per group.

    Returns ``(logp[G, M], ok[G])``; rows with ``ok == False`` (singular covariance, or an overflow) are
    NaN. ``return_overflow`` adds ``overflow[G]``: the rows whose numbers left float64's range.
    """
    g, n, d = data.shape
    m = points.shape[1]
    out = np.full((g, m), np.nan)
    ok = np.zeros(g, bool)
    overflow = np.zeros(g, bool)
    if g > 0 and n > d:
        step = max(1, chunk_elements // max(1, m * n))
        for lo in range(0, g, step):
            hi = min(g, lo + step)
            out[lo:hi], ok[lo:hi], overflow[lo:hi] = _kde_chunk(data[lo:hi], points[lo:hi], singular_rtol)
    return (out, ok, overflow) if return_overflow else (out, ok)


def _cholesky(cov, singular_rtol):
    """Batched lower Cholesky; singular matrices get the identity and ``ok = False``."""
    g, d, _ = cov.shape
    try:
        chol = np.linalg.cholesky(cov)
        ok = np.ones(g, bool)
    except np.linalg.LinAlgError:
        chol = np.empty_like(cov)
        ok = np.ones(g, bool)
        for i in range(g):
            try:
                chol[i] = np.linalg.cholesky(cov[i])
            except np.linalg.LinAlgError:
                ok[i] = False
                chol[i] = np.eye(d)
    diag = np.diagonal(chol, axis1=1, axis2=2)
    scale = np.diagonal(cov, axis1=1, axis2=2).max(-1)
    ok &= np.all(diag**2 > singular_rtol * scale[:, None], axis=-1) & (scale > 0)
    chol[~ok] = np.eye(d)
    return chol, ok


@np.errstate(over="ignore", invalid="ignore", divide="ignore")  # overflows are detected below, not printed
def _kde_chunk(data, points, singular_rtol):
    g, n, d = data.shape
    mean = data.mean(1, keepdims=True)
    xc = data - mean
    cov = np.matmul(xc.transpose(0, 2, 1), xc) / (n - 1)
    overflow = ~np.isfinite(cov).all((1, 2))
    cov[overflow] = np.eye(d)  # placeholder: those rows are reported as overflows, not factorised
    chol, ok = _cholesky(cov, singular_rtol)
    ok &= ~overflow
    factor = n ** (-1.0 / (d + 4))
    inv = np.linalg.inv(chol) / factor  # inverse of the kernel's Cholesky factor L = factor * chol
    inv_t = inv.transpose(0, 2, 1)
    yd = np.matmul(xc, inv_t)  # [g, n, d] whitened data
    yp = np.matmul(points - mean, inv_t)  # [g, m, d] whitened points
    d2 = np.matmul(yp, yd.transpose(0, 2, 1))
    d2 *= -2.0
    d2 += np.einsum("gmd,gmd->gm", yp, yp)[:, :, None]
    d2 += np.einsum("gnd,gnd->gn", yd, yd)[:, None, :]
    np.maximum(d2, 0.0, out=d2)
    d2 *= -0.5  # now the log kernel values a = -0.5 d2
    top = d2.max(-1)
    d2 -= top[:, :, None]
    np.exp(d2, out=d2)
    lse = np.log(d2.sum(-1)) + top
    log_norm = np.log(n) + np.log(np.diagonal(chol, axis1=1, axis2=2)).sum(-1) + d * np.log(factor) + 0.5 * d * _LOG_2PI
    logp = lse - log_norm[:, None]
    overflow |= ok & ~np.isfinite(logp).all(-1)
    ok &= ~overflow
    logp[~ok] = np.nan
    return logp, ok, overflow


def _ordered_steps(mask2d):
    """For rows of a boolean matrix: indices of the True entries first (stable), and the counts."""
    order = np.argsort(~mask2d, axis=-1, kind="stable")
    return order, mask2d.sum(-1)


def kde_log_probs(true, pred, mask, *, joint=False, singular_rtol=1e-11, chunk_elements=CHUNK_ELEMENTS,
                  return_overflow=False, truth_only=False):
    """KDE log densities of the truth and of each prediction under the KDE of the predictions.

    ``truth_only``: the truth's density alone (what the NLL needs); ``log_pred`` is then None. Evaluating
    one point instead of ``N_P + 1`` per KDE makes it several times faster.

    Marginal: returns ``(log_true[N_S, N_A], log_pred[N_S, N_P, N_A], ok[N_S, N_A])``;
    joint: ``(log_true[N_S], log_pred[N_S, N_P], ok[N_S])``. Entries of agents (samples) without a
    valid step are NaN with ``ok`` False; singular KDEs are NaN with ``ok`` False as well (tell them
    apart with the mask). ``return_overflow`` adds ``overflow`` (shaped as ``ok``): the KDEs whose
    numbers left float64's range (NaN with ``ok`` False, but not singular).
    """
    n_s, n_p, n_a, n_o, _ = pred.shape
    if joint:
        flat_mask = mask.reshape(n_s, n_a * n_o)
        flat_true = true.reshape(n_s, 1, n_a * n_o, 2)
        flat_pred = pred.reshape(n_s, n_p, n_a * n_o, 2)
    else:
        flat_mask = mask.reshape(n_s * n_a, n_o)
        flat_true = true.reshape(n_s * n_a, 1, n_o, 2)
        flat_pred = pred.transpose(0, 2, 1, 3, 4).reshape(n_s * n_a, n_p, n_o, 2)
    with _single_blas_thread():
        out = _kde_log_probs(flat_mask, flat_true, flat_pred, joint, n_s, n_p, n_a, singular_rtol, chunk_elements,
                             truth_only)
    return out if return_overflow else out[:3]


def _single_blas_thread():
    """The batched matrices are small (d <= ~100): BLAS threads only add overhead and, on a loaded
    2-core machine, made the KDE 3-10x slower. One thread per process; parallelise across processes."""
    if threadpool_limits is None:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _kde_log_probs(flat_mask, flat_true, flat_pred, joint, n_s, n_p, n_a, singular_rtol, chunk_elements,
                   truth_only=False):
    order, counts = _ordered_steps(flat_mask)
    n_rows = flat_mask.shape[0]
    log_true = np.full(n_rows, np.nan)
    log_pred = None if truth_only else np.full((n_rows, n_p), np.nan)
    ok = np.zeros(n_rows, bool)
    overflow = np.zeros(n_rows, bool)
    for c in np.unique(counts):
        if c == 0:
            continue
        rows = np.nonzero(counts == c)[0]
        idx = order[rows, :c]  # [G, c] indices of the valid steps
        if c == flat_mask.shape[1]:  # every step valid: no gather needed
            pts_true, pts_pred = flat_true[rows], flat_pred[rows]
        else:
            pts_true = np.take_along_axis(flat_true[rows], idx[:, None, :, None], axis=2)
            pts_pred = np.take_along_axis(flat_pred[rows], idx[:, None, :, None], axis=2)
        dat = pts_pred.reshape(len(rows), n_p, 2 * c)
        truth = pts_true.reshape(len(rows), 1, 2 * c)
        pts = truth if truth_only else np.concatenate([dat, truth], axis=1)
        logp, good, over = kde_logpdf_batched(dat, pts, singular_rtol=singular_rtol, chunk_elements=chunk_elements,
                                              return_overflow=True)
        if not truth_only:
            log_pred[rows] = logp[:, :n_p]
        log_true[rows] = logp[:, -1]
        ok[rows] = good
        overflow[rows] = over
    if joint:
        return log_true, log_pred, ok, overflow
    per_agent = None if truth_only else log_pred.reshape(n_s, n_a, n_p).transpose(0, 2, 1)
    return log_true.reshape(n_s, n_a), per_agent, ok.reshape(n_s, n_a), overflow.reshape(n_s, n_a)
