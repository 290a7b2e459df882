"""owl_eval.stats against values computed independently: by hand from the definitions (worked in the comments),
by plain-Python loops over the definition written here, or from rliable's own tests
(google-research/rliable, tests/rliable/metrics_test.py and library_test.py)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from owl_eval.errors import MetricInputError
from owl_eval.stats import (
    STATISTICS,
    holm,
    iqm,
    iqm_ci,
    paired_difference,
    performance_profile,
    probability_of_improvement,
    probability_of_improvement_ci,
    resample_indices,
    round_to_ci,
    sign_flip_p_value,
    smallest_p_value,
    stratified_bootstrap_band,
    stratified_bootstrap_ci,
)

# rliable's metrics_test.py: scores (runs x tasks)
RLIABLE_X = np.array([[1, 2], [2, 2], [1, 1], [2, 1]])
RLIABLE_Y = np.array([[1, 1], [2, 2], [3, 3]])


# -- plain-Python definitions, written for the tests -------------------------------------------------------
def loop_iqm(values) -> float:
    """Sort, cut int(N/4) from each end, average the rest."""
    flat = sorted(float(v) for row in np.atleast_2d(values) for v in row)
    cut = int(0.25 * len(flat))
    middle = flat[cut : len(flat) - cut]
    return sum(middle) / len(middle)


def loop_poi(x, y, lower_is_better=False) -> float:
    """Mean over tasks of (pairs where X wins + 1/2 ties) / (runs_x runs_y), one pair at a time."""
    x, y = np.atleast_2d(x), np.atleast_2d(y)
    per_task = []
    for m in range(x.shape[1]):
        wins = 0.0
        for a in x[:, m]:
            for b in y[:, m]:
                if a == b:
                    wins += 0.5
                elif (a < b) if lower_is_better else (a > b):
                    wins += 1.0
        per_task.append(wins / (x.shape[0] * y.shape[0]))
    return sum(per_task) / len(per_task)


def loop_sign_flip_p(d, two_sided: bool = True) -> float:
    """Share of all 2**n sign patterns whose mean is at least as far from 0 as the observed mean (two-sided), or
    >= the observed mean (one-sided)."""
    observed = sum(d) / len(d)
    hits = 0
    patterns = list(itertools.product([1, -1], repeat=len(d)))
    for signs in patterns:
        mean = sum(s * v for s, v in zip(signs, d)) / len(d)
        if (abs(mean) >= abs(observed) - 1e-12) if two_sided else (mean >= observed - 1e-12):
            hits += 1
    return hits / len(patterns)


# -- IQM -----------------------------------------------------------------------------------------------------
def test_iqm_by_hand():
    # 8 scores 1,2,3,4,5,6,7,100: int(0.25*8) = 2 cut from each end -> 3,4,5,6 -> 4.5 (the 100 is trimmed)
    assert iqm([[1, 2], [3, 4], [5, 6], [7, 100]]) == 4.5
    # 5 scores sorted 1,2,3,7,10: int(1.25) = 1 cut from each end -> 2,3,7 -> 4
    assert iqm([10, 1, 3, 2, 7]) == 4.0
    # 1-D is one task: 0..9, cut 2 each end -> 2..7 -> 4.5
    assert iqm(np.arange(10)) == 4.5


def test_iqm_matches_rliable_published_values():
    assert iqm(RLIABLE_X) == 1.5
    assert iqm(RLIABLE_Y) == 2.0


def test_iqm_matches_a_loop_and_rliables_trim_mean_on_random_scores():
    from scipy.stats import trim_mean

    for runs in range(1, 12):
        scores = np.random.default_rng(runs).normal(size=(runs, 3))
        assert iqm(scores) == pytest.approx(loop_iqm(scores), abs=1e-12)
        # rliable's aggregate_iqm is this call
        assert iqm(scores) == pytest.approx(trim_mean(scores, proportiontocut=0.25, axis=None), abs=1e-12)


# -- probability of improvement ------------------------------------------------------------------------------
def test_probability_of_improvement_matches_rliable_published_value():
    # task 0: x 1,2,1,2 vs y 1,2,3: x=1 wins .5 (tie with 1), x=2 wins 1 + .5 -> (2*.5 + 2*1.5)/12 = 1/3; task 1 same
    assert probability_of_improvement(RLIABLE_X, RLIABLE_Y) == pytest.approx(1 / 3)


@pytest.mark.parametrize(("shape", "axis"), [((7,), 0), ((3, 9, 4), 1), ((5, 1, 2), 1), ((2, 3, 40), -1), ((4, 6), 0)])
def test_average_ranks_are_scipys_rankdata_average(shape, axis):
    from scipy.stats import rankdata

    from owl_eval.stats import average_ranks

    values = np.random.default_rng(sum(shape)).integers(0, 4, size=shape).astype(float)  # many ties
    # ranks are multiples of 1/2: equal to the bit
    np.testing.assert_array_equal(average_ranks(values, axis=axis), rankdata(values, method="average", axis=axis))


def test_average_ranks_by_hand():
    from owl_eval.stats import average_ranks

    assert average_ranks(np.array([3.0, 1.0, 3.0, 2.0, 3.0])).tolist() == [4.0, 1.0, 4.0, 2.0, 4.0]


def test_probability_of_improvement_by_a_double_loop_over_pairs():
    rng = np.random.default_rng(7)
    x = rng.integers(0, 4, size=(6, 3)).astype(float)  # small integers: many ties
    y = rng.integers(0, 4, size=(4, 3)).astype(float)
    assert probability_of_improvement(x, y) == pytest.approx(loop_poi(x, y), abs=1e-12)
    assert probability_of_improvement(x, y, higher_is_better=False) == pytest.approx(
        loop_poi(x, y, lower_is_better=True), abs=1e-12
    )


def test_probability_of_improvement_by_hand_and_the_direction_flip():
    # one task, x 1,2,3,4 vs y 0.5,2.5,2,3: x=1 beats 0.5 (1); x=2 beats 0.5, ties 2 (1.5); x=3 beats 0.5, 2.5, 2,
    # ties 3 (3.5); x=4 beats all (4) -> 10/16
    x, y = [1, 2, 3, 4], [0.5, 2.5, 2, 3]
    assert probability_of_improvement(x, y) == 10 / 16
    # lower is better: X wins where x < y, ties 1/2 -> 16 pairs - 10 = 6 -> 6/16
    assert probability_of_improvement(x, y, higher_is_better=False) == 6 / 16
    # identical runs: every comparison a tie or mirrored -> 1/2 (rliable's special case)
    assert probability_of_improvement(x, x) == 0.5


# -- the stratified bootstrap --------------------------------------------------------------------------------
def test_resampling_keeps_each_task_stratum():
    """score[n, m] = 100 m + n: a replicate's column m must hold runs of task m only, runs_x of them."""
    runs, tasks = 6, 4
    scores = 100 * np.arange(tasks)[None, :] + np.arange(runs)[:, None]
    seen = []

    def record(batch):
        seen.append(batch.copy())
        return np.zeros(batch.shape[0])

    stratified_bootstrap_ci(scores, record, reps=300, rng=0)
    replicates = seen[-1]  # seen[0] is the point estimate on the data itself
    assert replicates.shape == (300, runs, tasks)
    for m in range(tasks):
        column = replicates[:, :, m]
        assert ((column >= 100 * m) & (column < 100 * m + runs)).all()  # only task m's runs
    # drawn with replacement, independently per task: some replicate repeats a run within a task, and the
    # tasks of one replicate do not all get the same runs
    assert any(len(set(replicates[r, :, 0])) < runs for r in range(300))
    assert any(not np.array_equal(replicates[r, :, 0], replicates[r, :, 1] - 100) for r in range(300))
    assert np.array_equal(seen[0][0], scores)


