"""Continual task sequences from a researcher's own data sets (read by :mod:`owl_eval.datasets`, as ``domain=dataset``
reads them for OND):

- ``domain=split_dataset``: class-incremental (or, with ``protocol.scenario=task_incremental``, task-incremental)
  tasks of ``classes_per_task`` classes each, in ``class_order`` (class names or ids) or an order drawn by the
  run's seed;
- ``domain=dataset_sequence``: domain-incremental, one data set per task (``paths``), all with the same classes.

A data set's own ``train``/``test`` split is used when it has one; otherwise ``test_fraction`` of every class goes to
test (drawn by the seed). Samples keep their dtype; continual learners get them flat, ``[n, D]`` (an image's pixels
in C order), one task's rows at a time, never the whole data set widened to float64.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from owl_eval.datasets.classification import LabeledData
from owl_eval.datasets.domain import DatasetDomain
from owl_eval.datasets.provenance import DataInput
from owl_eval.errors import ConfigError
from owl_eval.formats.names import distinct_names
from owl_eval.protocols.continual.domains import ContinualTask, _check_rng, _check_test_fraction
from owl_eval.typed import as_int


def _split(data: LabeledData, test_fraction: float, rng: np.random.Generator, where: str) -> tuple[np.ndarray, ...]:
    """(train rows, test rows), sorted: the data set's own split, else ``test_fraction`` of every class (at least
    one sample on each side: a class with fewer than 2 samples is an error naming it)."""
    if data.train_rows is not None:
        mask = data.in_train
        assert mask is not None
        return np.flatnonzero(mask), np.flatnonzero(~mask)
    counts = np.bincount(data.labels, minlength=data.num_classes)
    few = [data.class_names[c] for c in np.flatnonzero((counts > 0) & (counts < 2))]
    if few:
        raise ConfigError(
            f"{where}: class(es) {few[:10]} have fewer than 2 samples; a train/test split needs at least one of "
            "each (give the data set train/ and test/ splits, or leave those classes out)"
        )
    order = np.lexsort((rng.permutation(len(data.labels)), data.labels))  # each class's rows in a seeded order
    sorted_labels = data.labels[order]
    first = np.searchsorted(sorted_labels, sorted_labels, side="left")
    rank = np.arange(len(order)) - first
    k = np.clip(np.round(test_fraction * counts), 1, np.maximum(counts - 1, 1))[sorted_labels]
    in_test = np.empty(len(order), dtype=bool)
    in_test[order] = rank < k
    return np.flatnonzero(~in_test), np.flatnonzero(in_test)


def _flat(data: LabeledData) -> np.ndarray:
    """``[N, D]``: a view of the features where their layout allows (a memory map stays one)."""
    return data.features.reshape(len(data.labels), -1)


def _reader(options: dict[str, Any], path) -> DatasetDomain:
    return DatasetDomain(path=path, **options)


class SplitDataset:
    """Tasks of ``classes_per_task`` classes of one data set (see the module docstring)."""

    def __init__(
        self,
        path: str | None = None,
        classes_per_task: int = 2,
        class_order: Sequence[str | int] | None = None,
        test_fraction: float = 0.3,
        features: str = "X",
        labels: str = "y",
        image_size: int | Sequence[int] | None = None,
        label_column: str | None = None,
        split_column: str | None = None,
    ):
        self.source = DatasetDomain(
            path=path,
            features=features,
            labels=labels,
            image_size=image_size,
            flatten=True,
            label_column=label_column,
            split_column=split_column,
        )
        self.classes_per_task = as_int(classes_per_task, "domain.classes_per_task", minimum=1)
        self.given_order = None if class_order is None else [str(c) for c in class_order]
        self.test_fraction = _check_test_fraction("domain.test_fraction", test_fraction)

    @property
    def name(self) -> str:
        return self.source.name

    def _data(self) -> LabeledData:
        return self.source.load()

    @property
    def num_classes(self) -> int:
        return self._data().num_classes

    @property
    def num_features(self) -> int:
        return int(np.prod(self._data().features.shape[1:]))

    def check(self) -> None:
        """The class order and the task size fit the data (before any run exists)."""
        self._order(None)

    def _order(self, rng: np.random.Generator | None) -> np.ndarray:
        data = self._data()
        n, k = data.num_classes, self.classes_per_task
        if n % k:
            raise ConfigError(
                f"domain.classes_per_task: {k} does not divide the {n} classes of {self.name!r} (divisors: "
                f"{[d for d in range(1, n + 1) if n % d == 0]})"
            )
        if self.given_order is None:
            return rng.permutation(n) if rng is not None else np.arange(n)
        index = {name: i for i, name in enumerate(data.class_names)}
        unknown = [c for c in self.given_order if c not in index]
        if unknown:
            raise ConfigError(
                f"domain.class_order: no class named {unknown} in {self.name!r}; its classes: {list(data.class_names)[:30]}"
            )
        distinct_names(self.given_order, where="domain.class_order", error=ConfigError)
        order = [index[c] for c in self.given_order]
        if sorted(order) != list(range(n)):
            raise ConfigError(
                f"domain.class_order must name each of the {n} classes of {self.name!r} once, got {self.given_order}"
            )
        return np.array(order)

    def tags(self) -> dict[str, str]:
        return {"class_order": "given" if self.given_order is not None else "drawn by the seed"}

    def tasks(self, rng: np.random.Generator) -> list[ContinualTask]:
        rng = _check_rng(rng)
        data = self._data()
        order = self._order(rng)
        train, test = _split(data, self.test_fraction, rng, f"domain.path={str(self.source.path)!r}")
        X, y = _flat(data), data.labels
        out = []
        k = self.classes_per_task
        for t in range(len(order) // k):
            classes = tuple(int(c) for c in order[t * k : (t + 1) * k])
            tr = train[np.isin(y[train], classes)]
            te = test[np.isin(y[test], classes)]
            out.append(ContinualTask(t, X[tr], y[tr].copy(), X[te], y[te].copy(), classes, tr, te))
        return out

    def provenance(self) -> tuple[DataInput, ...]:
        self.check()  # called before any run exists: a class order or task size that does not fit stops the job
        return self.source.provenance()


class DatasetSequence:
    """One data set per task, the same classes in each (domain-incremental; see the module docstring)."""

    def __init__(
        self,
        paths: Sequence[str] | None = None,
        test_fraction: float = 0.3,
        features: str = "X",
        labels: str = "y",
        image_size: int | Sequence[int] | None = None,
        label_column: str | None = None,
        split_column: str | None = None,
    ):
        if not paths or isinstance(paths, str):
            raise ConfigError(
                f"domain.paths: expected a list of data sets, one per task (domain.paths=[a.npz,b.npz]), got {paths!r}"
            )
        options = dict(
            features=features,
            labels=labels,
            image_size=image_size,
            flatten=True,
            label_column=label_column,
            split_column=split_column,
        )
        self.sources = [_reader(options, p) for p in paths]
        self.test_fraction = _check_test_fraction("domain.test_fraction", test_fraction)

    @property
    def name(self) -> str:
        return "+".join(s.name for s in self.sources)

    def _all(self) -> list[LabeledData]:
        found = [s.load() for s in self.sources]
        first = found[0]
        for source, data in zip(self.sources[1:], found[1:]):
            if data.class_names != first.class_names:
                raise ConfigError(
                    f"domain.paths: {source.name!r} has the classes {list(data.class_names)[:20]}, "
                    f"{self.sources[0].name!r} has {list(first.class_names)[:20]}; every task of a domain-incremental "
                    "sequence needs the same classes"
                )
            if data.features.shape[1:] != first.features.shape[1:]:
                raise ConfigError(
                    f"domain.paths: {source.name!r} holds samples of shape {data.features.shape[1:]}, "
                    f"{self.sources[0].name!r} of shape {first.features.shape[1:]}; every task needs the same shape"
                )
        return found

    @property
    def num_classes(self) -> int:
        return self._all()[0].num_classes

    @property
    def num_features(self) -> int:
        return int(np.prod(self._all()[0].features.shape[1:]))

    def check(self) -> None:
        self._all()

    def tasks(self, rng: np.random.Generator) -> list[ContinualTask]:
        rng = _check_rng(rng)
        out = []
        for t, (source, data) in enumerate(zip(self.sources, self._all())):
            train, test = _split(data, self.test_fraction, rng, f"domain.paths[{t}]={str(source.path)!r}")
            X, y = _flat(data), data.labels
            classes = tuple(int(c) for c in np.unique(y))
            out.append(ContinualTask(t, X[train], y[train].copy(), X[test], y[test].copy(), classes, train, test))
        return out

    def provenance(self) -> tuple[DataInput, ...]:
        self.check()
        return tuple(i for s in self.sources for i in s.provenance())
