"""Split-Digits and Permuted-Digits task builders."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.datasets import load_digits

from owl_eval.protocols.continual.domains import ContinualTask, PermutedDigits, SplitDigits

DIGITS = load_digits()
N_SAMPLES = 1797
CLASS_COUNTS = np.bincount(DIGITS.target)


def _rng(seed=0):
    return np.random.default_rng(seed)


# ------------------------------------------------------------------------------------ Split-Digits
def test_split_default_tasks_classes_and_shapes():
    d = SplitDigits()
    assert (d.name, d.num_classes, d.num_features, d.num_tasks) == ("split_digits", 10, 64, 5)
    tasks = d.tasks(_rng())
    assert [t.task_id for t in tasks] == [0, 1, 2, 3, 4]
    assert [t.classes for t in tasks] == [(0, 1), (2, 3), (4, 5), (6, 7), (8, 9)]
    for t in tasks:
        assert isinstance(t, ContinualTask)
        assert t.X_train.shape == (t.y_train.size, 64) and t.X_test.shape == (t.y_test.size, 64)
        assert set(np.unique(t.y_train)) == set(t.classes) == set(np.unique(t.y_test))
        assert t.y_train.dtype.kind == "i"


def test_split_train_test_disjoint_and_cover_the_data_set():
    tasks = SplitDigits().tasks(_rng(3))
    train = np.concatenate([t.train_index for t in tasks])
    test = np.concatenate([t.test_index for t in tasks])
    assert np.intersect1d(train, test).size == 0
    assert train.size + test.size == N_SAMPLES
    np.testing.assert_array_equal(np.sort(np.concatenate([train, test])), np.arange(N_SAMPLES))
    # labels come from the source rows
    for t in tasks:
        np.testing.assert_array_equal(t.y_train, DIGITS.target[t.train_index])
        np.testing.assert_array_equal(t.y_test, DIGITS.target[t.test_index])


def test_split_is_stratified():
    tasks = SplitDigits(test_fraction=0.3).tasks(_rng(1))
    y_test = np.concatenate([t.y_test for t in tasks])
    # every class: round(0.3 * n_c) test samples, e.g. class 0 has 178 samples -> 53
    np.testing.assert_array_equal(np.bincount(y_test, minlength=10), np.round(0.3 * CLASS_COUNTS))
    assert CLASS_COUNTS[0] == 178 and np.sum(y_test == 0) == 53


def test_split_standardization_uses_training_split_statistics():
    tasks = SplitDigits(standardize=True).tasks(_rng(2))
    train = np.concatenate([t.train_index for t in tasks])
    raw = DIGITS.data.astype(float)
    mean, std = raw[train].mean(0), raw[train].std(0)
    std[std == 0] = 1.0
    for t in tasks:
        np.testing.assert_allclose(t.X_test, (raw[t.test_index] - mean) / std, atol=1e-12)
        np.testing.assert_allclose(t.X_train, (raw[t.train_index] - mean) / std, atol=1e-12)
    X_train_all = np.concatenate([t.X_train for t in tasks])
    np.testing.assert_allclose(X_train_all.mean(0), 0.0, atol=1e-9)


def test_split_without_standardization_scales_pixels():
    t = SplitDigits(standardize=False).tasks(_rng())[0]
    np.testing.assert_allclose(t.X_train, DIGITS.data[t.train_index] / 16.0)
    assert t.X_train.min() >= 0.0 and t.X_train.max() <= 1.0


def test_split_class_order_and_size_are_config_values():
    d = SplitDigits(class_order=[9, 7, 5, 3, 1, 8, 6, 4, 2, 0], classes_per_task=5)
    tasks = d.tasks(_rng())
    assert d.num_tasks == 2 and [t.classes for t in tasks] == [(9, 7, 5, 3, 1), (8, 6, 4, 2, 0)]
    assert set(np.unique(tasks[0].y_train)) == {1, 3, 5, 7, 9}
    assert len(SplitDigits(classes_per_task=1).tasks(_rng())) == 10


def test_split_fixed_for_a_seed_and_differs_across_seeds():
    a, b, c = (SplitDigits().tasks(_rng(s)) for s in (7, 7, 8))
    for ta, tb in zip(a, b):
        np.testing.assert_array_equal(ta.X_train, tb.X_train)
        np.testing.assert_array_equal(ta.test_index, tb.test_index)
    assert not np.array_equal(a[0].test_index, c[0].test_index)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"class_order": [0, 1, 2]}, "domain.class_order must be a permutation of 0..9"),
        ({"class_order": [0, 0, 1, 2, 3, 4, 5, 6, 7, 8]}, "domain.class_order"),
        ({"class_order": list(range(1, 11))}, "domain.class_order"),
        ({"class_order": "0123456789"}, "domain.class_order"),
        ({"class_order": [0.0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}, "domain.class_order"),
        ({"classes_per_task": 3}, "domain.classes_per_task"),
        ({"classes_per_task": 0}, "domain.classes_per_task"),
        ({"classes_per_task": 2.0}, "domain.classes_per_task"),
        ({"test_fraction": 0.0}, "domain.test_fraction"),
        ({"test_fraction": 1.0}, "domain.test_fraction"),
        ({"test_fraction": "0.3"}, "domain.test_fraction"),
        ({"standardize": "yes"}, "domain.standardize"),
    ],
)
def test_split_bad_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        SplitDigits(**kwargs)


def test_tasks_needs_a_generator():
    with pytest.raises(TypeError, match="Generator"):
        SplitDigits().tasks(0)
    with pytest.raises(TypeError, match="Generator"):
        PermutedDigits().tasks(np.random.RandomState(0))


# --------------------------------------------------------------------------------- Permuted-Digits
def test_permuted_tasks_shapes_and_shared_split():
    d = PermutedDigits(num_tasks=4)
    assert (d.name, d.num_classes, d.num_features) == ("permuted_digits", 10, 64)
    tasks = d.tasks(_rng(5))
    assert len(tasks) == 4
    for t in tasks:
        assert t.classes == tuple(range(10))
        assert t.X_train.shape == (t.y_train.size, 64)
        np.testing.assert_array_equal(t.train_index, tasks[0].train_index)
        np.testing.assert_array_equal(t.y_test, tasks[0].y_test)
    assert np.intersect1d(tasks[0].train_index, tasks[0].test_index).size == 0
    assert tasks[0].train_index.size + tasks[0].test_index.size == N_SAMPLES


def test_permuted_task0_identity_and_others_permute_pixels():
    tasks = PermutedDigits(num_tasks=3).tasks(_rng(5))
    raw = DIGITS.data.astype(float)
    mean, std = raw[tasks[0].train_index].mean(0), raw[tasks[0].train_index].std(0)
    std[std == 0] = 1.0
    np.testing.assert_allclose(tasks[0].X_test, (raw[tasks[0].test_index] - mean) / std, atol=1e-12)
    X0 = tasks[0].X_train
    for t in tasks[1:]:
        assert not np.array_equal(t.X_train, X0)
        # same pixel values per image, in another order
        np.testing.assert_array_equal(np.sort(t.X_train, axis=1), np.sort(X0, axis=1))
        # every column of task t is some column of task 0
        for j in range(64):
            assert np.any(np.all(t.X_train[:, [j]] == X0, axis=0))


def test_permutations_distinct_and_fixed_for_a_seed():
    d = PermutedDigits(num_tasks=6)
    p1, p2, p3 = d.permutations(_rng(11)), d.permutations(_rng(11)), d.permutations(_rng(12))
    assert p1.shape == (6, 64)
    np.testing.assert_array_equal(p1[0], np.arange(64))
    for row in p1:
        np.testing.assert_array_equal(np.sort(row), np.arange(64))
    assert len({row.tobytes() for row in p1}) == 6
    np.testing.assert_array_equal(p1, p2)
    assert not np.array_equal(p1[1:], p3[1:])
    a, b = d.tasks(_rng(11)), d.tasks(_rng(11))
    for ta, tb in zip(a, b):
        np.testing.assert_array_equal(ta.X_train, tb.X_train)


def test_permuted_identity_first_off():
    p = PermutedDigits(num_tasks=2, identity_first=False).permutations(_rng(0))
    assert not np.array_equal(p[0], np.arange(64))


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"num_tasks": 0}, "domain.num_tasks"),
        ({"num_tasks": 2.5}, "domain.num_tasks"),
        ({"num_tasks": True}, "domain.num_tasks"),
        ({"test_fraction": 1.5}, "domain.test_fraction"),
        ({"identity_first": 1}, "domain.identity_first"),
    ],
)
def test_permuted_bad_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        PermutedDigits(**kwargs)