def test_resample_indices_shape_and_range():
    idx = resample_indices(5, 3, 10, np.random.default_rng(0))
    assert idx.shape == (10, 5, 3) and idx.min() >= 0 and idx.max() <= 4


def test_interval_of_a_constant_array_is_a_point():
    scores = np.full((10, 5), 0.7)
    for stat in ("iqm", "mean", "median"):
        ci = stratified_bootstrap_ci(scores, stat, reps=200, rng=1)
        assert (ci.estimate, ci.low, ci.high) == pytest.approx((0.7, 0.7, 0.7))


def test_bootstrap_equals_a_loop_over_replicates_with_the_same_draws():
    """The documented draw (one index array (reps, runs, tasks)) replayed in a plain loop: per replicate, per
    task, pick the runs, take the loop IQM; then the 2.5th and 97.5th percentiles (linear, as arch does)."""
    scores = np.random.default_rng(5).normal(size=(10, 5))
    reps = 400
    ci = stratified_bootstrap_ci(scores, "iqm", reps=reps, rng=11)
    idx = np.random.default_rng(11).integers(0, 10, size=(reps, 10, 5))
    values = []
    for r in range(reps):
        resample = [[scores[idx[r, n, m], m] for m in range(5)] for n in range(10)]
        values.append(loop_iqm(resample))
    assert ci.estimate == pytest.approx(loop_iqm(scores))
    assert ci.low == pytest.approx(np.percentile(values, 2.5))
    assert ci.high == pytest.approx(np.percentile(values, 97.5))


