"""The embedded digits domain reads the very arrays ``sklearn.datasets.load_digits`` returns, without importing
scikit-learn (a sweep's re-run builds the domain only for its data's digest)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
from sklearn.datasets import load_digits

from owl_eval.datasets import classification
from owl_eval.datasets.classification import DigitsDomain


def _reference(scale: float) -> tuple[np.ndarray, np.ndarray]:
    data = load_digits()
    return np.asarray(data.data, dtype=np.float64) * scale, np.asarray(data.target, dtype=np.int64)


def test_the_digits_are_load_digits_arrays_exactly():
    features, labels = _reference(0.25)
    got = DigitsDomain(scale=0.25).load()
    assert got.features.dtype == np.float64 and got.labels.dtype == np.int64
    np.testing.assert_array_equal(got.features, features)  # both are integers 0..16 times 0.25: exact
    np.testing.assert_array_equal(got.labels, labels)
    assert got.class_names == tuple(str(c) for c in load_digits().target_names)


def test_without_the_shipped_file_load_digits_is_used(monkeypatch):
    monkeypatch.setattr(classification, "DIGITS_FILE", ("datasets", "data", "no-such-file.csv.gz"))
    features, labels = _reference(1.0 / 16.0)
    got = DigitsDomain().load()
    np.testing.assert_array_equal(got.features, features)
    np.testing.assert_array_equal(got.labels, labels)


def test_reading_the_digits_does_not_import_scikit_learn():
    code = (
        "import sys\n"
        "from owl_eval.datasets.classification import DigitsDomain\n"
        "d = DigitsDomain()\n"
        "d.load(); d.provenance()\n"
        "print(sorted(m for m in sys.modules if m == 'sklearn' or m.startswith('sklearn.')))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"
