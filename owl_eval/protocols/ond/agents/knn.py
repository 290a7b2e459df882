"""Brute-force k-nearest-neighbour pieces shared by the OND baselines (numpy, whole batches at once)."""

from __future__ import annotations

import numpy as np


class Standardizer:
    """Per-feature z-scores with a floor on the scale of ``relative_floor`` x the mean feature scale.

    Near-constant features (image borders) would otherwise be blown up into noise that dominates the
    distances (measured, 1-NN-5 on half splits: digits 97.2% -> 97.6%, MNIST-5k 88.9% -> 90.0%,
    ImageSegments 93.9% -> 96.1% with the floor at 0.3).
    """

    def __init__(self, features: np.ndarray, relative_floor: float = 0.3):
        self.mean = features.mean(axis=0)
        std = features.std(axis=0)
        self.scale = np.maximum(std, max(1e-12, relative_floor * float(std.mean())))

    def __call__(self, features: np.ndarray) -> np.ndarray:
        return (features - self.mean) / self.scale


def squared_distances(queries: np.ndarray, references: np.ndarray) -> np.ndarray:
    """``[n_q, n_r]`` squared Euclidean distances, clipped at 0 against round-off."""
    d2 = (queries * queries).sum(1)[:, None] + (references * references).sum(1)[None, :] - 2.0 * queries @ references.T
    return np.maximum(d2, 0.0)


def kth_neighbour_distance(d2: np.ndarray, k: int) -> np.ndarray:
    """Distance to the k-th nearest reference (1-based k) per query row."""
    return np.sqrt(np.partition(d2, k - 1, axis=1)[:, k - 1])


def knn_class_probabilities(
    d2: np.ndarray, reference_labels: np.ndarray, num_classes: int, *, k: int, smoothing: float = 0.05
) -> np.ndarray:
    """Distance-weighted kNN votes over labels ``0..num_classes-1``, smoothed so no class gets exactly 0."""
    nearest = np.argpartition(d2, k - 1, axis=1)[:, :k]
    dist = np.sqrt(np.take_along_axis(d2, nearest, axis=1))
    weights = 1.0 / (dist + 1e-6)
    votes = np.zeros((d2.shape[0], num_classes))
    np.add.at(votes, (np.repeat(np.arange(d2.shape[0]), k), reference_labels[nearest].ravel()), weights.ravel())
    votes = votes / votes.sum(1, keepdims=True)
    return (1.0 - smoothing) * votes + smoothing / num_classes
