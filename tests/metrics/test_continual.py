"""Continual-learning metrics: Renate's published example, hand-computed cases, a plain-loop reference, errors."""

from __future__ import annotations

import math

import numpy as np
import pytest

from owl_eval.metrics.results import NA
from owl_eval.metrics.validation import MetricInputError
from owl_eval.protocols.continual.metrics import (
    SPECS,
    average_accuracy,
    backward_transfer,
    continual_metrics,
    forgetting,
    forgetting_avalanche,
    forgetting_since_learned,
    forward_transfer,
    forward_transfer_avalanche,
    from_renate_results,
    micro_average_accuracy,
)

TOL = 1e-12

# ------------------------------------------------------------------ Renate's published example
# SAMPLE_CLASSIFICATION_RESULTS of Renate's test/conftest.py and the expected values of its
# test/renate/evaluation/metrics/test_classification.py (awslabs/Renate).
R = [
    [0.9362000226974487, 0.6093000173568726, 0.3325999975204468],
    [0.8284000158309937, 0.9506999850273132, 0.3382999897003174],
    [0.4377000033855438, 0.48260000348091125, 0.9438999891281128],
]
R_INIT = [0.2, 0.1, 0.09]


@pytest.mark.parametrize(
    "task_id,expected",
    [
        (0, 0.9362000226974487),
        (1, (0.8284000158309937 + 0.9506999850273132) / 2),
        (2, (0.4377000033855438 + 0.48260000348091125 + 0.9438999891281128) / 3),
    ],
)
def test_renate_example_average_accuracy(task_id, expected):
    assert average_accuracy(R, task_id) == pytest.approx(expected, abs=TOL)


@pytest.mark.parametrize(
    "task_id,expected",
    [
        (0, 0.0),
        # Renate's test writes 0.8284000158937 here (a typo that pytest.approx's 1e-6 tolerates); the matrix
        # entry is 0.8284000158309937.
        (1, 0.9362000226974487 - 0.8284000158309937),
        (2, ((0.9362000226974487 - 0.4377000033855438) + (0.9506999850273132 - 0.48260000348091125)) / 2),
    ],
)
def test_renate_example_forgetting(task_id, expected):
    assert forgetting(R, task_id) == pytest.approx(expected, abs=TOL)


@pytest.mark.parametrize(
    "task_id,expected",
    [
        (0, 0.0),
        (1, 0.8284000158309937 - 0.9362000226974487),
        (2, ((0.4377000033855438 - 0.9362000226974487) + (0.48260000348091125 - 0.9506999850273132)) / 2),
    ],
)
def test_renate_example_backward_transfer(task_id, expected):
    assert backward_transfer(R, task_id) == pytest.approx(expected, abs=TOL)


@pytest.mark.parametrize(
    "task_id,expected",
    [
        (0, 0.0),
        (1, 0.6093000173568726 - 0.1),
        (2, ((0.6093000173568726 - 0.1) + (0.3382999897003174 - 0.09)) / 2),
    ],
)
def test_renate_example_forward_transfer(task_id, expected):
    assert forward_transfer(R, task_id, R_INIT) == pytest.approx(expected, abs=TOL)


def test_renate_example_micro_average_accuracy():
    # Renate publishes no micro-average example; sizes 100, 200, 300 and the arithmetic by hand.
    n = [100, 200, 300]
    assert micro_average_accuracy(R, 0, n) == pytest.approx(0.9362000226974487, abs=TOL)
    assert micro_average_accuracy(R, 1, n) == pytest.approx(
        (100 * 0.8284000158309937 + 200 * 0.9506999850273132) / 300, abs=TOL
    )
    assert micro_average_accuracy(R, 2, n) == pytest.approx(
        (100 * 0.4377000033855438 + 200 * 0.48260000348091125 + 300 * 0.9438999891281128) / 600, abs=TOL
    )


def test_renate_results_dict_round_trip():
    A, b = from_renate_results({"accuracy": R, "accuracy_init": [R_INIT]})
    np.testing.assert_array_equal(A, np.array(R))
    np.testing.assert_array_equal(b, np.array(R_INIT))
    A2, b2 = from_renate_results({"accuracy": R})
    assert b2 is None
    with pytest.raises(MetricInputError, match="accuracy"):
        from_renate_results({"acc": R})
    with pytest.raises(MetricInputError, match="accuracy_init"):
        from_renate_results({"accuracy": R, "accuracy_init": R_INIT})  # must be one row [[...]]