def test_two_sample_bootstrap_resamples_x_and_y_independently():
    x = 10 * np.arange(4)[:, None] + np.arange(2)[None, :]  # (4 runs, 2 tasks)
    y = 1000 + 10 * np.arange(3)[:, None] + np.arange(2)[None, :]  # (3 runs, 2 tasks)
    seen = []

    def record(bx, by):
        seen.append((bx.copy(), by.copy()))
        return np.zeros(bx.shape[0])

    stratified_bootstrap_ci((x, y), record, reps=50, rng=2)
    bx, by = seen[-1]
    assert bx.shape == (50, 4, 2) and by.shape == (50, 3, 2)
    assert set(np.unique(bx[:, :, 1])) <= set(x[:, 1]) and set(np.unique(by[:, :, 1])) <= set(y[:, 1])


def test_probability_of_improvement_interval_contains_the_estimate_as_in_rliable():
    # rliable's library_test: x = arange(80).reshape(5, 16), y = x flipped over runs, reps 100: low < point < high
    x = np.arange(80).reshape(5, 16)
    y = np.flip(x, axis=0)
    ci = probability_of_improvement_ci(x, y, reps=100, rng=0)
    assert ci.estimate == pytest.approx(loop_poi(x, y))
    assert ci.low < ci.estimate < ci.high
    named = stratified_bootstrap_ci((x, y), "probability_of_improvement", reps=100, rng=0)
    assert (named.low, named.high) == (ci.low, ci.high)
    # rliable's interval-estimation test (percentile, runs only): low < point < high for the IQM and the mean
    for stat in ("iqm", "mean"):
        ci = stratified_bootstrap_ci(x, stat, reps=100, rng=0)
        assert ci.low < ci.estimate < ci.high


def test_seeded_bootstrap_is_deterministic():
    scores = np.random.default_rng(9).normal(size=(10, 5))
    a = iqm_ci(scores, rng=42)
    b = iqm_ci(scores, rng=np.random.default_rng(42))
    assert a == b
    assert iqm_ci(scores, rng=43) != a
    assert set(STATISTICS) == {"iqm", "mean", "median", "probability_of_improvement"}


