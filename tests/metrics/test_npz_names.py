"""``owl_eval.formats``: two ``.npz`` members of one name (a zip can hold them; numpy keeps the last) and names
that are not text or not distinct are one error naming the file and the member or array."""

from __future__ import annotations

import numpy as np
import pytest

from owl_eval.datasets import read_dataset
from owl_eval.errors import ConfigError, MetricInputError
from owl_eval.formats.names import distinct_names, text_names
from owl_eval.formats.npz import npz_arrays
from tests.reliability.test_ambiguous_input import _zip_with_two_members


def test_npz_arrays_refuses_a_member_twice_naming_both_entries(tmp_path):
    path = tmp_path / "p.npz"
    _zip_with_two_members(path, "scores", np.zeros(3), np.ones(3), labels=np.arange(3))
    with pytest.raises(
        MetricInputError, match=r"p\.npz: member 'scores\.npy' appears twice in the zip \(entries 2 and 3\)"
    ):
        npz_arrays(path)


def test_a_data_set_npz_goes_through_the_same_check(tmp_path):
    path = tmp_path / "d.npz"
    _zip_with_two_members(path, "y", np.zeros(3, int), np.ones(3, int), X=np.zeros((3, 2)))
    with pytest.raises(ConfigError, match=r"d\.npz: member 'y\.npy' appears twice in the zip \(entries 2 and 3\)"):
        read_dataset(path)


def test_bytes_that_are_not_utf8_name_the_position_never_the_codec():
    with pytest.raises(ValueError) as err:
        text_names(np.array([b"a", b"b\xff"]), where="f.npz: array 'Class_names'")
    message = str(err.value)
    assert (
        message.startswith("f.npz: array 'Class_names': class name at position 1 is not UTF-8")
        and "codec" not in message
    )
    assert text_names(np.array(["é", "b"]), where="x") == ("é", "b")
    assert text_names(np.array(["é".encode(), b"b"]), where="x") == ("é", "b")


def test_distinct_names_names_both_positions():
    with pytest.raises(ValueError, match=r"w: class name 'b' appears twice \(positions 1 and 3\)"):
        distinct_names(["a", "b", "c", "b"], where="w")
    distinct_names(["a", "b"], where="w")
