"""Labelled feature data for the OND protocol, and the embedded default domain (scikit-learn digits)."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from owl_eval.errors import ConfigError
from owl_eval.typed import as_float


@dataclass(frozen=True)
class LabeledData:
    """Features ``[N, D]``, integer labels ``[N]`` in ``0..C-1``, and one name per class."""

    features: np.ndarray
    labels: np.ndarray
    class_names: tuple[str, ...]

    def __post_init__(self):
        if self.features.ndim != 2:
            raise ValueError(f"domain features must be [N, D], got shape {self.features.shape}")
        if self.labels.shape != (self.features.shape[0],):
            raise ValueError(f"domain labels must be [{self.features.shape[0]}], got shape {self.labels.shape}")
        if not np.all(np.isfinite(self.features)):
            raise ValueError("domain features contain NaN or inf")
        if self.labels.min() < 0 or self.labels.max() >= len(self.class_names):
            raise ValueError(f"domain labels must lie in 0..{len(self.class_names) - 1}")

    @property
    def num_classes(self) -> int:
        return len(self.class_names)


class ClassificationDomain:
    """Base for OND domains: ``load()`` returns :class:`LabeledData`; ``name`` goes in the run tags.

    ``ond``: the domain's own OND settings (known classes, batch size, trial lengths, asymptotic width;
    the seed says m is domain dependent). The domain does not read them; ``owl_eval/conf/experiment/ond_sailon.yaml``
    interpolates them into ``protocol`` and ``metrics``.
    """

    name: str = "classification"

    def __init__(self, ond: Mapping[str, Any] | None = None):
        if ond is not None and not isinstance(ond, Mapping):
            raise ConfigError(f"domain.ond: expected a mapping of this domain's OND settings, got {ond!r}")
        self.ond_defaults = dict(ond or {})

    def load(self) -> LabeledData:  # pragma: no cover - interface
        raise NotImplementedError


class DigitsDomain(ClassificationDomain):
    """scikit-learn's 8x8 handwritten digits (1,797 images, 10 classes); ships in the sklearn wheel."""

    name = "digits"

    def __init__(self, scale: float = 1.0 / 16.0, ond: Mapping[str, Any] | None = None):
        super().__init__(ond)
        self.scale = as_float(scale, "domain.scale", minimum=0.0, open_minimum=True)

    def load(self) -> LabeledData:
        from sklearn.datasets import load_digits

        data = load_digits()
        return LabeledData(
            features=np.asarray(data.data, dtype=np.float64) * self.scale,
            labels=np.asarray(data.target, dtype=np.int64),
            class_names=tuple(str(c) for c in data.target_names),
        )
