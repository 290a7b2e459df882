"""Selective classification: train on a stratified split of a labelled domain, then the agent predicts a class
and a confidence for every test sample; the record holds both (scored by :mod:`owl_eval_selective.evaluation`).

Order of calls on the agent (``owl_eval_selective.agents``):

1. ``fit(features, labels, *, rng)`` on the training split (copies; ``rng`` its own seeded Generator);
2. ``predict(features) -> (predictions, confidence)`` on the test split, once: ``predictions`` one class
   label per test sample (a label seen in training), ``confidence`` one finite float per sample, higher
   meaning more confident.

The split is stratified (``round(test_fraction * n_c)`` of every class ``c`` in the test set, at least one
sample of a class with two or more left on each side) and drawn from the run's seeded generator; the data
and the agent draw from independent generators, so changing the agent never changes the split.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from owl_eval.datasets.classification import LabeledData
from owl_eval.errors import ConfigError
from owl_eval.protocols.base import AgentOutputError, ProtocolDriver
from owl_eval.protocols.interfaces import Method, choices, class_name, no_baseline, require_interface
from owl_eval.typed import as_float
from owl_eval_selective.record import SelectiveRecord

AGENT_METHODS = (
    Method("fit", "fit(features, labels, *, rng)", args=2, keywords=("rng",)),
    Method("predict", "predict(features) -> (predictions, confidence)", args=1),
)
DOMAIN_METHODS = (Method("load", "load() (labelled features)"),)
DOMAIN_CHOICES = "domain=<option> (digits, handwriting, activity, image_segments: load() returns LabeledData)"


@dataclass(frozen=True)
class Split:
    train_rows: np.ndarray
    test_rows: np.ndarray


class SelectiveDriver(ProtocolDriver):
    name = "selective"

    def __init__(self, test_fraction: float = 0.3):
        self.test_fraction = as_float(
            test_fraction, "protocol.test_fraction", minimum=0.0, maximum=1.0, open_minimum=True, open_maximum=True
        )
        self._loaded: tuple[Any, LabeledData] | None = None  # (domain, its data): check() loads it once for run()

    # -- checks before any run exists ------------------------------------------------------------------
    def check(self, *, domain, agent, baseline=None) -> None:
        """No baseline; the agent has ``fit``/``predict``; the domain loads labelled data whose split leaves
        test samples."""
        no_baseline(baseline, "selective")
        require_interface(
            agent, AGENT_METHODS, role="agent", kind="a selective classifier", choose=choices("agent", "selective")
        )
        data = self._data(domain)
        counts = np.bincount(data.labels, minlength=data.num_classes)
        if per_class_test_counts(counts, self.test_fraction).sum() == 0:
            raise ConfigError(
                f"protocol.test_fraction: {self.test_fraction:g} leaves no test sample (domain "
                f"{getattr(domain, 'name', class_name(domain))} has {int(counts.sum())} samples, at most "
                f"{int(counts.max())} per class); use a larger fraction"
            )

    def _data(self, domain) -> LabeledData:
        if self._loaded is not None and self._loaded[0] is domain:
            return self._loaded[1]
        require_interface(domain, DOMAIN_METHODS, role="domain", kind="a labelled domain", choose=DOMAIN_CHOICES)
        data = domain.load()
        if not isinstance(data, LabeledData):
            raise ConfigError(
                f"domain ({class_name(domain)}) is not a labelled domain: load() returned "
                f"{type(data).__name__}, expected owl_eval.datasets.classification.LabeledData; choose {DOMAIN_CHOICES}"
            )
        self._loaded = (domain, data)
        return data

    def tags(self) -> dict[str, str]:
        return {"test_fraction": f"{self.test_fraction:g}"}

    # -- running ---------------------------------------------------------------------------------------
    def run(self, *, domain, agent, rng, baseline=None, progress=True) -> SelectiveRecord:
        if baseline is not None:
            raise ValueError("the selective protocol has no baseline agent; choose baseline=none")
        data = self._data(domain)
        data_rng, agent_rng = rng.spawn(2)
        split = stratified_split(data.labels, data.num_classes, self.test_fraction, data_rng)
        train_labels = data.labels[split.train_rows]
        agent.fit(data.features[split.train_rows].copy(), train_labels.copy(), rng=agent_rng)
        out = agent.predict(data.features[split.test_rows].copy())
        predictions, confidence = check_output(out, len(split.test_rows), np.unique(train_labels))
        return SelectiveRecord(
            y_true=data.labels[split.test_rows].astype(np.int64),
            y_pred=predictions,
            confidence=confidence,
            class_names=tuple(data.class_names),
            domain=str(getattr(domain, "name", "")),
        )


# ------------------------------------------------------------------------------------------- the split


def per_class_test_counts(counts: np.ndarray, test_fraction: float) -> np.ndarray:
    """Test samples per class: ``round(f * n_c)``, kept in ``1..n_c - 1`` for a class of two or more (each
    side sees every such class), 0 for a class of one (it trains)."""
    counts = np.asarray(counts, dtype=np.int64)
    wanted = np.floor(test_fraction * counts + 0.5).astype(np.int64)
    return np.where(counts >= 2, np.clip(wanted, 1, counts - 1), 0)


def stratified_split(labels: np.ndarray, num_classes: int, test_fraction: float, rng: np.random.Generator) -> Split:
    """Rows of the training and test sets (each in ascending order), drawn class by class from ``rng``."""
    counts = np.bincount(labels, minlength=num_classes)
    n_test = per_class_test_counts(counts, test_fraction)
    test = []
    for c in range(num_classes):
        rows = np.flatnonzero(labels == c)
        test.append(rng.permutation(rows)[: n_test[c]])
    test_rows = np.sort(np.concatenate(test)) if test else np.zeros(0, np.int64)
    is_test = np.zeros(len(labels), bool)
    is_test[test_rows] = True
    return Split(train_rows=np.flatnonzero(~is_test), test_rows=test_rows)


# ------------------------------------------------------------------------------------------- the output


def check_output(out, n: int, known: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(predictions, confidence)`` as int64 and float64 ``[n]``; anything else is one
    :class:`AgentOutputError` naming what is wrong, what was expected and what was got."""
    where = f"agent output of predict(features) on the {n} test samples"
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        got = f"a {type(out).__name__}" + (f" of {len(out)} items" if isinstance(out, (tuple, list)) else "")
        raise AgentOutputError(f"{where}: expected a pair (predictions, confidence), got {got}")
    arrays = []
    for name, value, what in (("predictions", out[0], "class labels"), ("confidence", out[1], "finite floats")):
        try:
            arr = np.asarray(value)
        except (TypeError, ValueError) as exc:
            raise AgentOutputError(
                f"{where}: {name}: expected an array of {what} of shape ({n},), got {type(value).__name__} ({exc})"
            ) from None
        if arr.shape != (n,):
            raise AgentOutputError(f"{where}: {name} has shape {arr.shape}, expected ({n},) (one per test sample)")
        if arr.dtype.kind not in "iuf":
            raise AgentOutputError(f"{where}: {name} has dtype {arr.dtype}, expected {what} (shape ({n},))")
        arrays.append(arr)
    predictions, confidence = arrays
    values = predictions.astype(np.float64)
    bad = ~np.isin(values, known)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        shown = f"{known.tolist()}" if len(known) <= 20 else f"{len(known)} labels in {known.min()}..{known.max()}"
        raise AgentOutputError(
            f"{where}: predictions must be class labels seen in training ({shown}), got {float(values[i]):g} at index {i} "
            f"({int(bad.sum())} such value(s))"
        )
    confidence = confidence.astype(np.float64)
    bad = ~np.isfinite(confidence)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise AgentOutputError(
            f"{where}: confidence must be finite floats, shape ({n},); got {int(bad.sum())} non-finite value(s) "
            f"(first: {confidence[i]} at index {i}), finite values in "
            + (f"[{confidence[~bad].min():.6g}, {confidence[~bad].max():.6g}]" if (~bad).any() else "none")
        )
    return values.astype(np.int64), confidence
