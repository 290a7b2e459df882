"""``read_dataset``: a researcher's own classification data set read from a path, by what the path is."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from owl_eval.datasets.arrays import read_arrays
from owl_eval.datasets.base import DataSet, fail
from owl_eval.datasets.hf_saved import is_hf_saved, read_hf_saved
from owl_eval.datasets.images import is_image_folder, read_image_folder
from owl_eval.datasets.tables import read_table

FORMATS_READ = (
    "a .npz file, a folder of .npy files, a .parquet or .csv table, an image folder (<class>/<image> or "
    "train/ and test/ folders of those), or a folder written by Hugging Face save_to_disk"
)


def read_dataset(
    path: str | Path,
    *,
    features: str = "X",
    labels: str = "y",
    image_size: int | Sequence[int] | None = None,
    flatten: bool = False,
    label_column: str | None = None,
    split_column: str | None = None,
) -> DataSet:
    """The data set at ``path``, read lazily (memory-mapped where the format allows) with its content digest.

    ``features`` / ``labels``: the array (or column) names; ``image_size`` (int or ``[h, w]``) and ``flatten``:
    for images; ``label_column`` / ``split_column``: for tables and saved Hugging Face data sets. Any bad input is
    a one-line :class:`~owl_eval.errors.ConfigError` naming the file.
    """
    path = Path(path).expanduser()
    if not path.exists():
        raise fail(f"{path}: no such file or folder; expected {FORMATS_READ}")
    path = path.resolve()
    opts = {"features": features, "labels": labels, "image_size": image_size, "flatten": flatten}
    suffix = path.suffix.lower()
    if path.is_file():
        if suffix == ".npz":
            return read_arrays(path, features=features, labels=labels)
        if suffix in (".parquet", ".csv"):
            return read_table(
                path,
                fmt=suffix[1:],
                labels=label_column or labels,
                label_column=label_column,
                split_column=split_column,
            )
    elif path.is_dir():
        try:
            if is_hf_saved(path):
                return read_hf_saved(path, label_column=label_column, split_column=split_column, **opts)
            if any(p.suffix == ".npy" and p.is_file() for p in path.iterdir()):
                return read_arrays(path, features=features, labels=labels)
            if is_image_folder(path):
                return read_image_folder(path, image_size=image_size, flatten=flatten)
        except PermissionError:
            raise fail(f"{path}: cannot be listed or read (permission denied)") from None
    raise fail(f"{path}: not a data set this reader knows; expected {FORMATS_READ}")
