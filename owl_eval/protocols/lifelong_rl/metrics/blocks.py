"""Block (regime) level lifelong-RL metrics: saturation, terminal performance, recovery time.

A regime is a maximal run of rows with the same (block_num, block_type, block_subtype, task_name)
(``l2logger.util.fill_regime_num``). Everything here works on all regimes at once: segment starts and
lengths, ``np.*.reduceat`` for sums and maxima, no per-block scans of the table.

Ties: "first index of the maximum" and "first index reaching a reference" treat values within a relative
``TIE_RTOL`` (1e-12) as equal. l2metrics compares exactly, so on mathematically tied values its choice
depends on float rounding in the moving average; ours does not.
"""

from __future__ import annotations

import numpy as np
from scipy import stats

from owl_eval.metrics.results import NA
from owl_eval.metrics.validation import as_array
from owl_eval.protocols.lifelong_rl.metrics.smoothing import smooth_segments, window_lengths

TIE_RTOL = 1e-12
TERMINAL_WINDOW = 0.1  # l2metrics get_terminal_perf: last 10% of a training block


def _tol(v):
    return TIE_RTOL * np.maximum(np.abs(v), 1.0)


# ------------------------------------------------------------------------------------ segment helpers


def run_starts(*keys) -> np.ndarray:
    """Start indices of the maximal runs over which every key array is constant (one vectorised pass)."""
    n = len(keys[0])
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.zeros(n - 1, dtype=bool)
    for k in keys:
        change |= k[1:] != k[:-1]
    return np.concatenate(([0], np.flatnonzero(change) + 1)).astype(np.int64)


def segment_sum(values, starts, lengths) -> np.ndarray:
    """Sum of each segment (``np.add.reduceat``: the same pairwise sum as ``np.sum`` of the slice)."""
    out = np.zeros(len(starts))
    ok = lengths > 0
    if ok.any():
        out[ok] = _gapped_reduce(np.add, values, starts[ok], lengths[ok])
    return out


def segment_max(values, starts, lengths) -> np.ndarray:
    out = np.full(len(starts), np.nan)
    ok = lengths > 0
    if ok.any():
        out[ok] = _gapped_reduce(np.maximum, values, starts[ok], lengths[ok])
    return out


def _gapped_reduce(ufunc, values, starts, lengths):
    # reduceat over [s0, e0, s1, e1, ...]: even slots reduce each segment, odd slots the gaps (dropped).
    ext = np.append(values, values.dtype.type(0))
    idx = np.empty(2 * len(starts), dtype=np.int64)
    idx[0::2] = starts
    idx[1::2] = starts + lengths
    return ufunc.reduceat(ext, idx)[0::2]


def first_true(mask, starts, lengths) -> np.ndarray:
    """Index within each segment of its first True, or -1."""
    pos = np.where(mask, np.arange(len(mask)), np.iinfo(np.int64).max)
    first = np.full(len(starts), -1, dtype=np.int64)
    ok = lengths > 0
    if ok.any():
        m = _gapped_reduce(np.minimum, pos, starts[ok], lengths[ok])
        found = m != np.iinfo(np.int64).max
        first[np.flatnonzero(ok)[found]] = m[found] - starts[ok][found]
    return first


def saturation_segments(values, starts, lengths, *, fraction: float = 0.2, max_window: int = 100):
    """Saturation value and time to saturation of every segment (l2metrics ``get_block_saturation_perf``).

    The segment is smoothed (default window, ``window_len=None`` as l2metrics calls it); saturation is
    the maximum of the smoothed curve, time to saturation the first index reaching it.
    """
    wl = window_lengths(lengths, fraction=fraction, max_window=max_window)
    sm = smooth_segments(values, starts, lengths, wl)
    sat = segment_max(sm, starts, lengths)
    seg_of_row = np.repeat(np.arange(len(starts)), lengths)
    mask = np.zeros(len(values), dtype=bool)
    idx = _segment_rows(starts, lengths)
    mask[idx] = sm[idx] >= (sat - _tol(sat))[seg_of_row]
    return sat, first_true(mask, starts, lengths).astype(np.float64), sm


def _segment_rows(starts, lengths) -> np.ndarray:
    """Row indices covered by the segments, in segment order."""
    total = int(lengths.sum())
    return (
        np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(lengths) - lengths, lengths) + np.repeat(starts, lengths)
    )


