"""Lifelong-RL metrics: hand-computed values on small logs, l2metrics' own smoothing test, N/A reasons."""

import math

import numpy as np
import pytest

from owl_eval.formats.l2logger import EpisodeLog, read_log, write_log
from owl_eval.metrics.results import NA, MetricResults
from owl_eval.metrics.validation import MetricInputError
from owl_eval.protocols.lifelong_rl.metrics import (
    LIFETIME_NAMES,
    SPECS,
    evaluate_log,
    evaluate_log_results,
    performance_maintenance,
    performance_recovery,
    recovery_time,
    sample_efficiency,
    saturation,
    smooth,
    ste_relative_performance,
    terminal_performance,
    time_to_learn,
    time_to_saturation,
)


def make_log(blocks, **kw) -> EpisodeLog:
    """blocks: list of (block_type, task, rewards); one block per entry, exp_num counts up."""
    bn, bt, tn, rw, sub = [], [], [], [], []
    for i, block in enumerate(blocks):
        typ, task, r = block[:3]
        subtype = block[3] if len(block) > 3 else "wake"
        bn += [i] * len(r)
        bt += [typ] * len(r)
        tn += [task] * len(r)
        sub += [subtype] * len(r)
        rw += list(r)
    return EpisodeLog.from_columns(
        block_num=np.array(bn),
        block_type=np.array(bt, dtype=object),
        task_name=np.array(tn, dtype=object),
        block_subtype=np.array(sub, dtype=object),
        reward=np.array(rw, dtype=float),
        **kw,
    )


# ------------------------------------------------------------------------------------------ smoothing


def test_smooth_matches_l2metrics_own_test():
    # l2metrics tests/test_preprocessing.py::test_smoothing
    assert np.allclose(
        smooth(np.arange(1, 11), window_len=3), (2, 1.66666667, 2, 3, 4, 5, 6, 7, 8, 9), rtol=1e-5, atol=1e-8
    )


def _loop_smooth(x, window_len=None):
    """Plain-loop version of the SciPy-cookbook smoothing l2metrics documents (mirror pad, valid, trim)."""
    x = list(map(float, x))
    n = len(x)
    if window_len is None or n < window_len:
        window_len = min(int(n * 0.2), 100)
    if window_len < 3:
        return x
    s = x[window_len - 1 : 0 : -1] + x + x[-2 : -window_len - 1 : -1]
    y = [sum(s[j : j + window_len]) / window_len for j in range(len(s) - window_len + 1)]
    start = int(math.floor(window_len / 2 - 1))
    return y[start : len(y) - int(math.ceil(window_len / 2))]


@pytest.mark.parametrize("n", [1, 2, 14, 15, 16, 37, 100, 499, 501, 1200])
@pytest.mark.parametrize("window_len", [None, 3, 4, 9])
def test_smooth_equals_loop_reference(n, window_len):
    x = np.random.default_rng(n).normal(size=n)
    assert np.allclose(smooth(x, window_len=window_len), _loop_smooth(x, window_len), rtol=0, atol=1e-12)


def test_short_curves_are_not_smoothed():
    x = np.array([5.0, 1.0, 9.0, 2.0, 8.0, 3.0, 7.0, 4.0, 6.0, 0.0, 5.0, 1.0, 9.0, 2.0])  # n = 14: int(2.8) < 3
    assert np.array_equal(smooth(x), x)


# ---------------------------------------------------------------------------------- block functions


def test_saturation_and_time_to_saturation_by_hand():
    # n = 20 -> window int(0.2*20) = 4, output j = mean(padded[j+1 .. j+4]); padded = [0,0,0] + x + [10,10,10]
    # y[9] = (0+0+0+10)/4 = 2.5, y[10] = 5, y[11] = 7.5, y[12] = 10 = max -> saturation 10 at episode 12
    x = [0.0] * 10 + [10.0] * 10
    assert saturation(x) == pytest.approx(10.0)
    assert time_to_saturation(x) == 12
    assert np.allclose(smooth(x)[9:13], [2.5, 5.0, 7.5, 10.0])


def test_terminal_performance_and_recovery_by_hand():
    x = np.arange(20.0)
    assert terminal_performance(x) == pytest.approx(18.5)  # mean(x[int(0.9*20):]) = mean(18, 19)
    assert terminal_performance(x, block_type="test") == pytest.approx(9.5)  # evaluation: mean of all
    assert recovery_time([1, 2, 3, 4], 2.5) == 2
    assert recovery_time([1, 2, 3, 4], 10.0) == 5  # never: n + 1


