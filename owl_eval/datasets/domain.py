"""``domain=dataset domain.path=<file or folder>``: a researcher's own classification data set as an OND domain,
read by :func:`owl_eval.datasets.read_dataset` (``.npz`` / ``.npy`` folders memory-mapped, ``.parquet`` / ``.csv``
tables, image folders, Hugging Face ``save_to_disk`` folders). Class names come from the data; a data set's own
``train`` and ``test`` splits are used as the agent's training data and the trial streams' samples."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from owl_eval.datasets.classification import ClassificationDomain, LabeledData
from owl_eval.datasets.provenance import DataInput
from owl_eval.errors import ConfigError
from owl_eval.typed import as_bool, as_str

OWN_SPLITS = ("train", "test")


class DatasetDomain(ClassificationDomain):
    """A data set read from ``path`` (see the module docstring). ``features`` / ``labels``: array or column names;
    ``image_size`` (int or ``[h, w]``) and ``flatten``: for images; ``label_column`` / ``split_column``: for tables
    and saved Hugging Face data sets. Features keep their dtype and shape (``[N, H, W, C]`` uint8 images unless
    ``flatten``): each agent says what it accepts."""

    def __init__(
        self,
        path: str | None = None,
        features: str = "X",
        labels: str = "y",
        image_size: int | Sequence[int] | None = None,
        flatten: bool = False,
        label_column: str | None = None,
        split_column: str | None = None,
    ):
        if path is None or str(path).strip() in ("", "None", "???"):
            raise ConfigError(
                "domain.path is not set: expected a .npz file, a folder of .npy files, a .parquet or .csv table, an "
                "image folder or a saved Hugging Face data set; run with domain.path=<file or folder>"
            )
        self.path = Path(str(path)).expanduser()
        self.name = self.path.name or "dataset"
        self.options: dict[str, Any] = {
            "features": as_str(features, "domain.features"),
            "labels": as_str(labels, "domain.labels"),
            "image_size": image_size,
            "flatten": as_bool(flatten, "domain.flatten"),
            "label_column": label_column,
            "split_column": split_column,
        }
        self._input: DataInput | None = None

    def read(self) -> LabeledData:
        from owl_eval.datasets.read import read_dataset

        found = read_dataset(self.path, **self.options)
        splits = found.splits
        if set(splits) == {"all"}:
            features, labels, train_rows = splits["all"].features, splits["all"].labels, None
        elif set(OWN_SPLITS) <= set(splits):
            train, test = splits["train"], splits["test"]
            # one array of both splits, in the data's own dtype (memory-mapped splits are copied here, never widened)
            features = np.concatenate([np.asarray(train.features), np.asarray(test.features)])
            labels = np.concatenate([train.labels, test.labels])
            train_rows = np.arange(len(train.labels))
        else:
            raise ConfigError(
                f"domain.path={str(self.path)!r} has the splits {sorted(splits)}; expected one set of samples or a "
                "'train' and a 'test' split"
            )
        self._input = DataInput(
            name=found.name,
            source=found.source,
            digest=found.digest,
            num_samples=int(len(labels)),
            shape=tuple(int(d) for d in found.shape),
            class_names=found.class_names,
            source_type="local",
        )
        try:
            return LabeledData(features, labels, found.class_names, train_rows=train_rows)
        except ValueError as exc:
            raise ConfigError(f"domain.path={str(self.path)!r}: {exc}") from None

    def source(self) -> str:
        return str(self.path.resolve())

    def provenance(self) -> tuple[DataInput, ...]:
        """The files read, with the digest computed while reading them (:func:`owl_eval.datasets.read_dataset`)."""
        self.load()
        assert self._input is not None
        return (self._input,)