# -- performance profiles ------------------------------------------------------------------------------------
def test_performance_profile_by_hand():
    # rliable's x: 8 scores, four 1s and four 2s. > 0: 8/8; > 1: 4/8; > 1.5: 4/8; > 2: 0
    prof = performance_profile(RLIABLE_X, [0, 1, 1.5, 2])
    assert prof.fraction.tolist() == [1.0, 0.5, 0.5, 0.0]
    assert prof.low is None
    # lower is better: < tau. < 0: 0; < 1: 0; < 1.5: 4/8; < 2: 4/8
    assert performance_profile(RLIABLE_X, [0, 1, 1.5, 2], higher_is_better=False).fraction.tolist() == [0, 0, 0.5, 0.5]


def test_performance_profile_is_the_mean_over_tasks_of_the_fraction_of_runs():
    scores = np.random.default_rng(4).uniform(size=(6, 3))
    taus = [0.1, 0.5, 0.9]
    expected = [sum(sum(scores[n, m] > t for n in range(6)) / 6 for m in range(3)) / 3 for t in taus]
    assert performance_profile(scores, taus).fraction == pytest.approx(expected)


def test_performance_profile_band():
    scores = np.random.default_rng(4).uniform(size=(10, 5))
    prof = performance_profile(scores, np.linspace(0, 1, 5), band=True, reps=300, rng=0)
    assert prof.low is not None and prof.high is not None
    assert (prof.low <= prof.fraction + 1e-12).all() and (prof.fraction <= prof.high + 1e-12).all()
    assert prof.low[0] == prof.high[0] == 1.0  # every score > 0 in every resample
    flat = performance_profile(np.full((4, 2), 0.5), [0.4, 0.6], band=True, reps=100, rng=0)
    assert flat.low.tolist() == flat.high.tolist() == [1.0, 0.0]
    band = stratified_bootstrap_band(scores, lambda s: np.stack([s.mean(axis=(1, 2)), s.max(axis=(1, 2))], 1), rng=0)
    assert band.estimate == pytest.approx([scores.mean(), scores.max()])


# -- paired differences and the p-value ----------------------------------------------------------------------
def test_paired_difference_by_hand():
    a = [1.0, 2.0, 3.0, 4.0]
    b = [0.5, 2.5, 2.0, 3.0]
    # per-seed differences 0.5, -0.5, 1, 1 -> mean 0.5. Sign patterns (16) with signed sum >= 2: s3 = s4 = +1
    # and 0.5 (s1 - s2) >= 0 -> 3 of the 4 (s1, s2); with s3 + s4 = 0 the sum is at most 1 -> one-sided 3/16;
    # two-sided, the 3 mirror patterns with sum <= -2 too -> 6/16
    res = paired_difference(a, b, reps=500, rng=0)
    assert res.difference == 0.5
    assert res.p_value == 6 / 16 == loop_sign_flip_p([0.5, -0.5, 1, 1])
    d = np.array([0.5, -0.5, 1, 1])
    assert sign_flip_p_value(d, alternative="greater")[0] == 3 / 16 == loop_sign_flip_p(d, two_sided=False)
    assert sign_flip_p_value(d, alternative="less")[0] == 15 / 16  # only the all-minus pattern (-3) is not <= 2
    assert res.n == 4 and res.exact
    assert -0.5 <= res.low <= 0.5 <= res.high <= 1.0  # means of resampled differences lie within their range


def test_paired_difference_direction_flip():
    a, b = [1.0, 2.0, 3.0, 4.0], [0.5, 2.5, 2.0, 3.0]
    res = paired_difference(a, b, higher_is_better=False, reps=500, rng=0)
    assert res.difference == 0.5  # the difference keeps its sign: a is 0.5 higher, worse here
    # two-sided: the direction changes which agent is better, never the p (b vs a gives the same 6/16)
    assert res.p_value == 6 / 16 == loop_sign_flip_p([-0.5, 0.5, -1, -1])
    assert paired_difference(b, a, reps=500, rng=0).p_value == res.p_value