def test_performance_recovery_is_minus_theil_sen_slope():
    assert performance_recovery([10, 8, 6]) == pytest.approx(2.0)  # pairwise slopes all -2
    assert isinstance(performance_recovery([7]), NA)


def test_performance_recovery_median_of_pairwise_slopes():
    # pairs (i<j): (0,1) 6, (0,2) 0.5, (0,3) 2/3, (1,2) -5, (1,3) -2, (2,3) 1 -> sorted -5,-2,.5,.667,1,6
    # median = (0.5 + 0.6667)/2 = 0.58333 -> performance recovery = -0.58333
    assert performance_recovery([3, 9, 4, 5]) == pytest.approx(-(0.5 + 2 / 3) / 2)


def test_performance_maintenance_by_hand():
    # regimes: 0 train(tp 9) 1 test(10) 2 test(8) 3 train(11) 4 test(12) 5 test(9)
    # reference tests = first test after each training: 1 and 4; assessed: 2 (vs 1 / vs train 0), 5 (vs 4 / vs 3)
    bt = ["train", "test", "test", "train", "test", "test"]
    tp = [9.0, 10.0, 8.0, 11.0, 12.0, 9.0]
    assert performance_maintenance(bt, tp, method="mrlep") == pytest.approx(((8 - 10) + (9 - 12)) / 2)
    assert performance_maintenance(bt, tp, method="mrtlp") == pytest.approx(((8 - 9) + (9 - 11)) / 2)
    assert isinstance(performance_maintenance(["train", "test"], [1.0, 2.0]), NA)


# --------------------------------------------------------------------------- full pipeline by hand

HAND = [
    ("test", "a_x", [2, 2]),
    ("test", "b_y", [4, 4]),
    ("train", "a_x", list(range(1, 11))),  # n=10: not smoothed; term = mean(x[9:]) = 10
    ("test", "a_x", [6, 6]),
    ("test", "b_y", [5, 5]),
    ("train", "b_y", [2, 4, 6, 8, 10]),  # term = mean(x[4:]) = 10
    ("test", "a_x", [5, 5]),
    ("test", "b_y", [8, 8]),
    ("train", "a_x", [4, 8, 12, 12, 12]),  # recovery vs 10: first index >= 10 is 2
    ("test", "a_x", [7, 7]),
    ("test", "b_y", [8, 8]),
]


def test_evaluate_log_by_hand_without_normalization():
    res = evaluate_log(make_log(HAND), normalization="none")
    life, tasks = res["lifetime"], res["tasks"]
    # forward: a trained (block 2) before b's first training, between b's tests 1 (4) and 4 (5)
    assert life["forward_transfer_ratio"] == pytest.approx(5 / 4)
    assert life["forward_transfer_contrast"] == pytest.approx((5 - 4) / (5 + 4))
    # backward: a at block 8 between b tests 7 (8) and 10 (8) -> 1; b at block 5 between a tests 3 (6), 6 (5)
    assert res["transfer"]["backward_transfer_ratio"] == {("a_x", "b_y"): [1.0], ("b_y", "a_x"): [5 / 6]}
    assert life["backward_transfer_ratio"] == pytest.approx((1.0 + 5 / 6) / 2)
    assert life["backward_transfer_contrast"] == pytest.approx((0.0 + (5 - 6) / 11) / 2)
    # maintenance a: ref tests 3, 9; assessed 6 -> mrlep 5-6, mrtlp 5-10; b: ref 7; assessed 10 -> 8-8, 8-10
    assert tasks["a_x"]["perf_maintenance_mrlep"] == pytest.approx(-1.0)
    assert tasks["b_y"]["perf_maintenance_mrtlp"] == pytest.approx(-2.0)
    assert life["perf_maintenance_mrlep"] == pytest.approx(-0.5)
    assert life["perf_maintenance_mrtlp"] == pytest.approx(-3.5)
    # recovery: only a has a second training block
    assert tasks["a_x"]["recovery_times"] == [2.0]
    assert life["recovery_time"] == pytest.approx(2.0)
    assert isinstance(tasks["b_y"]["recovery_time"], NA)
    assert isinstance(life["perf_recovery"], NA) and "recovery times" in life["perf_recovery"].reason
    # averages: a train (5.5, 9.6), eval (2, 6, 5, 7); b train 6, eval (4, 5, 8, 8)
    assert life["avg_train_perf"] == pytest.approx(((5.5 + 9.6) / 2 + 6) / 2)
    assert life["avg_eval_perf"] == pytest.approx((5.0 + 6.25) / 2)
    assert life["eval_train_gap"] == pytest.approx(((5.0 - 7.55) + (6.25 - 6.0)) / 2)
    # task curve a = [1..10, 4, 8, 12, 12, 12] (n=15, window 3): smoothed max 12 at index 14; b: 10 at 4
    assert tasks["a_x"]["saturation"] == pytest.approx(12.0) and tasks["a_x"]["time_to_saturation"] == 14
    assert life["saturation"] == pytest.approx(11.0) and life["time_to_saturation"] == pytest.approx(9.0)
    assert life["normalized_integral"] == pytest.approx((103 / 15 + 6.0) / 2)
    # block table: block 2 saturation 10 at 9 (not smoothed), terminal 10
    b = res["blocks"]
    assert b["saturation"][2] == 10 and b["eps_to_sat"][2] == 9 and b["term_perf"][2] == 10
    assert b["recovery_time"][8] == 2 and np.isnan(b["recovery_time"][5])
    assert not b["smoothed"].any()  # every block is shorter than 15 episodes
    assert res["info"]["task_order"] == ["a_x", "b_y"] and res["info"]["num_lx"] == 20


