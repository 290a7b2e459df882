"""l2metrics' moving-average smoothing, for one curve or for many segments of one array at once.

l2metrics 3.1 ``_localutil.smooth`` (the SciPy-cookbook recipe): the signal is padded with ``wl - 1``
mirrored samples at each end (the end samples themselves are not repeated), convolved with the normalised
window in ``valid`` mode, and the slice ``[wl//2 - 1 : -ceil(wl/2)]`` is kept, so output ``j`` is the
weighted mean of padded samples ``j + wl//2 - 1 .. j + wl//2 + wl - 2``. The default window length is
``min(int(0.2 n), 100)`` (also used when a given ``window_len`` exceeds ``n``); below 3 the curve is
returned unchanged, so curves shorter than 15 samples are never smoothed.
"""

from __future__ import annotations

import numpy as np

from owl_eval.metrics.validation import MetricInputError, as_array, check_option

WINDOWS = ("flat", "hanning", "hamming", "bartlett", "blackman")


def window_lengths(n, *, window_len: int | None = None, fraction: float = 0.2, max_window: int = 100) -> np.ndarray:
    """Window length l2metrics uses for curves of length ``n`` (vectorised over ``n``).

    ``window_len`` is used where ``n >= window_len``; elsewhere ``min(int(fraction * n), max_window)``.
    """
    n = np.asarray(n, dtype=np.int64)
    default = np.minimum((n * float(fraction)).astype(np.int64), max_window)
    if window_len is None:
        return default
    return np.where(n < window_len, default, int(window_len))


def _weights(wl: int, window: str) -> np.ndarray:
    w = np.ones(wl, dtype=np.float64) if window == "flat" else getattr(np, window)(wl)
    return w / w.sum()


def smooth_segments(x, starts, lengths, wl, *, window: str = "flat") -> np.ndarray:
    """Smooth every segment ``x[starts[i] : starts[i] + lengths[i]]`` with its own window ``wl[i]``.

    Segments with ``wl < 3`` are copied unchanged. One pass builds all mirrored paddings; the windowed sum
    then loops over window offsets only (at most ``max(wl)`` vector operations for the whole array).
    Each output is the same sequence of operations on its window, so equal windows give equal values.
    """
    x = np.asarray(x, dtype=np.float64)
    out = x.copy()
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(lengths, dtype=np.int64)
    wl = np.asarray(wl, dtype=np.int64)
    sel = (wl >= 3) & (lengths > 0)
    if not sel.any():
        return out
    if np.any(wl[sel] > lengths[sel]):
        raise MetricInputError("smooth_segments: a window is longer than its segment")
    # Longest windows first: the rows still active at offset k then form a prefix.
    order = np.argsort(-wl[sel], kind="stable")
    s, n, w = starts[sel][order], lengths[sel][order], wl[sel][order]
    m = len(s)
    plen = n + 2 * (w - 1)
    poff = np.cumsum(plen) - plen
    seg = np.repeat(np.arange(m), plen)
    k = np.arange(int(plen.sum()), dtype=np.int64) - poff[seg]
    wm1, nn = (w - 1)[seg], n[seg]
    # mirrored padding: x[wl-1 .. 1], x, x[n-2 .. n-wl]
    local = np.where(k < wm1, wm1 - k, np.where(k < wm1 + nn, k - wm1, 2 * nn + wm1 - 2 - k))
    padded = x[s[seg] + local]
    flat = window == "flat"
    if flat:
        padded *= (1.0 / w)[seg]  # the flat window's weights, 1/wl each, applied before summing as convolve does
    orow_seg = np.repeat(np.arange(m), n)
    j = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n)
    base = poff[orow_seg] + j + (w // 2 - 1)[orow_seg]
    rows_w = w[orow_seg]
    if flat:
        acc = padded[base].copy()
    else:
        wt = {int(v): _weights(int(v), window) for v in np.unique(w)}
        acc = padded[base] * np.array([wt[int(v)][0] for v in w])[orow_seg]
    # rows_w is non-increasing: active[k] = number of rows whose window is longer than k
    active = np.searchsorted(-rows_w, -np.arange(int(w.max())), side="left").tolist()
    for off in range(1, int(w.max())):
        a = active[off]
        if a == 0:
            break
        if flat:
            acc[:a] += padded[base[:a] + off]
        else:
            coef = np.array([wt[int(v)][off] if v > off else 0.0 for v in w])[orow_seg[:a]]
            acc[:a] += padded[base[:a] + off] * coef
    out[np.repeat(s, n) + j] = acc
    return out


def smooth(
    x, *, window_len: int | None = None, window: str = "flat", fraction: float = 0.2, max_window: int = 100
) -> np.ndarray:
    """Moving-average smoothing of a 1-D curve, equal to l2metrics 3.1 ``_localutil.smooth``.

    ``y[j] = sum_i w_i * s[j + wl//2 - 1 + i]`` where ``s`` is ``x`` padded with ``wl - 1`` mirrored samples
    at each end and ``w`` the normalised window; ``wl = min(int(fraction * n), max_window)`` unless
    ``window_len`` (<= n) is given; ``wl < 3`` returns ``x`` unchanged. Example (l2metrics' own test):
    ``smooth([1..10], window_len=3) == [2, 1.667, 2, 3, 4, 5, 6, 7, 8, 9]``.
    """
    x = as_array("x", x, ndim=1)
    check_option("window", window, WINDOWS)
    x = x[~np.isnan(x)]  # l2metrics drops NaN from the padded signal; with none left in x that is the same
    n = len(x)
    wl = window_lengths(np.array([n]), window_len=window_len, fraction=fraction, max_window=max_window)
    return smooth_segments(x, np.array([0]), np.array([n]), wl, window=window)