def terminal_segments(values, starts, lengths, is_test):
    """Terminal performance (mean of the last 10% of a train segment, of all of a test segment) and the
    l2metrics ``exp_to_term_perf`` index ``int((1 - ratio/2) n)``."""
    ratio = np.where(is_test, 1.0, TERMINAL_WINDOW)
    n = lengths.astype(np.float64)
    first = ((1 - ratio) * n).astype(np.int64)  # int() truncation of the same float product as l2metrics
    tail_len = lengths - first
    total = segment_sum(values, starts + first, tail_len)
    with np.errstate(invalid="ignore", divide="ignore"):
        term = np.where(tail_len > 0, total / tail_len, np.nan)
    return term, ((1 - ratio / 2) * n).astype(np.int64)


def episode_means(values, exp_num, regime):
    """Mean value per (regime, exp_num) run: l2metrics averages rows that share an experience number."""
    starts = run_starts(regime, exp_num)
    lengths = np.diff(np.append(starts, len(values)))
    if len(starts) == len(values):
        return values, regime, starts
    return segment_sum(values, starts, lengths) / lengths, regime[starts], starts


# ------------------------------------------------------------------------------- single-curve functions


def saturation(curve, *, fraction: float = 0.2, max_window: int = 100):
    """Saturation value: ``max(smooth(curve))`` (l2metrics ``get_block_saturation_perf``). NA if empty."""
    y = as_array("curve", curve, ndim=1, allow_nan=False)
    if len(y) == 0:
        return NA("empty curve")
    sat, _, _ = saturation_segments(y, np.array([0]), np.array([len(y)]), fraction=fraction, max_window=max_window)
    return float(sat[0])


def time_to_saturation(curve, *, fraction: float = 0.2, max_window: int = 100):
    """Episodes to saturation: first 0-based index where ``smooth(curve)`` reaches its maximum."""
    y = as_array("curve", curve, ndim=1, allow_nan=False)
    if len(y) == 0:
        return NA("empty curve")
    _, t, _ = saturation_segments(y, np.array([0]), np.array([len(y)]), fraction=fraction, max_window=max_window)
    return int(t[0])


def terminal_performance(curve, *, block_type: str = "train"):
    """Mean of the last 10% of a training curve (``curve[int(0.9 n):]``), of all of an evaluation curve.

    l2metrics ``get_terminal_perf``; NA for an empty curve.
    """
    y = as_array("curve", curve, ndim=1, allow_nan=False)
    if len(y) == 0:
        return NA("empty curve")
    term, _ = terminal_segments(y, np.array([0]), np.array([len(y)]), np.array([block_type == "test"]))
    return float(term[0])


def recovery_time(curve, reference: float) -> int:
    """First 0-based index where ``curve >= reference`` (the previous train block's terminal performance);
    ``len(curve) + 1`` if it never gets there (l2metrics ``RecoveryTime``)."""
    y = as_array("curve", curve, ndim=1, allow_nan=False)
    hit = np.flatnonzero(y >= reference - _tol(reference))
    return int(hit[0]) if hit.size else len(y) + 1


def performance_recovery(recovery_times):
    """−(Theil–Sen slope) of a task's recovery times against their order (``scipy.stats.theilslopes``);
    positive when the agent recovers faster with experience. l2metrics ``PerformanceRecovery``.
    NA with fewer than two recovery times."""
    r = as_array("recovery_times", recovery_times, ndim=1)
    r = r[~np.isnan(r)]
    if len(r) < 2:
        return NA(f"performance recovery needs at least 2 recovery times (3 training blocks of the task), got {len(r)}")
    return float(-stats.theilslopes(r)[0])


def recovery_segments(values, starts, lengths, reference, row_counts):
    """Recovery time of each segment against ``reference`` (NaN reference -> NaN result)."""
    seg = np.repeat(np.arange(len(starts)), lengths)
    idx = _segment_rows(starts, lengths)
    mask = np.zeros(len(values), dtype=bool)
    ref = reference[seg]
    with np.errstate(invalid="ignore"):
        mask[idx] = values[idx] >= ref - _tol(ref)
    first = first_true(mask, starts, lengths).astype(np.float64)
    out = np.where(first >= 0, first, row_counts + 1.0)
    return np.where(np.isnan(reference), np.nan, out)