def test_paired_bootstrap_equals_a_loop_with_the_same_draws():
    """Seeds resampled as documented: one index array (reps, n) from the rng; the mean of each resample."""
    a = np.random.default_rng(1).normal(size=8)
    b = np.random.default_rng(2).normal(size=8)
    res = paired_difference(a, b, reps=300, rng=5)
    idx = np.random.default_rng(5).integers(0, 8, size=(300, 8))
    d = [x - y for x, y in zip(a, b)]
    means = [sum(d[i] for i in row) / 8 for row in idx]
    assert res.low == pytest.approx(np.percentile(means, 2.5))
    assert res.high == pytest.approx(np.percentile(means, 97.5))
    assert res.p_value == pytest.approx(loop_sign_flip_p(d))


def test_paired_difference_averages_trials_within_a_seed():
    a = [[1.0, 3.0], [2.0, 2.0], [0.0, 4.0]]  # seed means 2, 2, 2
    b = [[1.0, 1.0], [1.0, 1.0], [1.0, 1.0]]  # seed means 1
    res = paired_difference(a, b, reps=100, rng=0)
    # per-seed differences 1, 1, 1: interval a point; the all-plus and all-minus patterns of 8 reach |mean| 1 -> 2/8
    assert (res.difference, res.low, res.high, res.p_value) == (1.0, 1.0, 1.0, 2 / 8)


def test_one_seed_has_no_interval():
    res = paired_difference([0.9], [0.8], rng=0)
    assert res.difference == pytest.approx(0.1)
    assert math.isnan(res.low) and math.isnan(res.high) and math.isnan(res.p_value)


def test_sign_flip_p_value_samples_patterns_above_sixteen_seeds():
    # 20 equal gains: only the all-plus and all-minus patterns (chance 2**-19 a draw) reach |mean| -> p = 1 / (1 + R)
    p, exact = sign_flip_p_value(np.ones(20), permutations=5000, rng=0)
    assert not exact and p == 1 / 5001
    # gains symmetric about 0 (+-1, ten each): the observed mean 0 is the median of the sign-flip means; by
    # symmetry P(mean >= 0) = 1/2 + P(mean = 0)/2 = 1/2 + C(20,10)/2**21 = 0.588; two-sided every pattern counts
    symmetric = np.r_[np.ones(10), -np.ones(10)]
    p, _ = sign_flip_p_value(symmetric, alternative="greater", permutations=20000, rng=0)
    assert p == pytest.approx(0.5 + math.comb(20, 10) / 2**21, abs=0.015)
    assert sign_flip_p_value(symmetric, permutations=2000, rng=0)[0] == 1.0
    assert smallest_p_value(3) == 0.25 and smallest_p_value(10) == 2 / 1024 and smallest_p_value(20) == 1 / 10001
    # all gains zero: every pattern ties the observed mean
    assert sign_flip_p_value(np.zeros(5))[0] == 1.0


# -- Holm ----------------------------------------------------------------------------------------------------
def test_holm_by_hand():
    # sorted: .005 x4 = .02; .01 x3 = .03; .03 x2 = .06; .04 x1 = .04 -> running max .02 .03 .06 .06
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    # capped at 1: .5 x2 = 1.0, .6 x1 = .6 -> max 1.0
    assert holm([0.5, 0.6]).tolist() == [1.0, 1.0]
    # one test: unchanged
    assert holm([0.2]).tolist() == [0.2]
    # ties: .02 x2 = .04, .02 x1 = .02 -> running max .04 .04
    assert holm([0.02, 0.02]) == pytest.approx([0.04, 0.04])
    assert holm([]).tolist() == []


def test_holm_leaves_nan_out_of_the_count():
    # m = 2 (the NaN is no test): .01 x2 = .02, .04 x1 = .04
    out = holm([0.01, np.nan, 0.04])
    assert out[0] == pytest.approx(0.02) and math.isnan(out[1]) and out[2] == pytest.approx(0.04)


