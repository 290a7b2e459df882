"""Cross-block lifelong-RL metrics: performance maintenance and forward/backward transfer.

Both work on the regime table (one entry per regime, in log order) and the terminal performance of each
regime; they reproduce l2metrics 3.1 ``PerformanceMaintenance`` and ``Transfer`` including which value wins
when several trainings fall between the same two evaluations (the later one in task-pair order).
"""

from __future__ import annotations

from itertools import permutations
from typing import Any

import numpy as np

from owl_eval.metrics.results import NA
from owl_eval.metrics.validation import MetricInputError, as_array, check_option


def maintenance_values(train_regimes, test_regimes, term_perf, *, method: str = "mrlep") -> np.ndarray:
    """Differences ``term_perf[test] − term_perf[reference]`` for one task (l2metrics ``PerformanceMaintenance``).

    Regime numbers are positions in log order. The reference tests are the first evaluation after each
    training regime; every later evaluation that is not itself a reference test is compared with the most
    recent reference test (``mrlep``) or with the most recent training regime (``mrtlp``).
    """
    check_option("method", method, ("mrlep", "mrtlp"))
    train = np.sort(np.asarray(train_regimes, dtype=np.int64))
    test = np.sort(np.asarray(test_regimes, dtype=np.int64))
    tp = np.asarray(term_perf, dtype=np.float64)
    if len(train) == 0 or len(test) == 0:
        return np.zeros(0)
    pos = np.searchsorted(test, train, side="right")
    ref_tests = test[pos[pos < len(test)]]
    if len(ref_tests) == 0:
        return np.zeros(0)
    assess = test[(test > ref_tests.min()) & ~np.isin(test, ref_tests)]
    if method == "mrlep":
        ref = ref_tests[np.searchsorted(ref_tests, assess, side="left") - 1]
    else:
        ref = train[np.searchsorted(train, assess, side="left") - 1]
    return tp[assess] - tp[ref]


def performance_maintenance(block_type, term_perf, *, method: str = "mrlep"):
    """Performance maintenance of one task from its regimes in log order.

    ``block_type[i]`` is ``"train"`` or ``"test"``, ``term_perf[i]`` the regime's terminal performance
    (mean of an evaluation block). Returns the mean of :func:`maintenance_values` (negative = forgetting),
    or NA when no evaluation follows a reference evaluation.
    """
    bt = np.asarray(block_type)
    tp = as_array("term_perf", term_perf, ndim=1)
    if bt.shape != tp.shape:
        raise MetricInputError(f"block_type: shape {bt.shape} does not match term_perf shape {tp.shape}")
    idx = np.arange(len(bt))
    vals = maintenance_values(idx[bt == "train"], idx[bt == "test"], tp, method=method)
    if len(vals) == 0:
        return NA("no evaluation block after the first evaluation that follows a training block of the task")
    return float(np.mean(vals))


def transfer_values(regime_task, is_train, is_test, term_perf, tasks) -> dict:
    """Forward/backward transfer values per (trained task, evaluated task) pair, in log order.

    Returns ``{"forward_transfer_ratio": {(src, tgt): [values]}, "forward_transfer_contrast": ...,
    "backward_transfer_ratio": ..., "backward_transfer_contrast": ...}``. For each ordered pair (src, tgt)
    and each training regime of src that lies between two consecutive evaluations t1 < t2 of tgt:
    ratio = tp2 / tp1 (skipped when tp1 = 0), contrast = (tp2 − tp1) / (tp1 + tp2) (skipped when the sum
    is 0). Forward: src trained before tgt's first training (or tgt never trained); backward: after it.
    As in l2metrics, one value is kept per evaluation regime t2 (the last pair written wins).
    """
    regime_task = np.asarray(regime_task)
    tp = np.asarray(term_perf, dtype=np.float64)
    per_t2: dict[tuple[str, str], dict[int, tuple[Any, float]]] = {
        (d, k): {} for d in ("forward", "backward") for k in ("ratio", "contrast")
    }
    regs = np.arange(len(regime_task))
    train_of = {t: regs[is_train & (regime_task == t)] for t in tasks}
    test_of = {t: regs[is_test & (regime_task == t)] for t in tasks}
    for src, tgt in permutations(tasks, 2):
        tr = train_of[src]
        if len(tr) == 0:
            continue
        otr, ote = train_of[tgt], test_of[tgt]
        if len(ote) < 2:
            continue
        if len(otr):
            groups = (("forward", tr[tr < otr.min()]), ("backward", tr[tr > otr.min()]))
        else:
            groups = (("forward", tr),)
        for direction, trained in groups:
            pos = np.searchsorted(ote, trained)
            ok = (pos > 0) & (pos < len(ote))
            for p in pos[ok].tolist():
                t1, t2 = int(ote[p - 1]), int(ote[p])
                tp1, tp2 = tp[t1], tp[t2]
                if tp1 != 0:
                    per_t2[(direction, "ratio")][t2] = (src, tp2 / tp1)
                if tp1 + tp2 != 0:
                    per_t2[(direction, "contrast")][t2] = (src, (tp2 - tp1) / (tp1 + tp2))
    out = {}
    for (direction, kind), table in per_t2.items():
        pairs: dict = {}
        for t2 in sorted(table):
            src, value = table[t2]
            pairs.setdefault((src, regime_task[t2]), []).append(float(value))
        out[f"{direction}_transfer_{kind}"] = pairs
    return out