# ------------------------------------------------------------------------ hand-computed 3-task case
H = [
    [0.90, 0.85, 0.20],
    [0.95, 0.80, 0.50],
    [0.70, 0.40, 0.90],
]
H_INIT = [0.10, 0.20, 0.25]
H_N = [10, 30, 60]

HAND = {
    # (0.9) ; (0.95 + 0.8)/2 ; (0.7 + 0.4 + 0.9)/3
    "average_accuracy": [0.9, 0.875, 2.0 / 3.0],
    # 0.9 ; (9.5 + 24)/40 = 33.5/40 ; (7 + 12 + 54)/100
    "micro_average_accuracy": [0.9, 0.8375, 0.73],
    # t=1: max(0.9) - 0.95 = -0.05 (negative: task 0 improved);
    # t=2: [max(0.9, 0.95) - 0.7 = 0.25, max(0.85, 0.8) - 0.4 = 0.45] -> 0.35 (0.85 is task 1 BEFORE it was learned)
    "forgetting": [0.0, -0.05, 0.35],
    # t=1: 0.95 - 0.9 = 0.05 ; t=2: [(0.7 - 0.9), (0.4 - 0.8)] -> -0.6/2 = -0.3
    "backward_transfer": [0.0, 0.05, -0.3],
    # t=1: A[0][1] - b1 = 0.85 - 0.2 = 0.65 ; t=2: [0.65, A[1][2] - b2 = 0.5 - 0.25 = 0.25] -> 0.45
    "forward_transfer": [0.0, 0.65, 0.45],
    # t=1: A00 - A10 = -0.05 ; t=2: [0.9 - 0.7, 0.8 - 0.4] -> 0.3
    "forgetting_avalanche": [0.0, -0.05, 0.3],
    # t=1: max(A00) - A10 = -0.05 ; t=2: [max(0.9, 0.95) - 0.7 = 0.25, max(A11 = 0.8) - 0.4 = 0.4] -> 0.325
    "forgetting_since_learned": [0.0, -0.05, 0.325],
    # one task ahead, m = min(t+1, 2): t=0: 0.65 ; t=1: (0.65 + 0.25)/2 ; t=2: same
    "forward_transfer_avalanche": [0.65, 0.45, 0.45],
}


def _call(name, A, t, b=H_INIT, n=H_N):
    if name == "micro_average_accuracy":
        return micro_average_accuracy(A, t, n)
    if name == "forward_transfer":
        return forward_transfer(A, t, b)
    if name == "forward_transfer_avalanche":
        return forward_transfer_avalanche(A, t, b)
    return {
        "average_accuracy": average_accuracy,
        "forgetting": forgetting,
        "backward_transfer": backward_transfer,
        "forgetting_avalanche": forgetting_avalanche,
        "forgetting_since_learned": forgetting_since_learned,
    }[name](A, t)


@pytest.mark.parametrize("name", sorted(HAND))
def test_hand_case_every_step(name):
    for t, expected in enumerate(HAND[name]):
        assert _call(name, H, t) == pytest.approx(expected, abs=TOL), (name, t)


def test_hand_case_bundle_final_values_and_series():
    res = continual_metrics(H, init_accuracy=H_INIT, num_instances=H_N)
    for name, expected in HAND.items():
        assert res[name] == pytest.approx(expected[-1], abs=TOL), name
        np.testing.assert_array_equal(res.series[name].steps, [0, 1, 2])
        np.testing.assert_allclose(res.series[name].values, expected, rtol=0, atol=TOL, err_msg=name)
    assert not res.na


def test_negative_forgetting_when_every_task_improves():
    A = [
        [0.5, 0.1, 0.0],
        [0.6, 0.7, 0.2],
        [0.8, 0.9, 0.6],
    ]
    # t=1: 0.5 - 0.6 = -0.1 ; t=2: [max(0.5, 0.6) - 0.8, max(0.1, 0.7) - 0.9] = [-0.2, -0.2] -> -0.2
    assert forgetting(A, 1) == pytest.approx(-0.1, abs=TOL)
    assert forgetting(A, 2) == pytest.approx(-0.2, abs=TOL)


def test_single_task():
    res = continual_metrics([[0.7]], init_accuracy=[0.1], num_instances=[5])
    assert res["average_accuracy"] == pytest.approx(0.7)
    assert res["micro_average_accuracy"] == pytest.approx(0.7)
    for name in (
        "forgetting",
        "backward_transfer",
        "forward_transfer",
        "forgetting_avalanche",
        "forgetting_since_learned",
        "forward_transfer_avalanche",
    ):
        assert res[name] == 0.0, name


