"""Tests of owl_eval_selective.metrics.

Every expected value comes from outside the function under test: worked by hand on tiny arrays (the
arithmetic is in the comments), from the plain O(n^2) loop implementations below, or from examples
published in the reference repositories' own tests (cited where used).
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np
import pytest

pytest.importorskip(
    "owl_eval_selective", reason="owl-eval-selective is not installed; run `pip install -e examples/plugin` first"
)

from owl_eval_selective.metrics import (  # noqa: E402
    aurc,
    coverage_at_risk,
    excess_aurc,
    risk_at_coverages,
    risk_coverage_curve,
    selective_risk,
)

# --------------------------------------------------------------------------- plain-loop reference versions
# Written from the definitions, one threshold at a time, without numpy.


def loop_points(y_true, y_pred, conf, ties="group"):
    """[(coverage, risk, threshold)] by decreasing threshold."""
    n = len(y_true)
    wrong = [int(y_pred[i] != y_true[i]) for i in range(n)]
    points = []
    if ties == "group":
        for t in sorted(set(conf), reverse=True):
            accepted = [i for i in range(n) if conf[i] >= t]
            points.append((len(accepted) / n, sum(wrong[i] for i in accepted) / len(accepted), t))
    else:
        ranked = sorted(range(n), key=lambda i: -conf[i])  # Python's sort is stable: ties keep input order
        for k in range(1, n + 1):
            points.append((k / n, sum(wrong[i] for i in ranked[:k]) / k, conf[ranked[k - 1]]))
    return points


def loop_aurc_step(y_true, y_pred, conf, ties="group"):
    """Mean over samples of the risk at the threshold that first accepts the sample."""
    n = len(y_true)
    if ties == "order":
        return sum(r for _, r, _ in loop_points(y_true, y_pred, conf, "order")) / n
    total = 0.0
    for i in range(n):
        accepted = [j for j in range(n) if conf[j] >= conf[i]]
        total += sum(1 for j in accepted if y_pred[j] != y_true[j]) / len(accepted)
    return total / n


def loop_aurc_trapezoid(y_true, y_pred, conf, ties="group"):
    points = loop_points(y_true, y_pred, conf, ties)
    c_prev, r_prev = 0.0, points[0][1]  # flat segment from coverage 0 to the first point
    area = 0.0
    for c, r, _ in points:
        area += (c - c_prev) * (r + r_prev) / 2
        c_prev, r_prev = c, r
    return area


def loop_optimal_aurc_step(y_true, y_pred):
    """Correct samples first, then the errors; mean of the prefix risks."""
    n = len(y_true)
    ranked_wrong = sorted(int(y_pred[i] != y_true[i]) for i in range(n))
    return sum(sum(ranked_wrong[:k]) / k for k in range(1, n + 1)) / n


def loop_selective_risk(y_true, y_pred, conf, c, ties="group"):
    for cov, r, _ in loop_points(y_true, y_pred, conf, ties):
        if cov >= c:
            return r
    raise AssertionError("unreachable: the last point has coverage 1")


def loop_coverage_at_risk(y_true, y_pred, conf, target, ties="group"):
    ok = [cov for cov, r, _ in loop_points(y_true, y_pred, conf, ties) if r <= target]
    return max(ok) if ok else math.nan


def random_case(seed, n, tied):
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, 3, n)
    y_pred = np.where(rng.random(n) < 0.6, y_true, rng.integers(0, 3, n))
    conf = rng.integers(0, max(2, n // 4), n) / 7.0 if tied else rng.random(n)
    return y_true, y_pred, conf


RANDOM_CASES = [(seed, n, tied) for seed, n in enumerate([1, 2, 3, 5, 8, 13, 50, 200]) for tied in (False, True)]


# ----------------------------------------------------------------------------- hand-worked tiny example
# conf   = [0.9, 0.8, 0.8, 0.7], errors = [0, 1, 0, 1]   (y_true all 0, y_pred = errors)
# ties="group": thresholds 0.9, 0.8, 0.7 accept 1, 3, 4 samples with 0, 1, 2 errors:
#   coverage = [1/4, 3/4, 1], risk = [0, 1/3, 1/2]
#   step AURC      = 1/4*0 + 2/4*1/3 + 1/4*1/2              = 1/6 + 1/8 = 7/24
#   trapezoid AURC = 1/4*0 + (3/4-1/4)*(0+1/3)/2 + (1-3/4)*(1/3+1/2)/2 = 1/12 + 5/48 = 3/16
# ties="order" (stable): ranked errors 0, 1, 0, 1 -> prefix risks 0, 1/2, 1/3, 1/2
#   step AURC      = (0 + 1/2 + 1/3 + 1/2)/4 = 1/3
# optimal ranking (0, 0, 1, 1): prefix risks 0, 0, 1/3, 1/2 -> (5/6)/4 = 5/24
#   E-AURC (group, step, empirical) = 7/24 - 5/24 = 1/12
#   closed form, R = 2/4: R + (1-R) ln(1-R) = 0.5 + 0.5 ln 0.5
Y_TRUE = [0, 0, 0, 0]
Y_PRED = [0, 1, 0, 1]
CONF = [0.9, 0.8, 0.8, 0.7]


def test_curve_by_hand_groups_ties_and_has_no_coverage_zero_point():
    coverage, risk, thresholds = risk_coverage_curve(Y_TRUE, Y_PRED, CONF)
    np.testing.assert_allclose(coverage, [1 / 4, 3 / 4, 1.0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(risk, [0.0, 1 / 3, 1 / 2], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(thresholds, [0.9, 0.8, 0.7])
    assert coverage[0] > 0


def test_curve_by_hand_order_breaks_ties_by_input_order():
    coverage, risk, thresholds = risk_coverage_curve(Y_TRUE, Y_PRED, CONF, ties="order")
    np.testing.assert_allclose(coverage, [1 / 4, 2 / 4, 3 / 4, 1.0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(risk, [0.0, 1 / 2, 1 / 3, 1 / 2], rtol=0, atol=1e-15)
    np.testing.assert_array_equal(thresholds, [0.9, 0.8, 0.8, 0.7])


def test_aurc_by_hand():
    assert aurc(Y_TRUE, Y_PRED, CONF) == pytest.approx(7 / 24, abs=1e-15)
    assert aurc(Y_TRUE, Y_PRED, CONF, integration="trapezoid") == pytest.approx(3 / 16, abs=1e-15)
    assert aurc(Y_TRUE, Y_PRED, CONF, ties="order") == pytest.approx(1 / 3, abs=1e-15)


def test_ties_group_ignores_input_order_of_tied_samples_order_does_not():
    # swap the two tied samples: errors [0, 0, 1, 1] at conf [0.9, 0.8, 0.8, 0.7]
    # group: unchanged 7/24. order: prefix risks 0, 0, 1/3, 1/2 -> (5/6)/4 = 5/24
    swapped = [0, 0, 1, 1]
    assert aurc(Y_TRUE, swapped, CONF) == pytest.approx(7 / 24, abs=1e-15)
    assert aurc(Y_TRUE, swapped, CONF, ties="order") == pytest.approx(5 / 24, abs=1e-15)


def test_excess_aurc_by_hand():
    assert excess_aurc(Y_TRUE, Y_PRED, CONF) == pytest.approx(1 / 12, abs=1e-15)
    closed = 0.5 + 0.5 * math.log(0.5)
    assert excess_aurc(Y_TRUE, Y_PRED, CONF, optimal="closed_form") == pytest.approx(7 / 24 - closed, abs=1e-15)


def test_selective_risk_by_hand():
    # group: coverage 0.5 -> first point with coverage >= 0.5 is 3/4 (the tie block at 0.8 enters whole): 1/3
    assert selective_risk(Y_TRUE, Y_PRED, CONF, coverage=0.5) == pytest.approx(1 / 3, abs=1e-15)
    # order: exactly 2 samples (0.9, then the first 0.8 which is an error): 1/2
    assert selective_risk(Y_TRUE, Y_PRED, CONF, coverage=0.5, ties="order") == pytest.approx(1 / 2, abs=1e-15)
    assert selective_risk(Y_TRUE, Y_PRED, CONF, coverage=0.25) == 0.0  # only the 0.9 sample
    assert selective_risk(Y_TRUE, Y_PRED, CONF, coverage=0.26) == pytest.approx(1 / 3, abs=1e-15)
    assert selective_risk(Y_TRUE, Y_PRED, CONF, coverage=1.0) == pytest.approx(1 / 2, abs=1e-15)
    assert risk_at_coverages(Y_TRUE, Y_PRED, CONF, coverages=(0.25, 0.5, 1.0)) == pytest.approx(
        {0.25: 0.0, 0.5: 1 / 3, 1.0: 1 / 2}, abs=1e-15
    )


def test_coverage_at_risk_by_hand():
    # points (1/4, 0), (3/4, 1/3), (1, 1/2)
    assert coverage_at_risk(Y_TRUE, Y_PRED, CONF, risk=0.4) == 0.75
    assert coverage_at_risk(Y_TRUE, Y_PRED, CONF, risk=0.0) == 0.25
    assert coverage_at_risk(Y_TRUE, Y_PRED, CONF, risk=0.5) == 1.0
    assert math.isnan(coverage_at_risk([0, 0], [1, 1], [0.3, 0.2], risk=0.5))  # risks 1, 1: none admissible


def test_selective_risk_cut_compares_k_over_n_not_ceil_of_n_times_c():
    # n = 100, c = 0.07: 100 * 0.07 = 7.000000000000001 in floating point, ceil -> 8; but 7/100 >= 0.07.
    # The 7 most confident samples are right and the 8th is wrong, so 7 accepted -> 0, 8 accepted -> 1/8.
    n = 100
    conf = np.linspace(1.0, 0.0, n)
    y_true = np.zeros(n, dtype=int)
    y_pred = np.zeros(n, dtype=int)
    y_pred[7] = 1
    assert math.ceil(n * 0.07) == 8 and 7 / n >= 0.07
    assert selective_risk(y_true, y_pred, conf, coverage=0.07) == 0.0
    assert selective_risk(y_true, y_pred, conf, coverage=0.07, ties="order") == 0.0
    assert selective_risk(y_true, y_pred, conf, coverage=0.08) == pytest.approx(1 / 8, abs=1e-15)


# -------------------------------------------------------------------------------- special cases


@pytest.mark.parametrize("ties", ["group", "order"])
@pytest.mark.parametrize("integration", ["step", "trapezoid"])
def test_all_correct_gives_zero_and_all_wrong_gives_one(ties, integration):
    conf = [0.3, 0.9, 0.9, 0.1, 0.5]
    right = [2, 0, 1, 1, 0]
    wrong = [0, 1, 2, 0, 1]
    assert aurc(right, right, conf, ties=ties, integration=integration) == 0.0
    assert excess_aurc(right, right, conf, ties=ties, integration=integration) == 0.0
    assert aurc(right, wrong, conf, ties=ties, integration=integration) == pytest.approx(1.0, abs=1e-15)
    assert excess_aurc(right, wrong, conf, ties=ties, integration=integration) == pytest.approx(0.0, abs=1e-12)
    # closed form at R = 1: the limit R + (1 - R) ln(1 - R) -> 1, so E-AURC 0 (the reference code gives NaN)
    assert excess_aurc(right, wrong, conf, optimal="closed_form") == pytest.approx(0.0, abs=1e-15)


@pytest.mark.parametrize("wrong", [False, True])
def test_single_sample(wrong):
    e = float(wrong)
    coverage, risk, thresholds = risk_coverage_curve([1], [int(wrong) + 1], [0.42])
    assert coverage.tolist() == [1.0] and risk.tolist() == [e] and thresholds.tolist() == [0.42]
    for integration in ("step", "trapezoid"):
        assert aurc([1], [int(wrong) + 1], [0.42], integration=integration) == e
        assert excess_aurc([1], [int(wrong) + 1], [0.42], integration=integration) == 0.0
    assert selective_risk([1], [int(wrong) + 1], [0.42], coverage=0.01) == e


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("n", [1, 2, 7, 40, 301])
def test_perfect_ordering_gives_zero_excess_aurc(seed, n):
    rng = np.random.default_rng(seed)
    y_true = rng.integers(0, 4, n)
    y_pred = np.where(rng.random(n) < 0.5, y_true, (y_true + 1) % 4)
    wrong = y_pred != y_true
    conf = rng.random(n) + np.where(wrong, 0.0, 2.0)  # every correct sample above every error
    assert excess_aurc(y_true, y_pred, conf) == pytest.approx(0.0, abs=1e-12)
    assert excess_aurc(y_true, y_pred, conf, ties="order") == pytest.approx(0.0, abs=1e-12)
    assert excess_aurc(y_true, y_pred, conf, integration="trapezoid") == pytest.approx(0.0, abs=1e-12)
    # ties among the correct samples change nothing: their prefix risks are 0 anyway
    conf_tied_correct = np.where(wrong, conf, 5.0)
    assert excess_aurc(y_true, y_pred, conf_tied_correct) == pytest.approx(0.0, abs=1e-12)


def test_ties_among_errors_make_excess_aurc_positive():
    # correct at 0.9, 0.8; errors tied at 0.1. group points (1/4, 0), (2/4, 0), (1, 1/2):
    # AURC = 2/4 * 1/2 = 1/4; optimum (strict ranking) = (0 + 0 + 1/3 + 1/2)/4 = 5/24; E-AURC = 1/24
    y_true, y_pred, conf = [0, 0, 0, 0], [0, 0, 1, 1], [0.9, 0.8, 0.1, 0.1]
    assert aurc(y_true, y_pred, conf) == pytest.approx(1 / 4, abs=1e-15)
    assert excess_aurc(y_true, y_pred, conf) == pytest.approx(1 / 24, abs=1e-15)


def test_empirical_optimum_tends_to_the_closed_form():
    # The paper's closed form R + (1 - R) ln(1 - R) is the integral of the oracle curve max(0, 1 - (1 - R)/c);
    # the exact n-sample optimum differs by O(1/n). Perfect ranking, so AURC = empirical optimum.
    n, n_wrong = 200_000, 60_000
    y_true = np.zeros(n, dtype=int)
    y_pred = np.r_[np.zeros(n - n_wrong, dtype=int), np.ones(n_wrong, dtype=int)]
    conf = np.linspace(1.0, 0.0, n)
    r = n_wrong / n
    closed = r + (1 - r) * math.log(1 - r)
    assert aurc(y_true, y_pred, conf) == pytest.approx(closed, abs=1e-5)
    assert excess_aurc(y_true, y_pred, conf, optimal="closed_form") == pytest.approx(0.0, abs=1e-5)


# ------------------------------------------------------------------- random inputs against the loops


@pytest.mark.parametrize(("seed", "n", "tied"), RANDOM_CASES)
@pytest.mark.parametrize("ties", ["group", "order"])
def test_curve_matches_loop(seed, n, tied, ties):
    y_true, y_pred, conf = random_case(seed, n, tied)
    expected = loop_points(y_true.tolist(), y_pred.tolist(), conf.tolist(), ties)
    coverage, risk, thresholds = risk_coverage_curve(y_true, y_pred, conf, ties=ties)
    np.testing.assert_allclose(coverage, [p[0] for p in expected], rtol=0, atol=1e-12)
    np.testing.assert_allclose(risk, [p[1] for p in expected], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(thresholds, [p[2] for p in expected])


@pytest.mark.parametrize(("seed", "n", "tied"), RANDOM_CASES)
@pytest.mark.parametrize("ties", ["group", "order"])
def test_aurc_and_excess_aurc_match_loop(seed, n, tied, ties):
    y_true, y_pred, conf = random_case(seed, n, tied)
    args = (y_true.tolist(), y_pred.tolist(), conf.tolist())
    step = loop_aurc_step(*args, ties=ties)
    trapezoid = loop_aurc_trapezoid(*args, ties=ties)
    assert aurc(y_true, y_pred, conf, ties=ties) == pytest.approx(step, abs=1e-12)
    assert aurc(y_true, y_pred, conf, ties=ties, integration="trapezoid") == pytest.approx(trapezoid, abs=1e-12)
    optimum = loop_optimal_aurc_step(args[0], args[1])
    value = excess_aurc(y_true, y_pred, conf, ties=ties)
    assert value == pytest.approx(step - optimum, abs=1e-12)
    assert value >= -1e-12  # with step integration the strict oracle ranking is a lower bound
    r = sum(a != b for a, b in zip(args[0], args[1])) / n
    closed = r + (1 - r) * math.log(1 - r) if r < 1 else 1.0
    assert excess_aurc(y_true, y_pred, conf, ties=ties, optimal="closed_form") == pytest.approx(
        step - closed, abs=1e-12
    )


@pytest.mark.parametrize(("seed", "n", "tied"), RANDOM_CASES)
@pytest.mark.parametrize("ties", ["group", "order"])
def test_operating_points_match_loop(seed, n, tied, ties):
    y_true, y_pred, conf = random_case(seed, n, tied)
    args = (y_true.tolist(), y_pred.tolist(), conf.tolist())
    wanted = (0.01, 0.1, 0.25, 1 / 3, 0.5, 0.8, 0.9, 0.95, 1.0)
    for c in wanted:
        expected = loop_selective_risk(*args, c, ties=ties)
        assert selective_risk(y_true, y_pred, conf, coverage=c, ties=ties) == pytest.approx(expected, abs=1e-12)
    got = risk_at_coverages(y_true, y_pred, conf, coverages=wanted, ties=ties)
    assert list(got) == list(wanted)
    assert got == pytest.approx({c: loop_selective_risk(*args, c, ties=ties) for c in wanted}, abs=1e-12)
    default = risk_at_coverages(y_true, y_pred, conf, ties=ties)
    assert default == pytest.approx({c: loop_selective_risk(*args, c, ties=ties) for c in (0.8, 0.9, 0.95)}, abs=1e-12)
    for target in (0.0, 0.2, 0.4, 0.5, 1.0):
        expected = loop_coverage_at_risk(*args, target, ties=ties)
        got_cov = coverage_at_risk(y_true, y_pred, conf, risk=target, ties=ties)
        if math.isnan(expected):
            assert math.isnan(got_cov)
        else:
            assert got_cov == pytest.approx(expected, abs=1e-12)


# --------------------------------------------------------------------- published reference examples
# FD-Shifts, fd_shifts/tests/utils.py (RC_STATS_TEST_CASES, tested in fd_shifts/tests/test_analysis.py):
# RiskCoverageStats(confids, residuals = 1 - correct).aurc with linear (trapezoid) interpolation and
# .eaurc with the closed-form optimum, both at AUC_DISPLAY_SCALE = 1 in SC_test. n = 100.
FD_N = 100
FD_CORRECT_01 = np.arange(FD_N) % 2
FD_CONFIDS = {
    "confid-01": np.arange(FD_N) % 2,
    "confid-10": (np.arange(FD_N) + 1) % 2,
    "confid-all-equal": np.full(FD_N, 0.3),
    "confid-asc": np.linspace(0.0, 1.0, FD_N),
    "confid-plateaus": np.repeat([0.2, 0.4, 0.6, 0.8], FD_N // 4),
}
FD_EXPECTED = {  # ID in FD-Shifts: (aurc, eaurc), all with p_alternating_01 as `correct`
    "confid-01": (0.125, -0.02842640972002758),
    "confid-10": (0.875, 0.7215735902799725),
    "confid-all-equal": (0.5, 0.3465735902799724),
    "confid-asc": (0.48281112575762547, 0.3293847160375979),
    "confid-plateaus": (0.49083333333333334, 0.33740692361330576),
}


@pytest.mark.parametrize("case", sorted(FD_EXPECTED))
def test_matches_fd_shifts_published_values(case):
    y_true = np.zeros(FD_N, dtype=int)
    y_pred = 1 - FD_CORRECT_01  # an error wherever `correct` is 0
    conf = FD_CONFIDS[case]
    want_aurc, want_eaurc = FD_EXPECTED[case]
    assert aurc(y_true, y_pred, conf, integration="trapezoid") == pytest.approx(want_aurc, abs=1e-12)
    got = excess_aurc(y_true, y_pred, conf, integration="trapezoid", optimal="closed_form")
    assert got == pytest.approx(want_eaurc, abs=1e-12)


def test_matches_torch_uncertainty_published_values():
    # torch-uncertainty tests/metrics/classification/test_risk_coverage.py. Binary probs p become
    # confidence max(p, 1 - p) and prediction 0 (every p < 0.5), so the error is target != 0.
    # AURC: probs [0.1, 0.2, 0.3, 0.4, 0.2], targets [0, 0, 1, 1, 0] -> 0.1125, which is their trapezoid over the
    # per-sample points on [1/n, 1] divided by (1 - 1/n). r_1 = 0, so ours (flat segment from 0) is 0.1125 * 0.8.
    conf = [0.9, 0.8, 0.7, 0.6, 0.8]
    zeros = [0, 0, 0, 0, 0]
    assert aurc([0, 0, 1, 1, 0], zeros, conf, ties="order", integration="trapezoid") == pytest.approx(
        0.1125 * (1 - 1 / 5), abs=1e-12
    )
    # RiskAtxCov: probs [0.1, 0.2, 0.3, 0.4, 0.2], targets [0, 0, 1, 1, 1], cov 0.5 -> 1/3
    assert selective_risk([0, 0, 1, 1, 1], zeros, conf, coverage=0.5) == pytest.approx(1 / 3, abs=1e-15)
    # probs [0.1, 0.19, 0.3, 0.15, 0.4, 0.2], targets [0, 0, 1, 0, 1, 1], cov 0.5 -> 0
    assert selective_risk([0, 0, 1, 0, 1, 1], [0] * 6, [0.9, 0.81, 0.7, 0.85, 0.6, 0.8], coverage=0.5) == 0.0
    # probs [0.1, 0.2, 0.3, 0.15, 0.4, 0.2], targets [0, 0, 1, 0, 1, 1], cov 0.55 -> 1/4
    assert selective_risk([0, 0, 1, 0, 1, 1], [0] * 6, [0.9, 0.8, 0.7, 0.85, 0.6, 0.8], coverage=0.55) == 0.25
    # CovAtxRisk: probs [0.1, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.48, 0.49], targets [1, 0, 1, 1, 1, 0, 0, 0, 1],
    # risk 0.55 -> 8/9
    conf9 = [0.9, 0.8, 0.75, 0.7, 0.65, 0.6, 0.55, 0.52, 0.51]
    assert coverage_at_risk([1, 0, 1, 1, 1, 0, 0, 0, 1], [0] * 9, conf9, risk=0.55) == pytest.approx(8 / 9, abs=1e-15)
    # probs [0.1, 0.2, 0.3, 0.4, 0.2]: targets [0, 0, 1, 1, 1], risk 0.5 -> 4/5; targets [0, 0, 1, 1, 0] -> 1
    assert coverage_at_risk([0, 0, 1, 1, 1], zeros, conf, risk=0.5) == pytest.approx(4 / 5, abs=1e-15)
    assert coverage_at_risk([0, 0, 1, 1, 0], zeros, conf, risk=0.5) == 1.0
    # all predictions wrong, risk 0.5 -> NaN
    assert math.isnan(coverage_at_risk([1] * 5, zeros, [0.9, 0.8, 0.7, 0.6, 0.8], risk=0.5))
    # CovAtxRisk docstring: confidences [0.9, 0.6, 0.8, 0.5, 0.7], errors [0, 1, 0, 1, 0], risk 0.3 -> 0.8
    assert coverage_at_risk([0, 1, 0, 1, 0], zeros, [0.9, 0.6, 0.8, 0.5, 0.7], risk=0.3) == pytest.approx(0.8)


# ------------------------------------------------------------------------------------ input validation


CALLS = {
    "risk_coverage_curve": risk_coverage_curve,
    "aurc": aurc,
    "excess_aurc": excess_aurc,
    "selective_risk": partial(selective_risk, coverage=0.5),
    "risk_at_coverages": risk_at_coverages,
    "coverage_at_risk": partial(coverage_at_risk, risk=0.1),
}
N = 120
GOOD = (np.zeros(N, dtype=int), np.ones(N, dtype=int), np.linspace(0, 1, N))


@pytest.mark.parametrize("name", sorted(CALLS))
@pytest.mark.parametrize(
    ("args", "pattern"),
    [
        (
            (GOOD[0], GOOD[1][:-1], GOOD[2]),
            r"^y_pred: expected a 1-D array of integer class labels of length 120 .*got length 119$",
        ),
        ((GOOD[0], GOOD[1], GOOD[2][:-2]), r"^confidence: .*of length 120 .*got length 118$"),
        (
            (GOOD[0], GOOD[1], np.zeros((N, 2))),
            r"^confidence: expected a 1-D array of finite floats of length 120 .*got shape \(120, 2\)$",
        ),
        ((GOOD[0], GOOD[1], np.r_[0.1, 0.2, np.nan, GOOD[2][3:]]), r"^confidence: .*non-finite.*nan at index 2"),
        ((GOOD[0], GOOD[1], np.r_[np.inf, GOOD[2][1:]]), r"^confidence: .*non-finite.*inf at index 0"),
        ((GOOD[0], GOOD[1], ["a"] * N), r"^confidence: .*got dtype <U1$"),
        (([], [], []), r"^y_true: expected a non-empty 1-D array .*got an empty array"),
        ((np.zeros((N, 1), dtype=int), GOOD[1], GOOD[2]), r"^y_true: expected a 1-D array .*got shape \(120, 1\)$"),
        ((GOOD[0] + 0.5, GOOD[1], GOOD[2]), r"^y_true: .*non-integer value 0.5 at index 0$"),
        ((GOOD[0], ["x"] * N, GOOD[2]), r"^y_pred: .*got dtype <U1$"),
    ],
)
def test_bad_arrays_raise_value_error_naming_the_argument(name, args, pattern):
    with pytest.raises(ValueError, match=pattern):
        CALLS[name](*args)


@pytest.mark.parametrize("bad", [0, 0.0, 1.5, -0.2, float("nan"), True, "0.5", None])
def test_bad_coverage_raises(bad):
    with pytest.raises(ValueError, match=r"^coverage: expected a float in \(0, 1\], got "):
        selective_risk(*GOOD, coverage=bad)


def test_bad_coverages_raise():
    with pytest.raises(ValueError, match=r"^coverages\[1\]: expected a float in \(0, 1\], got 0$"):
        risk_at_coverages(*GOOD, coverages=(0.8, 0))
    with pytest.raises(ValueError, match=r"^coverages\[0\]: .*got 1.5$"):
        risk_at_coverages(*GOOD, coverages=[1.5])
    with pytest.raises(ValueError, match=r"^coverages: expected at least one"):
        risk_at_coverages(*GOOD, coverages=[])
    with pytest.raises(ValueError, match=r"^coverages: expected an iterable"):
        risk_at_coverages(*GOOD, coverages=0.9)


@pytest.mark.parametrize("bad", [-0.1, 1.01, float("nan"), "0.1"])
def test_bad_risk_raises(bad):
    with pytest.raises(ValueError, match=r"^risk: expected a float in \[0, 1\], got "):
        coverage_at_risk(*GOOD, risk=bad)


@pytest.mark.parametrize("name", sorted(CALLS))
def test_bad_ties_option_raises(name):
    with pytest.raises(ValueError, match=r"^ties: expected one of \['group', 'order'\], got 'random'$"):
        CALLS[name](*GOOD, ties="random")


def test_bad_integration_and_optimal_options_raise():
    with pytest.raises(ValueError, match=r"^integration: expected one of \['step', 'trapezoid'\], got 'simpson'$"):
        aurc(*GOOD, integration="simpson")
    with pytest.raises(ValueError, match=r"^integration: "):
        excess_aurc(*GOOD, integration="simpson")
    with pytest.raises(ValueError, match=r"^optimal: expected one of \['empirical', 'closed_form'\], got 'exact'$"):
        excess_aurc(*GOOD, optimal="exact")


def test_float_labels_with_integer_values_are_accepted():
    # one wrong prediction, at index 1 (confidence 0.5). By hand: prefix risks 0, 1/2, 1/3 -> (5/6)/3 = 5/18
    assert aurc([0, 1, 2], [0, 2, 2], [0.9, 0.5, 0.1]) == pytest.approx(5 / 18, abs=1e-15)
    assert aurc([0.0, 1.0, 2.0], [0.0, 2.0, 2.0], [0.9, 0.5, 0.1]) == pytest.approx(5 / 18, abs=1e-15)
    assert aurc(np.array([0, 1, 2], dtype=np.uint8), [0, 2, 2], [9, 5, 1]) == pytest.approx(5 / 18, abs=1e-15)
