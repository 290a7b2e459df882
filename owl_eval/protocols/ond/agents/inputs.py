"""What each kind of built-in OND agent makes of a domain's samples, whatever their shape and dtype (a data set's
``[N, D]`` features, or ``[N, H, W, C]`` uint8 images from ``domain=dataset``):

- scikit-learn and the nearest-neighbour agents take flat features, ``[N, H*W*C]`` float64 (:func:`flat_features`);
- the torch adapter takes images channels-first, ``[N, C, H, W]`` float32 in ``[0, 1]`` (torchvision's
  ``ToTensor``), and flat features as float64 (:func:`torch_inputs`).
Only a batch or the training split is converted, never the whole data set.
"""

from __future__ import annotations

import numpy as np


def flat_features(x) -> np.ndarray:
    """``[N, ...]`` -> ``[N, D]`` float64 (a sample's values in C order)."""
    a = np.asarray(x)
    return a.reshape(len(a), -1).astype(np.float64, copy=False)


def torch_inputs(x) -> np.ndarray:
    """``[N, H, W, C]`` images -> ``[N, C, H, W]`` float32 (uint8 scaled to ``[0, 1]``); ``[N, D]`` -> float64."""
    a = np.asarray(x)
    if a.ndim == 4:
        scale = 1.0 / 255.0 if a.dtype == np.uint8 else 1.0
        return np.ascontiguousarray(a.transpose(0, 3, 1, 2), dtype=np.float32) * np.float32(scale)
    return a.reshape(len(a), -1).astype(np.float64, copy=False)