def test_missing_inputs_are_na_with_reason():
    res = continual_metrics(H)
    for name in ("forward_transfer", "forward_transfer_avalanche", "micro_average_accuracy"):
        assert isinstance(res[name], NA) and res[name].reason, name
        assert name not in res.series
    assert res["average_accuracy"] == pytest.approx(2.0 / 3.0)


# ---------------------------------------------------------------- plain-loop reference, random matrices
def _loop_reference(A, b, n, t):
    """Each formula of METRICS.md section 2 written as a plain loop over python floats."""
    A = [list(map(float, row)) for row in A]
    out = {"average_accuracy": sum(A[t][i] for i in range(t + 1)) / (t + 1)}
    tot = sum(n[: t + 1])
    out["micro_average_accuracy"] = sum(A[t][i] * n[i] for i in range(t + 1)) / tot
    if t == 0:
        for k in (
            "forgetting",
            "backward_transfer",
            "forward_transfer",
            "forgetting_avalanche",
            "forgetting_since_learned",
        ):
            out[k] = 0.0
    else:
        out["forgetting"] = sum(max(A[k][i] for k in range(t)) - A[t][i] for i in range(t)) / t
        out["forgetting_since_learned"] = sum(max(A[k][i] for k in range(i, t)) - A[t][i] for i in range(t)) / t
        out["forgetting_avalanche"] = sum(A[i][i] - A[t][i] for i in range(t)) / t
        out["backward_transfer"] = sum(A[t][i] - A[i][i] for i in range(t)) / t
        out["forward_transfer"] = sum(A[i - 1][i] - b[i] for i in range(1, t + 1)) / t
    T = len(A)
    m = min(t + 1, T - 1)
    out["forward_transfer_avalanche"] = (sum(A[i - 1][i] - b[i] for i in range(1, m + 1)) / m) if m > 0 else 0.0
    return out


def test_matches_plain_loop_on_random_matrices():
    rng = np.random.default_rng(1234)
    for _ in range(40):
        T = int(rng.integers(1, 10))
        A = rng.random((T, T))
        if T > 2:
            A[rng.random((T, T)) < 0.1] = 1.0  # ties with the max and exact bounds
            A[0, 0] = 0.0
        b = rng.random(T)
        n = rng.integers(1, 400, T).tolist()
        res = continual_metrics(A, init_accuracy=b, num_instances=n)
        for t in range(T):
            ref = _loop_reference(A, b, n, t)
            for name, value in ref.items():
                assert _call(name, A, t, b, n) == pytest.approx(value, abs=TOL), (name, T, t)
                assert res.series[name].values[t] == pytest.approx(value, abs=TOL), (name, T, t)


def test_each_step_ignores_later_rows():
    # Changing rows after t must not change any metric at t.
    A = np.array(H)
    A2 = A.copy()
    A2[2] = [0.0, 1.0, 0.0]
    for name in HAND:  # (forward_transfer_avalanche at t=1 reads A[1][2]: row 1, not a later one)
        assert _call(name, A, 1) == _call(name, A2, 1), name
        if not name.startswith("forward_transfer"):  # the change does matter where row 2 is read
            assert _call(name, A, 2) != _call(name, A2, 2), name


# ------------------------------------------------------------------------------------------ errors
@pytest.mark.parametrize(
    "A,match",
    [
        ([[0.5, 0.5]], "square"),
        ([[0.5, 0.5, 0.5], [0.5, 0.5, 0.5]], "square"),
        ([0.5, 0.5], "2-D"),
        (np.zeros((0, 0)), "at least one task"),
        ([[0.5, 1.2], [0.5, 0.5]], r"\[0.0, 1.0\]"),
        ([[0.5, -0.1], [0.5, 0.5]], r"\[0.0, 1.0\]"),
        ([[0.5, math.nan], [0.5, 0.5]], "NaN"),
        ([[0.5, "x"], [0.5, 0.5]], "A"),
    ],
)
def test_bad_matrix(A, match):
    with pytest.raises(MetricInputError, match=match):
        average_accuracy(A, 0)
    with pytest.raises(MetricInputError, match=match):
        continual_metrics(A)


