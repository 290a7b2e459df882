"""A researcher's own classification data set read from a path: arrays (``.npz``, a folder of ``.npy``), tables
(``.parquet``, ``.csv``), image folders (torchvision's ``ImageFolder`` layout) and Hugging Face ``save_to_disk``
folders. Read lazily (uncompressed arrays memory-mapped, never copied to float64), checked (one-line
:class:`~owl_eval.errors.ConfigError` naming the file), and identified by a sha256 digest of the bytes read (the
rule: :mod:`owl_eval.datasets.base`). A pure library: it imports ``owl_eval.errors`` only (no MLflow, no Hydra)
and never writes into the user's folder.
"""

from owl_eval.datasets.base import DataSet, Split
from owl_eval.datasets.read import read_dataset

__all__ = ["DataSet", "Split", "read_dataset"]
