"""Data sets every protocol may read, and what a run records of them.

- A researcher's own data set read from a path (:func:`read_dataset`): arrays (``.npz``, a folder of ``.npy``),
  tables (``.parquet``, ``.csv``), image folders (torchvision's ``ImageFolder`` layout) and Hugging Face
  ``save_to_disk`` folders. Read lazily (uncompressed arrays memory-mapped, never copied to float64), checked
  (one-line :class:`~owl_eval.errors.ConfigError` naming the file), and identified by a sha256 digest of the bytes
  read (the rule: :mod:`owl_eval.datasets.base`). It never writes into the user's folder.
- The shared classification domains built on them (:mod:`~owl_eval.datasets.classification`: ``LabeledData`` and
  scikit-learn's digits; :mod:`~owl_eval.datasets.domain`: ``domain=dataset``; :mod:`~owl_eval.datasets.sailon`:
  the SAIL-ON-style sets read from installed wheels), used by OND, continual and plugin protocols alike.
- :mod:`~owl_eval.datasets.provenance`: a run's record of the data it used (``DataInput``, content digests).

A pure library below the protocols: no MLflow, no Hydra. The readers are imported on first use (pyarrow is slow
to import, and the runner imports :mod:`~owl_eval.datasets.provenance` on every job, data set or not).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from owl_eval.datasets.base import DataSet, Split
    from owl_eval.datasets.read import read_dataset

__all__ = ["DataSet", "Split", "read_dataset"]
_HOMES = {
    "DataSet": "owl_eval.datasets.base",
    "Split": "owl_eval.datasets.base",
    "read_dataset": "owl_eval.datasets.read",
}


def __getattr__(name: str) -> Any:
    """``from owl_eval.datasets import read_dataset`` imports its reader only then."""
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