def test_task_normalization_maps_range_to_1_101():
    log = make_log([("train", "a_x", [0.0, 5.0, 10.0]), ("test", "a_x", [2.5, 2.5])])
    res = evaluate_log(log, normalization="task")
    # range of task a over all its rows: [0, 10] -> (x - 0)/10*100 + 1
    assert res["series"]["reward_processed"].values.tolist() == pytest.approx([1, 51, 101, 26, 26])
    assert res["info"]["normalization_data_range"] == {"a_x": {"min": 0.0, "max": 10.0}}
    const = evaluate_log(make_log([("train", "a_x", [3.0, 3.0])]))
    assert const["series"]["reward_processed"].values.tolist() == [1.0, 1.0]  # constant task -> offset


def test_sleep_evaluations_replace_wake_ones():
    log = make_log([("train", "a_x", [1, 1]), ("test", "a_x", [3, 3], "wake"), ("test", "a_x", [5, 5], "sleep")])
    assert evaluate_log(log, normalization="none")["lifetime"]["avg_eval_perf"] == pytest.approx(5.0)


def test_variant_agnostic_merges_variants():
    log = make_log([("train", "a_x", [1, 2]), ("train", "a_y", [3, 4]), ("test", "a_z", [5, 5])])
    res = evaluate_log(log, normalization="none", variant_mode="agnostic")
    assert list(res["tasks"]) == ["a"]
    assert res["tasks"]["a"]["avg_train_perf"] == pytest.approx((1.5 + 3.5) / 2)


# ------------------------------------------------------------------------------------------ STE


def test_ste_metrics_by_hand():
    agent = make_log([("train", "a_x", list(range(1, 11)))])  # sat 10 at episode 9, sum 55
    ste = make_log([("train", "a_x", [2, 4, 6, 8, 10, 10, 10, 10, 10, 10])])  # sat 10 at 4, sum 80
    res = evaluate_log(agent, ste_logs=[ste], normalization="none")
    life = res["lifetime"]
    assert life["ste_rel_perf"] == pytest.approx(55 / 80)
    assert life["sample_efficiency"] == pytest.approx((10 / 10) * (4 / 9))
    assert life["ste_saturation_ratio"] == pytest.approx(1.0)
    assert life["ste_time_to_saturation_ratio"] == pytest.approx(4 / 9)
    # level 0.9 * 10 = 9: agent reaches it at index 8 (9 episodes), the STE at index 4 (5 episodes)
    assert life["time_to_learn"] == pytest.approx(5 / 9)
    # functions directly, with two STE runs averaged
    a, e = np.arange(1.0, 11.0), np.arange(10)
    runs = [(np.array([2, 4, 6, 8, 10, 10, 10, 10, 10, 10.0]), e), (np.array([5.0] * 3 + [10.0] * 7), e)]
    assert ste_relative_performance(a, [r for r, _ in runs]) == pytest.approx((55 / 80 + 55 / 85) / 2)
    assert sample_efficiency(a, e, runs)["sample_efficiency"] == pytest.approx((4 / 9 + 3 / 9) / 2)
    assert time_to_learn(a, e, runs) == pytest.approx((5 / 9 + 4 / 9) / 2)


