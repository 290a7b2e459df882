"""Data sets whose class names are ambiguous (one name twice) or whose splits are empty are one error naming the
file, the name and both positions (or the split), before any run exists."""

from __future__ import annotations

import numpy as np
import pytest

from owl_eval.datasets import read_dataset
from owl_eval.datasets.classification import LabeledData
from owl_eval.errors import ConfigError


def test_a_class_name_twice_names_both_positions(tmp_path):
    path = tmp_path / "d.npz"
    np.savez(path, X=np.zeros((4, 2)), y=np.array([0, 1, 2, 0]), classes=np.array(["cat", "dog", "cat"]))
    with pytest.raises(ConfigError) as err:
        read_dataset(path)
    message = str(err.value)
    assert "d.npz" in message and "'cat'" in message and "positions 0 and 2" in message and "\n" not in message


def test_an_empty_split_is_named(tmp_path):
    path = tmp_path / "d.npz"
    np.savez(
        path, X_train=np.zeros((3, 2)), y_train=np.array([0, 1, 0]), X_test=np.zeros((0, 2)), y_test=np.zeros(0, int)
    )
    with pytest.raises(ConfigError, match=r"d\.npz: split 'test' holds no samples"):
        read_dataset(path)


def test_a_domain_with_a_class_name_twice_is_refused():
    with pytest.raises(ValueError, match=r"class name '1' appears twice \(positions 1 and 2\)"):
        LabeledData(np.zeros((3, 2)), np.array([0, 1, 2]), ("0", "1", "1"))


def test_class_names_that_are_not_utf8_name_the_file_and_the_array(tmp_path):
    path = tmp_path / "d.npz"
    np.savez(path, X=np.zeros((2, 2)), y=np.array([0, 1]), classes=np.array([b"cat", b"d\xffg"]))
    with pytest.raises(ConfigError) as err:
        read_dataset(path)
    message = str(err.value)
    assert "d.npz: member 'classes.npy': class name at position 1 is not UTF-8" in message, message
    assert "codec" not in message
