"""The rank of the true class among a sample's K+1 scores: what top-k, the reaction metrics (M3-M6) and the open-set
metrics all read, on arrays already checked by their callers."""

from __future__ import annotations

import numpy as np


def true_class_rank(labels: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Per sample, the 0-based rank of ``labels[i]`` among ``scores[i]`` (ties toward the lower column):
    rank_i = #{j : s_ij > s_i,g} + #{j < g : s_ij == s_i,g} with g = labels_i. ``labels`` are valid column
    indices of ``scores`` (n, K+1); nothing is checked here."""
    true_score = scores[np.arange(labels.size), labels][:, None]
    rank = np.count_nonzero(scores > true_score, axis=1)
    # exact ties with the true class are rare: only those rows pay for the column comparison
    tied = np.count_nonzero(scores == true_score, axis=1) > 1
    if tied.any():
        rows = np.flatnonzero(tied)
        lower_column = np.arange(scores.shape[1])[None, :] < labels[rows, None]
        rank[rows] += np.count_nonzero((scores[rows] == true_score[rows]) & lower_column, axis=1)
    return rank
