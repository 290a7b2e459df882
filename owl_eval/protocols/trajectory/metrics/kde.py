"""Batched Gaussian KDE of trajectory predictions (the numbers of ``scipy.stats.gaussian_kde``).

For every KDE (marginal: one per valid agent of a sample; joint: one per sample) the N_P predictions
over the valid steps only (dimension ``d = 2 x number of valid steps``; joint: the valid steps of all
agents concatenated) are the data. Scott's rule on the full covariance, as scipy's default:

    factor = N_P ** (-1 / (d + 4)),   Sigma = factor^2 * cov(data, ddof=1),  Sigma = L L^T
    log p(x) = logsumexp_i( -0.5 ||L^-1 (x - x_i)||^2 ) - log N_P - sum(log diag L) - d/2 log(2 pi)

evaluated at the truth (the NLL: ``truth_only``) or at the truth and every prediction (the table). All
KDEs of the same dimension are computed at once, in chunks of ~16 MB gathered straight from ``pred``
(the only copy): mean and covariance by BLAS matmuls, batched Cholesky, the inverse of the triangle by
block recursion, whitening; squared distances directly (one point) or by the Gram identity (many
points); a hand-written logsumexp (max shift, exp, sum, log).

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
    data = np.asarray(data, dtype=float)
    points = np.asarray(points, dtype=float)
    g, n, d = data.shape
    m = points.shape[1]
    out = np.full((g, m), np.nan)
    ok = np.zeros(g, bool)
    overflow = np.zeros(g, bool)
    if g > 0 and n > d:
        step = _groups_per_chunk(chunk_elements, n, d, m)
        for lo in range(0, g, step):
            hi = min(g, lo + step)
            # the chunk works in place on its copy of the data
            out[lo:hi], ok[lo:hi], overflow[lo:hi] = _kde_chunk(data[lo:hi].copy(), points[lo:hi], singular_rtol)
    return (out, ok, overflow) if return_overflow else (out, ok)


def _groups_per_chunk(chunk_elements, n, d, m):
    """KDEs per internal chunk: bounded by both the distance block [G, M, N] and the data block [G, N, d]."""
    return max(1, chunk_elements // max(1, m * n, n * d))


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


def _lower_inverse(chol):
    """Batched inverse of lower-triangular matrices by 2x2 block recursion,
    ``[[A, 0], [B, C]]^-1 = [[A^-1, 0], [-C^-1 B A^-1, C^-1]]``: batched matmuls only, 2-3x faster than
    ``np.linalg.inv`` (an LU factorisation that ignores the triangle) on [800, 24, 24]."""
    d = chol.shape[-1]
    if d == 1:
        return 1.0 / chol
    h = d // 2
    out = np.zeros_like(chol)
    a_inv = _lower_inverse(chol[:, :h, :h])
    c_inv = _lower_inverse(chol[:, h:, h:])
    out[:, :h, :h] = a_inv
    out[:, h:, h:] = c_inv
    out[:, h:, :h] = -np.matmul(c_inv, np.matmul(chol[:, h:, :h], a_inv))
    return out


@np.errstate(over="ignore", invalid="ignore", divide="ignore")  # overflows are detected below, not printed
def _kde_chunk(data, points, singular_rtol):
    """``data`` [g, n, d] is overwritten (it is the caller's scratch copy)."""
    _, n, d = data.shape
    m = points.shape[1]
    mean = np.matmul(np.full(n, 1.0 / n), data)  # [g, d]; a BLAS call, 3x faster than data.mean(1)
    data -= mean[:, None, :]  # centred in place
    xc = data
    cov = np.matmul(xc.transpose(0, 2, 1), xc)
    cov /= n - 1
    overflow = ~np.isfinite(cov).all((1, 2))
    cov[overflow] = np.eye(d)  # placeholder: those rows are reported as overflows, not factorised
    chol, ok = _cholesky(cov, singular_rtol)
    ok &= ~overflow
    factor = n ** (-1.0 / (d + 4))
    # whitening W = (factor * chol)^-1, applied from the right as W^T
    w_t = _lower_inverse(chol).transpose(0, 2, 1)
    w_t *= 1.0 / factor
    if m == 1:
        # one point per KDE (the NLL): whiten the differences x_i - point directly, no Gram identity
        xc -= (points[:, 0] - mean)[:, None, :]
        z = np.matmul(xc, w_t)
        log_k = np.matmul(z[:, :, None, :], z[:, :, :, None])[:, None, :, 0, 0]  # [g, 1, n] squared distances
    else:
        yd = np.matmul(xc, w_t)  # [g, n, d] whitened data
        yp = np.matmul(points - mean[:, None, :], w_t)  # [g, m, d] whitened points
        log_k = np.matmul(yp, yd.transpose(0, 2, 1))
        log_k *= -2.0
        log_k += np.einsum("gmd,gmd->gm", yp, yp)[:, :, None]
        log_k += np.einsum("gnd,gnd->gn", yd, yd)[:, None, :]
        np.maximum(log_k, 0.0, out=log_k)
    log_k *= -0.5  # now the log kernel values -0.5 d2
    top = log_k.max(-1)
    log_k -= top[:, :, None]
    np.exp(log_k, out=log_k)
    lse = np.log(log_k.sum(-1)) + top
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


def kde_log_probs(
    true,
    pred,
    mask,
    *,
    joint=False,
    singular_rtol=1e-11,
    chunk_elements=CHUNK_ELEMENTS,
    return_overflow=False,
    truth_only=False,
):
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
    # Views [S, A', P, K, 2] / [S, A', K, 2] without copying: one KDE per (sample, agent) over the
    # agent's steps (marginal), or one per sample over all agents' steps (joint, A' = 1).
    if joint:
        groups_pred = pred.reshape(n_s, 1, n_p, n_a * n_o, 2)
        groups_true = true.reshape(n_s, 1, n_a * n_o, 2)
        groups_mask = mask.reshape(n_s, n_a * n_o)
    else:
        groups_pred = pred.transpose(0, 2, 1, 3, 4)
        groups_true = true
        groups_mask = mask.reshape(n_s * n_a, n_o)
    with _single_blas_thread():
        log_true, log_pred, ok, overflow = _kde_log_probs(
            groups_mask, groups_true, groups_pred, singular_rtol, chunk_elements, truth_only
        )
    if not joint:
        log_true, ok, overflow = (x.reshape(n_s, n_a) for x in (log_true, ok, overflow))
        if log_pred is not None:
            log_pred = log_pred.reshape(n_s, n_a, n_p).transpose(0, 2, 1)
    out = (log_true, log_pred, ok, overflow)
    return out if return_overflow else out[:3]


def _single_blas_thread():
    """The batched matrices are small (d <= ~100): BLAS threads only add overhead and, on a loaded
    2-core machine, made the KDE 3-10x slower. One thread per process; parallelise across processes."""
    if threadpool_limits is None:
        return contextlib.nullcontext()
    return threadpool_limits(limits=1, user_api="blas")


def _gather(groups_pred, groups_true, rows, steps, n_steps):
    """Copies of the KDEs' data [G, P, 2c] and truths [G, 1, 2c] for group ``rows`` with ``c`` valid steps
    each (``steps`` [G, c], ignored when every step is valid): the only copy of the predictions made."""
    per_sample, n_p = groups_pred.shape[1:3]
    s, a = np.divmod(rows, per_sample)
    g, c = steps.shape
    if c == n_steps:  # every step valid: plain row selection
        data, truth = groups_pred[s, a], groups_true[s, a]
    else:
        data = groups_pred[s[:, None, None], a[:, None, None], np.arange(n_p)[None, :, None], steps[:, None, :]]
        truth = groups_true[s[:, None], a[:, None], steps]
    return data.reshape(g, n_p, 2 * c), truth.reshape(g, 1, 2 * c)


def _kde_log_probs(groups_mask, groups_true, groups_pred, singular_rtol, chunk_elements, truth_only):
    order, counts = _ordered_steps(groups_mask)
    n_rows, n_steps = groups_mask.shape
    n_p = groups_pred.shape[2]
    log_true = np.full(n_rows, np.nan)
    log_pred = None if truth_only else np.full((n_rows, n_p), np.nan)
    ok = np.zeros(n_rows, bool)
    overflow = np.zeros(n_rows, bool)
    for c in np.unique(counts):
        if c == 0:
            continue
        all_rows = np.nonzero(counts == c)[0]
        m = 1 if truth_only else n_p + 1
        step = _groups_per_chunk(chunk_elements, n_p, 2 * c, m)
        for lo in range(0, len(all_rows), step):  # gather per chunk: memory stays bounded, data stays in cache
            rows = all_rows[lo : lo + step]
            if n_p <= 2 * c:  # no more predictions than dimensions: singular by definition
                break
            data, truth = _gather(groups_pred, groups_true, rows, order[rows, :c], n_steps)
            pts = truth if truth_only else np.concatenate([data, truth], axis=1)
            logp, good, over = _kde_chunk(data, pts, singular_rtol)  # data is overwritten: it is our copy
            if log_pred is not None:  # not truth_only
                log_pred[rows] = logp[:, :n_p]
            log_true[rows] = logp[:, -1]
            ok[rows] = good
            overflow[rows] = over
    return log_true, log_pred, ok, overflow