@pytest.mark.parametrize("task_id", [-1, 3, 10, 1.0, True, "1", None])
def test_bad_task_id(task_id):
    for fn in (average_accuracy, forgetting, backward_transfer, forgetting_avalanche, forgetting_since_learned):
        with pytest.raises(MetricInputError, match="task_id"):
            fn(H, task_id)
    with pytest.raises(MetricInputError, match="task_id"):
        forward_transfer(H, task_id, H_INIT)
    with pytest.raises(MetricInputError, match="task_id"):
        micro_average_accuracy(H, task_id, H_N)


def test_numpy_integer_task_id_accepted():
    assert average_accuracy(H, np.int64(1)) == pytest.approx(0.875)


@pytest.mark.parametrize(
    "b,match",
    [
        ([0.1, 0.2], "init_accuracy"),
        ([0.1, 0.2, 0.3, 0.4], "init_accuracy"),
        ([0.1, 2.0, 0.3], "init_accuracy"),
        ([0.1, math.nan, 0.3], "init_accuracy"),
    ],
)
def test_bad_init_accuracy(b, match):
    with pytest.raises(MetricInputError, match=match):
        forward_transfer(H, 1, b)
    with pytest.raises(MetricInputError, match=match):
        forward_transfer_avalanche(H, 1, b)
    with pytest.raises(MetricInputError, match=match):
        continual_metrics(H, init_accuracy=b)


@pytest.mark.parametrize(
    "n,match",
    [
        ([10, 20], "num_instances"),
        ([10, -1, 5], "num_instances"),
        ([10, 2.5, 5], "whole"),
        ([10, math.inf, 5], "num_instances"),
    ],
)
def test_bad_num_instances(n, match):
    with pytest.raises(MetricInputError, match=match):
        micro_average_accuracy(H, 2, n)
    with pytest.raises(MetricInputError, match=match):
        continual_metrics(H, num_instances=n)


def test_zero_total_test_size():
    with pytest.raises(MetricInputError, match="zero"):
        micro_average_accuracy(H, 1, [0, 0, 5])
    # a later task may be empty as long as the prefix total is not: (0.95*10 + 0.8*0)/10
    assert micro_average_accuracy(H, 1, [10, 0, 5]) == pytest.approx(0.95, abs=TOL)
    with pytest.raises(MetricInputError, match="zero"):
        continual_metrics(H, num_instances=[0, 3, 5])


def test_specs_declare_every_reported_name():
    names = [s.name for s in SPECS]
    assert len(names) == len(set(names))
    res = continual_metrics(H, init_accuracy=H_INIT, num_instances=H_N)
    assert set(names) == set(res.values)
    by = {s.name: s for s in SPECS}
    assert all(s.protocol == "continual" for s in SPECS)
    assert by["average_accuracy"].direction == "maximize" and by["average_accuracy"].bounds == (0.0, 1.0)
    assert by["micro_average_accuracy"].direction == "maximize"
    assert by["forgetting"].direction == "minimize" and by["forgetting"].bounds == (-1.0, 1.0)
    assert by["forgetting_avalanche"].direction == "minimize"
    assert by["forgetting_since_learned"].direction == "minimize"
    assert by["backward_transfer"].direction == "maximize"
    assert by["forward_transfer"].direction == "maximize"
    assert by["forward_transfer_avalanche"].direction == "maximize"


def test_test_sizes_that_overflow_are_na_with_reason_never_inf():
    """Sizes of 1e308 are finite and whole, but the pooled sums overflow float64: the micro average is N/A
    with the reason (before: NaN from inf / inf, or inf logged as 1.8e308), and nothing is printed."""
    import warnings

    big = [1e308, 1e308, 1e308]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning on the console either
        value = micro_average_accuracy(H, 2, big)
        res = continual_metrics(H, num_instances=big)
    assert isinstance(value, NA) and "overflow" in value.reason
    assert "overflow" in res.na["micro_average_accuracy"] and "micro_average_accuracy" not in res.series
    # the other metrics do not use the sizes: still Renate's numbers
    assert res["average_accuracy"] == pytest.approx(average_accuracy(H, 2), abs=TOL)
    # one task of 1e308 alone does not overflow: (0.9 * 1e308) / 1e308
    assert micro_average_accuracy(H, 0, big) == pytest.approx(H[0][0], abs=TOL)


def test_results_that_are_not_a_dict_are_one_clear_error():
    with pytest.raises(MetricInputError, match="expected a Renate results dict, got list"):
        from_renate_results([[0.9]])