def test_sample_efficiency_zero_below_20_percent_of_ste():
    a, e = np.array([1.0, 2, 3, 10, 9, 8, 7, 6, 5, 4]), np.arange(10)  # sat 10 at 3, trend positive
    ste = [(np.array([0.0] + [100.0] * 9), np.arange(10))]  # sat 100 at 1: 10 < 0.2 * 100
    out = sample_efficiency(a, e, ste)
    assert out["sample_efficiency"] == 0.0 and out["saturation_ratio"] == pytest.approx(0.1)


def test_ste_log_must_train_one_task():
    two = make_log([("train", "a_x", [1, 2]), ("train", "b_y", [1, 2])])
    with pytest.raises(MetricInputError, match="exactly one task"):
        evaluate_log(make_log([("train", "a_x", [1, 2])]), ste_logs=[two])


# ------------------------------------------------------------------------------- N/A, never a crash


def test_one_row_log_gives_numbers_or_reasons():
    res = evaluate_log(make_log([("train", "a_x", [3.0])]))
    assert set(res["lifetime"]) == set(LIFETIME_NAMES)
    assert res["lifetime"]["saturation"] == 1.0  # constant task normalises to the offset
    for name in (
        "perf_recovery",
        "perf_maintenance_mrlep",
        "forward_transfer_ratio",
        "ste_rel_perf",
        "sample_efficiency",
        "avg_eval_perf",
        "recovery_time",
        "time_to_learn",
    ):
        assert isinstance(res["lifetime"][name], NA) and res["lifetime"][name].reason
    assert "STE" in res["lifetime"]["ste_rel_perf"].reason
    assert "evaluation" in res["lifetime"]["perf_maintenance_mrlep"].reason


def test_empty_after_filtering_is_all_na():
    log = make_log([("train", "a_x", [float("nan"), float("nan")])])
    res = evaluate_log(log)
    assert all(isinstance(v, NA) for v in res["lifetime"].values())


def test_results_flattening_and_specs(tmp_path):
    out = read_log(write_log(make_log(HAND), tmp_path, "hand"), perf_measure="reward", raw=True, columns=["reward"])
    res = evaluate_log_results(out, normalization="none")
    assert isinstance(res, MetricResults)
    assert res.values["forward_transfer_ratio"] == pytest.approx(1.25)
    assert res.values["task/a_x/perf_maintenance_mrlep"] == pytest.approx(-1.0)
    assert "perf_recovery" in res.na and "task/b_y/recovery_time" in res.na
    s = res.series["reward"]
    assert s.steps.tolist() == list(range(len(s.steps))) and s.values[:2].tolist() == [2.0, 2.0]
    assert {sp.name for sp in SPECS} == set(LIFETIME_NAMES)
    assert all(sp.protocol == "lifelong_rl" for sp in SPECS)
    # the log written and read back gives the numbers of the in-memory log
    direct = evaluate_log(make_log(HAND), normalization="none")["lifetime"]
    from_dir = evaluate_log(out, normalization="none")["lifetime"]
    for k, v in direct.items():
        assert (isinstance(v, NA) and isinstance(from_dir[k], NA)) or from_dir[k] == pytest.approx(v)


def test_bad_options_are_clear_errors():
    log = make_log(HAND)
    with pytest.raises(MetricInputError, match="normalization"):
        evaluate_log(log, normalization="zscore")
    with pytest.raises(MetricInputError, match="perf_measure"):
        evaluate_log(log, perf_measure="score")


def test_metrics_read_no_files(tmp_path):
    """A log directory is read by owl_eval.formats.l2logger, never by the metrics: a path is refused."""
    out = write_log(make_log(HAND), tmp_path, "hand")
    with pytest.raises(
        MetricInputError,
        match=r"^log: expected an EpisodeLog \(read a log directory with "
        r"owl_eval.formats.l2logger.read_log first\), got PosixPath",
    ):
        evaluate_log(out)
