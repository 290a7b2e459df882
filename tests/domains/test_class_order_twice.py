"""``domain.class_order`` of a continual data set naming one class twice is one error naming both positions."""

from __future__ import annotations

import numpy as np
import pytest

from owl_eval.errors import ConfigError
from owl_eval.protocols.continual.dataset_domains import SplitDataset
from tests.domains.test_continual_datasets import write_npz


def test_a_class_named_twice_in_the_order_names_both_positions(tmp_path):
    write_npz(tmp_path / "d.npz", np.random.default_rng(0))
    order = ["a", "b", "c", "a", "e", "d"]
    with pytest.raises(ConfigError, match=r"domain.class_order: class name 'a' appears twice \(positions 0 and 3\)"):
        SplitDataset(path=str(tmp_path / "d.npz"), classes_per_task=2, class_order=order).check()
