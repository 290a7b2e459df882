"""The vectorised pipeline against a plain-loop implementation of l2metrics 3.1's documented algorithm
(per regime: smooth train blocks, normalise per task to [1, 101], smooth again for saturation, terminal
performance on the last 10%, recovery against the previous training block of the task)."""

import math

import numpy as np
import pytest

from owl_eval.formats.l2logger import EpisodeLog
from owl_eval.protocols.lifelong_rl.metrics import evaluate_log


def loop_smooth(x):
    x = list(x)
    n = len(x)
    w = min(int(n * 0.2), 100)
    if w < 3:
        return x
    s = x[w - 1 : 0 : -1] + x + x[-2 : -w - 1 : -1]
    y = [sum(s[j : j + w]) / w for j in range(len(s) - w + 1)]
    return y[int(math.floor(w / 2 - 1)) : len(y) - int(math.ceil(w / 2))]


def loop_reference(blocks):
    """blocks: list of (type, task, rewards). Returns per-regime (saturation, eps_to_sat, term, recovery)."""
    proc = [loop_smooth(r) if t == "train" else list(r) for t, _, r in blocks]
    lo, hi = {}, {}
    for (t, task, _), p in zip(blocks, proc):
        lo[task] = min(lo.get(task, math.inf), min(p))
        hi[task] = max(hi.get(task, -math.inf), max(p))
    proc = [[(v - lo[task]) / (hi[task] - lo[task]) * 100 + 1 for v in p] for (_, task, _), p in zip(blocks, proc)]
    sat, tts, term, rec = [], [], [], []
    last_train_term = {}
    for (t, task, _), p in zip(blocks, proc):
        sm = loop_smooth(p)
        m = max(sm)
        sat.append(m)
        tts.append(next(i for i, v in enumerate(sm) if v >= m - 1e-9))
        tail = p[int((1 - (1.0 if t == "test" else 0.1)) * len(p)) :]
        term.append(sum(tail) / len(tail))
        if t == "train" and task in last_train_term:
            ref = last_train_term[task]
            rec.append(next((i for i, v in enumerate(p) if v >= ref - 1e-9), len(p) + 1))
        else:
            rec.append(float("nan"))
        if t == "train":
            last_train_term[task] = term[-1]
    return sat, tts, term, rec


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_block_table_equals_loop_reference(seed):
    rng = np.random.default_rng(seed)
    blocks = []
    for b in range(40):
        t = "train" if rng.random() < 0.5 else "test"
        task = ["a_x", "b_y", "c_z"][int(rng.integers(3))]
        n = int(rng.integers(1, 250))
        blocks.append((t, task, list(np.cumsum(rng.normal(0.05, 1.0, n)))))
    # merge-proof: consecutive blocks always differ in block_num, so each block is its own regime
    bn = np.concatenate([[i] * len(r) for i, (_, _, r) in enumerate(blocks)])
    log = EpisodeLog.from_columns(
        block_num=bn,
        block_type=np.concatenate([[t] * len(r) for t, _, r in blocks]).astype(object),
        task_name=np.concatenate([[k] * len(r) for _, k, r in blocks]).astype(object),
        reward=np.concatenate([r for _, _, r in blocks]),
    )
    res = evaluate_log(log)
    sat, tts, term, rec = loop_reference(blocks)
    b = res["blocks"]
    assert np.allclose(b["saturation"], sat, rtol=1e-9)
    assert b["eps_to_sat"].tolist() == tts
    assert np.allclose(b["term_perf"], term, rtol=1e-9)
    assert np.allclose(b["recovery_time"], rec, equal_nan=True)
