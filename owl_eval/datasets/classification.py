"""Labelled feature data for classification protocols (OND, continual, plugins), and the embedded default domain
(scikit-learn digits)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from owl_eval.datasets.provenance import DataInput, array_digest
from owl_eval.formats.names import distinct_names
from owl_eval.typed import as_float

FINITE_CHECK_ROWS = 65536  # rows checked for NaN/inf at a time: a memory-mapped data set is never read whole


@dataclass(frozen=True)
class LabeledData:
    """Features ``[N, ...]`` (float32, float64 or uint8; a ``np.memmap`` stays one), integer labels ``[N]`` in
    ``0..C-1``, one name per class, and, when the data set has its own split, ``train_rows``: the sorted rows of
    its training split (the rest is its test split)."""

    features: np.ndarray
    labels: np.ndarray
    class_names: tuple[str, ...]
    train_rows: np.ndarray | None = None

    def __post_init__(self):
        if self.features.ndim < 2 or self.features.shape[0] == 0:
            raise ValueError(f"domain features must be [N, ...] with N >= 1 samples, got shape {self.features.shape}")
        if self.features.dtype.kind not in "fiu" or self.features.dtype == np.float16:
            raise ValueError(f"domain features must be float32, float64 or integer, got {self.features.dtype}")
        if self.labels.shape != (self.features.shape[0],):
            raise ValueError(f"domain labels must be [{self.features.shape[0]}], got shape {self.labels.shape}")
        if self.features.dtype.kind == "f":
            for start in range(0, self.features.shape[0], FINITE_CHECK_ROWS):
                block = np.asarray(self.features[start : start + FINITE_CHECK_ROWS])
                if not np.isfinite(block).all():
                    bad = start + np.flatnonzero(~np.isfinite(block.reshape(len(block), -1)).all(axis=1))[:5]
                    raise ValueError(f"domain features contain NaN or inf (rows {bad.tolist()})")
        distinct_names(self.class_names, where="domain class_names")  # a label must name one class
        if self.labels.min() < 0 or self.labels.max() >= len(self.class_names):
            raise ValueError(f"domain labels must lie in 0..{len(self.class_names) - 1}")
        if self.train_rows is not None and (
            self.train_rows.ndim != 1
            or (self.train_rows.size and (self.train_rows.min() < 0 or self.train_rows.max() >= len(self.labels)))
        ):
            raise ValueError(f"domain train_rows must be row numbers in 0..{len(self.labels) - 1}")

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    @property
    def in_train(self) -> np.ndarray | None:
        """Rows of the data set's own training split as a mask (None: no split of its own)."""
        if self.train_rows is None:
            return None
        mask = np.zeros(len(self.labels), dtype=bool)
        mask[self.train_rows] = True
        return mask


class ClassificationDomain:
    """Base for OND domains: ``load()`` returns :class:`LabeledData`; ``name`` goes in the run tags.

    A domain holds data only: its OND settings (known classes, batch size, trial lengths, asymptotic width; the
    seed says they are domain dependent) are ``owl_eval/protocols/ond/conf/protocol/ond/<domain>.yaml`` and ``owl_eval/protocols/ond/conf/metrics/ond/<domain>.yaml``.
    """

    name: str = "classification"

    def load(self) -> LabeledData:
        """The data, read on the first call and kept: the driver's check and its run read them once."""
        data = self.__dict__.get("_loaded")
        if data is None:
            data = self.__dict__["_loaded"] = self.read()
        return data

    def read(self) -> LabeledData:  # pragma: no cover - interface
        """Read the data (what a subclass implements)."""
        raise NotImplementedError

    def source(self) -> str:
        """Where the data comes from (a path, or the package that ships it): the run's "Datasets" entry."""
        return f"{type(self).__module__}.{type(self).__qualname__}"

    def provenance(self) -> tuple[DataInput, ...]:
        """The data this domain read, with the digest of its arrays (:mod:`owl_eval.datasets.provenance`)."""
        data = self.load()
        return (
            DataInput(
                name=self.name,
                source=self.source(),
                digest=array_digest(data.features, data.labels),
                num_samples=int(data.labels.shape[0]),
                shape=tuple(int(d) for d in data.features.shape[1:]),
                class_names=data.class_names,
            ),
        )


class DigitsDomain(ClassificationDomain):
    """scikit-learn's 8x8 handwritten digits (1,797 images, 10 classes); ships in the sklearn wheel."""

    name = "digits"

    def __init__(self, scale: float = 1.0 / 16.0):
        self.scale = as_float(scale, "domain.scale", minimum=0.0, open_minimum=True)

    def read(self) -> LabeledData:
        table = _sklearn_digits_table()
        return LabeledData(
            features=table[:, :-1] * self.scale,
            labels=table[:, -1].astype(np.int64),
            class_names=tuple(str(c) for c in range(DIGITS_CLASSES)),
        )

    def source(self) -> str:
        from importlib.metadata import version

        return f"scikit-learn {version('scikit-learn')}: sklearn.datasets.load_digits"


DIGITS_CLASSES = 10
DIGITS_FILE = ("datasets", "data", "digits.csv.gz")  # inside the sklearn package, as load_digits reads it


def _sklearn_digits_table() -> np.ndarray:
    """The digits as ``sklearn.datasets.load_digits`` reads them: its gzipped CSV (64 pixel columns, then the digit),
    float64. The file is read where the scikit-learn wheel ships it, without importing scikit-learn, whose import
    brings most of scipy (~1 s: a sweep's re-run needs only the data's digest); ``load_digits`` itself where the file
    is not there."""
    import gzip
    from importlib.util import find_spec
    from pathlib import Path

    spec = find_spec("sklearn")  # finds the package without running it
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder).joinpath(*DIGITS_FILE)
        if path.is_file():
            with gzip.open(path, mode="rt", encoding="utf-8") as text:
                return np.loadtxt(text, delimiter=",", dtype=np.float64)
    from sklearn.datasets import load_digits

    data = load_digits()
    return np.column_stack([np.asarray(data.data, dtype=np.float64), np.asarray(data.target, dtype=np.float64)])
