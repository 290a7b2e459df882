"""Continual-learning task sequences built from scikit-learn's digits (8×8 images, 10 classes, 1797 samples).

The data ships inside the scikit-learn wheel (``sklearn.datasets.load_digits``), so nothing is downloaded.
Two domains, both constructed with keyword arguments (Hydra ``_target_``s) and both drawing every random
choice from the ``numpy.random.Generator`` handed to ``tasks``:

- :class:`SplitDigits`: the 10 classes split into tasks of ``classes_per_task`` classes, in ``class_order``.
- :class:`PermutedDigits`: every task holds all 10 classes, its pixels shuffled by the task's permutation.

Labels are always the original digits 0..9 (a single 10-way label space), so the same data serves
class-incremental evaluation (predict among all 10) and task-incremental evaluation (the learner is told
the task and may restrict itself to ``ContinualTask.classes``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from owl_eval.datasets.provenance import DataInput, array_digest
from owl_eval.errors import ConfigError

__all__ = ["ContinualTask", "SplitDigits", "PermutedDigits"]

NUM_CLASSES = 10
NUM_FEATURES = 64
PIXEL_MAX = 16.0


@dataclass(frozen=True, eq=False)
class ContinualTask:
    """One task of a continual sequence: its train and test data and the classes it contains.

    ``train_index`` / ``test_index`` (optional) are the rows of the source data set the samples come from.
    """

    task_id: int
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    classes: tuple[int, ...]
    train_index: np.ndarray | None = None
    test_index: np.ndarray | None = None


def digits_provenance(name: str) -> tuple[DataInput, ...]:
    """scikit-learn's digits, the data every built-in continual domain is made of (what the run's "Datasets"
    section names)."""
    import sklearn

    X, y = _digits()
    return (
        DataInput(
            name=name,
            source=f"scikit-learn {sklearn.__version__}: sklearn.datasets.load_digits",
            digest=array_digest(X, y),
            num_samples=int(y.shape[0]),
            shape=(NUM_FEATURES,),
            class_names=tuple(str(c) for c in range(NUM_CLASSES)),
        ),
    )


@lru_cache(maxsize=1)
def _digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    data = load_digits()
    X = np.asarray(data.data, dtype=np.float64)
    y = np.asarray(data.target, dtype=np.int64)
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y


def _check_rng(rng) -> np.random.Generator:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"tasks(rng): expected a numpy.random.Generator, got {type(rng).__name__}")
    return rng


def _check_test_fraction(key: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < float(value) < 1.0:
        raise ConfigError(f"{key} must be a number strictly between 0 and 1, got {value!r}")
    return float(value)


def _stratified_split(y: np.ndarray, test_fraction: float, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Train and test indices (sorted), the same ``test_fraction`` of every class in the test set.

    Each class gets ``round(test_fraction * n_c)`` test samples, at least one and at most ``n_c - 1``.
    """
    train, test = [], []
    for c in np.unique(y):
        idx = np.flatnonzero(y == c)
        idx = idx[rng.permutation(idx.size)]
        k = int(np.clip(round(test_fraction * idx.size), 1, idx.size - 1))
        test.append(idx[:k])
        train.append(idx[k:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(test))


def _preprocess(X: np.ndarray, train_idx: np.ndarray, standardize: bool) -> np.ndarray:
    """Per-pixel z-scores with the mean/std of the training split (std 0 -> 1), else pixels scaled to [0, 1]."""
    if not standardize:
        return X / PIXEL_MAX
    mean = X[train_idx].mean(axis=0)
    std = X[train_idx].std(axis=0)
    std[std == 0] = 1.0
    return (X - mean) / std


class SplitDigits:
    """Split-Digits: the digit classes in ``class_order``, ``classes_per_task`` classes per task.

    Defaults give 5 tasks {0,1}, {2,3}, ..., {8,9}. One stratified train/test split of the whole data set is
    drawn from the generator given to :meth:`tasks` (``test_fraction`` of every class goes to test), and
    each task takes the samples of its classes from it, so no sample is in both train and test. With
    ``standardize`` every pixel is z-scored with the mean and standard deviation of the training split of
    all tasks (label-free statistics; constant pixels are left centred); otherwise pixels are divided by 16
    (range [0, 1]).
    """

    def __init__(
        self,
        class_order: Sequence[int] = tuple(range(NUM_CLASSES)),
        classes_per_task: int = 2,
        test_fraction: float = 0.3,
        standardize: bool = True,
    ):
        order = list(class_order) if isinstance(class_order, Sequence) and not isinstance(class_order, str) else None
        if (
            order is None
            or any(isinstance(c, bool) or not isinstance(c, (int, np.integer)) for c in order)
            or sorted(int(c) for c in order) != list(range(NUM_CLASSES))
        ):
            raise ConfigError(f"domain.class_order must be a permutation of 0..9, got {class_order!r}")
        if (
            isinstance(classes_per_task, bool)
            or not isinstance(classes_per_task, (int, np.integer))
            or not (1 <= classes_per_task <= NUM_CLASSES and NUM_CLASSES % classes_per_task == 0)
        ):
            raise ConfigError(
                f"domain.classes_per_task must be a whole divisor of 10 (1, 2, 5 or 10), got {classes_per_task!r}"
            )
        if not isinstance(standardize, (bool, np.bool_)):
            raise ConfigError(f"domain.standardize must be true or false, got {standardize!r}")
        self.class_order = tuple(int(c) for c in order)
        self.classes_per_task = int(classes_per_task)
        self.test_fraction = _check_test_fraction("domain.test_fraction", test_fraction)
        self.standardize = bool(standardize)

    @property
    def name(self) -> str:
        return "split_digits"

    def provenance(self) -> tuple[DataInput, ...]:
        return digits_provenance(self.name)

    @property
    def num_classes(self) -> int:
        return NUM_CLASSES

    @property
    def num_features(self) -> int:
        return NUM_FEATURES

    @property
    def num_tasks(self) -> int:
        return NUM_CLASSES // self.classes_per_task

    def task_classes(self) -> list[tuple[int, ...]]:
        k = self.classes_per_task
        return [self.class_order[i : i + k] for i in range(0, NUM_CLASSES, k)]

    def tasks(self, rng: np.random.Generator) -> list[ContinualTask]:
        rng = _check_rng(rng)
        X, y = _digits()
        train_idx, test_idx = _stratified_split(y, self.test_fraction, rng)
        X = _preprocess(X, train_idx, self.standardize)
        out = []
        for t, classes in enumerate(self.task_classes()):
            tr = train_idx[np.isin(y[train_idx], classes)]
            te = test_idx[np.isin(y[test_idx], classes)]
            out.append(ContinualTask(t, X[tr], y[tr].copy(), X[te], y[te].copy(), tuple(classes), tr, te))
        return out

    def __repr__(self) -> str:
        return (
            f"SplitDigits(class_order={self.class_order}, classes_per_task={self.classes_per_task}, "
            f"test_fraction={self.test_fraction}, standardize={self.standardize})"
        )


class PermutedDigits:
    """Permuted-Digits: ``num_tasks`` tasks, each all 10 digit classes with its own fixed pixel permutation.

    Task 0 uses the identity permutation (the original images) when ``identity_first`` is true (default);
    every other task's permutation of the 64 pixels is drawn from the generator given to :meth:`tasks`, so
    it is fixed for a seed, and the permutations of different tasks are distinct. One stratified
    train/test split is drawn from the same generator and shared by all tasks (the same images, permuted).
    Preprocessing as in :class:`SplitDigits` (``standardize``), applied before permuting.
    """

    def __init__(
        self,
        num_tasks: int = 5,
        test_fraction: float = 0.3,
        standardize: bool = True,
        identity_first: bool = True,
    ):
        if isinstance(num_tasks, bool) or not isinstance(num_tasks, (int, np.integer)) or num_tasks < 1:
            raise ConfigError(f"domain.num_tasks must be a positive whole number, got {num_tasks!r}")
        if not isinstance(standardize, (bool, np.bool_)):
            raise ConfigError(f"domain.standardize must be true or false, got {standardize!r}")
        if not isinstance(identity_first, (bool, np.bool_)):
            raise ConfigError(f"domain.identity_first must be true or false, got {identity_first!r}")
        self.num_tasks = int(num_tasks)
        self.test_fraction = _check_test_fraction("domain.test_fraction", test_fraction)
        self.standardize = bool(standardize)
        self.identity_first = bool(identity_first)

    @property
    def name(self) -> str:
        return "permuted_digits"

    def provenance(self) -> tuple[DataInput, ...]:
        return digits_provenance(self.name)

    @property
    def num_classes(self) -> int:
        return NUM_CLASSES

    @property
    def num_features(self) -> int:
        return NUM_FEATURES

    def permutations(self, rng: np.random.Generator) -> np.ndarray:
        """``[num_tasks, 64]``: row t is the pixel order of task t (distinct rows)."""
        perms: list[np.ndarray] = []
        seen: set[bytes] = set()
        if self.identity_first:
            perms.append(np.arange(NUM_FEATURES))
            seen.add(perms[0].tobytes())
        while len(perms) < self.num_tasks:
            p = rng.permutation(NUM_FEATURES)
            if p.tobytes() not in seen:  # a repeat has probability ~1/64!, but make distinctness certain
                seen.add(p.tobytes())
                perms.append(p)
        return np.stack(perms)

    def tasks(self, rng: np.random.Generator) -> list[ContinualTask]:
        rng = _check_rng(rng)
        X, y = _digits()
        train_idx, test_idx = _stratified_split(y, self.test_fraction, rng)
        X = _preprocess(X, train_idx, self.standardize)
        classes = tuple(range(NUM_CLASSES))
        out = []
        for t, perm in enumerate(self.permutations(rng)):
            Xp = X[:, perm]
            out.append(
                ContinualTask(
                    t,
                    Xp[train_idx],
                    y[train_idx].copy(),
                    Xp[test_idx],
                    y[test_idx].copy(),
                    classes,
                    train_idx.copy(),
                    test_idx.copy(),
                )
            )
        return out

    def __repr__(self) -> str:
        return (
            f"PermutedDigits(num_tasks={self.num_tasks}, test_fraction={self.test_fraction}, "
            f"standardize={self.standardize}, identity_first={self.identity_first})"
        )
