"""Top-k accuracy of the agent: per trial on the whole trial, before and after the red light, and per mini-batch."""

from __future__ import annotations

import numpy as np

from owl_eval.metrics.keys import MetricKey
from owl_eval.metrics.results import NA, Series
from owl_eval.protocols.ond.metrics.declared import OND
from owl_eval.protocols.ond.metrics.flat import FlatTrials, mean_over

TOP_K = (1, 3)
_WHERE = {"": "the whole trial", "_pre": "samples before the red light", "_post": "samples from the red light on"}


@OND.family(
    *(
        OND.spec(
            f"top{k}{suffix}",
            True,
            (0.0, 1.0),
            description=f"top-{k} accuracy on {where}, mean over trials",
            title="" if suffix else f"Top-{k} accuracy",
        )
        for k in TOP_K
        for suffix, where in _WHERE.items()
    ),
    needs=("flat",),
)
def _top_k(flat: FlatTrials) -> dict[MetricKey, float | NA | Series]:
    """``top{k}{,_pre,_post}``: per trial, the share of samples whose true class is among the k highest scores
    (ties toward the lower column; sail-on-client ``topk_accuracy`` and ``m_acc``, with pre-novelty
    ``[:red_light]``), averaged over the trials that have the segment; and ``top{k}_batch``, the series of
    :func:`batch_accuracy` (the key ``top{k}`` with ``axis="batch"``)."""
    out: dict[MetricKey, float | NA | Series] = {}
    for k in TOP_K:
        for suffix, (lo, hi) in flat.segments().items():
            accuracy = flat.topk_accuracy(k, lo, hi)
            out[MetricKey(f"top{k}{suffix}")] = mean_over(
                accuracy, hi > lo, f"no trial has {suffix[1:]}-novelty samples"
            )
        out[MetricKey(f"top{k}", axis="batch")] = batch_accuracy(flat, flat.rank < k)
    return out


def batch_accuracy(flat: FlatTrials, correct: np.ndarray) -> Series:
    """Accuracy per mini-batch index: each trial's accuracy on its b-th batch, averaged over the trials that have
    a b-th batch (step = b)."""
    n_batches = -(-flat.lengths // flat.batch_size)  # ceil
    batch_offset = np.concatenate(([0], np.cumsum(n_batches)[:-1]))
    batch_of_sample = flat.local_index // flat.batch_size[flat.trial_of_sample]
    cell = batch_offset[flat.trial_of_sample] + batch_of_sample  # one cell per (trial, batch)
    n_cells = int(n_batches.sum())
    cell_accuracy = np.bincount(cell, weights=correct, minlength=n_cells) / np.bincount(cell, minlength=n_cells)
    batch_index_of_cell = np.arange(n_cells) - np.repeat(batch_offset, n_batches)
    steps = np.arange(int(n_batches.max()))
    totals = np.bincount(batch_index_of_cell, weights=cell_accuracy, minlength=steps.size)
    counts = np.bincount(batch_index_of_cell, minlength=steps.size)
    return Series(steps, totals / counts)