# -- rounding ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value, low, high, text",
    [
        (0.8123, 0.7801, 0.8444, "0.81 [0.78, 0.84]"),  # h = 0.032: one digit -> 2 decimals
        (0.8123, 0.7981, 0.8265, "0.812 [0.798, 0.827]"),  # h = 0.0142 starts with 1: two digits -> 3 decimals
        (1234.0, 1000.0, 1468.0, "1200 [1000, 1500]"),  # h = 234: hundreds
        (0.125, 0.1, 0.15, "0.13 [0.10, 0.15]"),  # h = 0.025; 0.125 rounds half up
        (-0.004, -0.04, 0.03, "0.00 [-0.04, 0.03]"),  # h = 0.035; no "-0.00"
        (12.3456, 11.0, 13.4, "12.3 [11.0, 13.4]"),  # h = 1.2 starts with 1: 1 decimal
        (0.5, 0.5, 0.5, "0.500 [0.500, 0.500]"),  # zero width: 3 significant digits
    ],
)
def test_round_to_ci_examples(value, low, high, text):
    assert str(round_to_ci(value, low, high)) == text


def test_round_to_ci_without_an_interval():
    assert str(round_to_ci(0.81234)) == "0.812"  # n = 1: 3 significant digits, no brackets
    assert round_to_ci(0.81234, math.nan, math.nan).low is None
    assert str(round_to_ci(0.12, 0.08, 0.16, sign=True)) == "+0.12 [0.08, 0.16]"
    assert str(round_to_ci(math.nan, 0.0, 1.0)) == "n/a"
    assert round_to_ci(0.8123, 0.7801, 0.8444).decimals == 2


# -- bad input -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "call, words",
    [
        (lambda: iqm(np.zeros((2, 2, 2))), ["scores:", "(runs, tasks)", "(2, 2, 2)"]),
        (lambda: iqm([[1.0, np.nan]]), ["scores:", "nan", "(0, 1)", "missing"]),
        (lambda: iqm([]), ["scores:", "at least one run", "(0, 1)"]),
        (lambda: iqm("abc"), ["scores:", "numbers"]),
        (lambda: iqm([[1, 2], [3]]), ["scores:", "numbers"]),
        (lambda: probability_of_improvement(np.zeros((3, 2)), np.zeros((3, 3))), ["y:", "tasks", "(3, 3)"]),
        (lambda: iqm_ci([1.0, 2.0]), ["rng:", "None"]),
        (lambda: iqm_ci([1.0, 2.0], rng=0, reps=0), ["reps:", "0"]),
        (lambda: iqm_ci([1.0, 2.0], rng=0, confidence=95), ["confidence:", "95"]),
        (lambda: stratified_bootstrap_ci([1.0, 2.0], "iqr", rng=0), ["statistic:", "'iqr'", "iqm"]),
        (lambda: stratified_bootstrap_ci([1.0, 2.0], lambda s: s, rng=0), ["statistic:", "shape"]),
        (lambda: paired_difference([1.0, 2.0], [1.0, 2.0, 3.0], rng=0), ["b:", "(2,)", "(3,)", "seed"]),
        (lambda: paired_difference([1.0, 2.0], [1.0, 2.0], higher_is_better="yes", rng=0), ["higher_is_better"]),
        (lambda: holm([0.5, 1.5]), ["p_values:", "1.5"]),
        (lambda: performance_profile([1.0, 2.0], [[0.0]]), ["taus:", "(1, 1)"]),
        (lambda: round_to_ci(1.0, 2.0, 0.0), ["low", "high"]),
    ],
)
def test_bad_input_is_one_clear_error(call, words):
    with pytest.raises(MetricInputError) as info:
        call()
    message = str(info.value)
    assert isinstance(info.value, ValueError)
    for word in words:
        assert word in message, message
    assert info.value.__cause__ is None  # no numpy traceback chained under it
