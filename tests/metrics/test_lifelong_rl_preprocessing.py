"""Lifelong-RL preprocessing options by hand: a given data range, run-wide normalisation, clamped outliers,
smoothed evaluation blocks and STE runs found by a task's base name (l2metrics 3.1's options)."""

import pytest

from owl_eval.protocols.lifelong_rl.metrics import evaluate_log
from tests.metrics.test_lifelong_rl import make_log


def processed(result) -> list[float]:
    return result["series"]["reward_processed"].values.tolist()


def test_given_data_range_normalises_instead_of_the_observed_one():
    log = make_log([("train", "a_x", [0.0, 5.0, 10.0]), ("test", "a_x", [2.5, 2.5])])
    res = evaluate_log(log, data_range={"A_X": {"min": 0, "max": 20}})  # keys are matched lower-cased
    # (x - 0) / (20 - 0) * 100 + 1
    assert processed(res) == pytest.approx([1, 26, 51, 13.5, 13.5])
    assert res["info"]["normalization_data_range"] == {"a_x": {"min": 0.0, "max": 20.0}}


def test_given_data_range_of_variants_is_their_union_when_variants_are_merged():
    log = make_log([("train", "a_x", [4.0, 6.0]), ("train", "a_y", [5.0])])
    ranges = {"a_x": {"min": 2, "max": 8}, "a_y": {"min": 0, "max": 6}}
    res = evaluate_log(log, data_range=ranges, variant_mode="agnostic")
    # one task "a" over [min(2, 0), max(8, 6)] = [0, 8]
    assert processed(res) == pytest.approx([51, 76, 63.5])


def test_run_normalisation_uses_the_range_over_every_task():
    log = make_log([("train", "a_x", [0.0, 10.0]), ("train", "b_y", [0.0, 40.0])])
    # [0, 40] for both tasks (per task it would be [0, 10] and [0, 40])
    assert processed(evaluate_log(log, normalization="run")) == pytest.approx([1, 26, 1, 101])
    assert processed(evaluate_log(log, normalization="task")) == pytest.approx([1, 101, 1, 101])


def test_outliers_are_clamped_to_the_10th_and_90th_percentile_of_the_task():
    log = make_log([("train", "a_x", [float(v) for v in range(11)])])  # 11 rows: not smoothed
    # 0..10: the 10th percentile is 1, the 90th 9 (linear interpolation between ranks)
    res = evaluate_log(log, clamp_outliers=True, normalization="none")
    assert processed(res) == [1.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 9.0]


def test_outliers_are_clamped_to_the_given_data_range():
    log = make_log([("train", "a_x", [0.0, 3.0, 10.0])])
    res = evaluate_log(log, clamp_outliers=True, data_range={"a_x": {"min": 2, "max": 8}})
    # clipped to [2, 3, 8], then (x - 2) / 6 * 100 + 1
    assert processed(res) == pytest.approx([1, 1 + 100 / 6, 101])


def test_evaluation_blocks_are_smoothed_with_smooth_eval():
    spike = [0.0] * 7 + [15.0] + [0.0] * 7  # 15 rows: window min(int(0.2 * 15), 100) = 3
    log = make_log([("train", "a_x", [1.0, 2.0]), ("test", "a_x", spike)])
    plain = evaluate_log(log, normalization="none")
    assert processed(plain)[2:] == spike and plain["blocks"]["smoothed"].tolist() == [False, False]
    smoothed = evaluate_log(log, normalization="none", smooth_eval=True)
    # l2metrics' flat window of 3 at episode i averages episodes i-2..i (mirror padding at the start)
    assert processed(smoothed)[2:] == pytest.approx([0.0] * 7 + [5.0] * 3 + [0.0] * 5)
    assert smoothed["blocks"]["smoothed"].tolist() == [False, True]


def test_ste_runs_are_found_by_exact_task_name_else_by_base_name():
    agent = make_log([("train", "cartpole", list(range(1, 11)))])  # sum 55
    exact = make_log([("train", "cartpole", [2, 4, 6, 8, 10, 10, 10, 10, 10, 10])])  # sum 80
    variant = make_log([("train", "cartpole_v1", [5.0] * 3 + [10.0] * 7)])  # sum 85
    life = evaluate_log(agent, ste_logs=[variant], normalization="none")["lifetime"]
    assert life["ste_rel_perf"] == pytest.approx(55 / 85)
    life = evaluate_log(agent, ste_logs=[variant, exact], normalization="none")["lifetime"]
    assert life["ste_rel_perf"] == pytest.approx(55 / 80)  # the exact name wins over the variant
