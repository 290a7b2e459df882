"""l2logger layout: reading hand-written logs, exact round trips, the incremental writer, clear errors."""
import json
import math
from pathlib import Path

import numpy as np
import pytest

from metrics.l2_log import STANDARD_COLUMNS, EpisodeLog, L2Logger, L2LogError, read_log, write_log

HEADER = "block_num\texp_num\tworker_id\tblock_type\tblock_subtype\ttask_name\ttask_params\texp_status\ttimestamp\treward\n"


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _scenario(tmp_path) -> Path:
    root = tmp_path / "scn-1"
    _write(root / "logger_info.json", json.dumps({"metrics_columns": ["reward"], "log_format_version": "1.1"}))
    _write(root / "scenario_info.json", json.dumps({"scenario_type": "custom"}))
    return root


def test_reads_hand_written_directory(tmp_path):
    root = _scenario(tmp_path)
    # block 10 sorts before block 2 as text: rows must still come back in exp_num order
    _write(root / "worker-default" / "10-test" / "data-log.tsv", HEADER +
           '10\t5\tworker-default\ttest\twake\t"Task\tB"\t"{""speed"": 2, ""name"": ""x\\ty""}"\tcomplete\t20210101T000005.000000\t7.5\n')
    _write(root / "worker-default" / "2-train" / "data-log.tsv", HEADER +
           '2\t1\tworker-default\ttrain\twake\tTASK_A\t"{""speed"": 1}"\tcomplete\t20210101T000001.000000\t1.5\n'
           '2\t2\tworker-default\ttrain\twake\tTASK_A\t"{""speed"": 1}"\tincomplete\t20210101T000002.000000\t2.5\n'
           '2\t3\tworker-default\ttrain\twake\tTASK_A\t"{""speed"": 1}"\tcomplete\t20210101T000003.000000\tnan\n'
           '2\t4\tworker-default\ttrain\twake\tTASK_A\t"{""speed"": 1}"\tcomplete\t20210101T000004.000000\t-3e-2\n')
    log = read_log(root)
    # incomplete row (exp 2) and NaN reward row (exp 3) are dropped, as l2metrics does
    assert log["exp_num"].tolist() == [1, 4, 5]
    assert log["block_num"].tolist() == [2, 2, 10]
    # lower-cased; a quoted field may hold a tab (the csv-module path reads it)
    assert log["task_name"].tolist() == ["task_a", "task_a", "task\tb"]
    assert log["reward"].tolist() == [1.5, -0.03, 7.5]
    # quoted JSON with doubled quotes is decoded
    assert json.loads(log["task_params"][2]) == {"speed": 2, "name": "x\ty"}
    assert log.metrics_columns == ("reward",)
    assert log.scenario_info == {"scenario_type": "custom"}
    raw = read_log(root, raw=True)
    assert raw["exp_num"].tolist() == [1, 2, 3, 4, 5]
    assert math.isnan(raw["reward"][2]) and raw["exp_status"][1] == "incomplete"


def test_missing_block_subtype_defaults_to_wake(tmp_path):
    root = _scenario(tmp_path)
    _write(root / "w" / "0-train" / "data-log.tsv",
           "block_num\texp_num\tworker_id\tblock_type\ttask_name\ttask_params\texp_status\ttimestamp\treward\n"
           "0\t0\tw\ttrain\ta_b\t{}\tcomplete\t20210101T000000.000000\t1\n")
    log = read_log(root)
    assert log["block_subtype"].tolist() == ["wake"]
    assert log["task_params"].tolist() == ["{}"]


def _sample_log(n=300, seed=0) -> EpisodeLog:
    rng = np.random.default_rng(seed)
    block = np.repeat(np.arange(6), n // 6)
    btype = np.where(block % 2 == 0, "train", "test").astype(object)
    task = np.where(block % 4 < 2, "reach_easy", "push_hard").astype(object)
    params = np.array([json.dumps({"goal": [1, 2], "label": 'quote " tab\t'}) if t == "push_hard" else "{}"
                       for t in task], dtype=object)
    reward = rng.normal(size=len(block)) * 10.0 ** rng.integers(-300, 300, len(block))
    reward[5] = 0.1
    steps = rng.integers(1, 500, len(block)).astype(float)
    ts = np.array([f"20240102T0304{i // 100:02d}.{i:06d}" for i in range(len(block))], dtype=object)
    return EpisodeLog.from_columns(block_num=block, block_type=btype, task_name=task, task_params=params,
                                   timestamp=ts, reward=reward, episode_step_count=steps, metrics_columns=["reward"])


def test_round_trip_is_exact_and_layout_is_l2logger(tmp_path):
    log = _sample_log()
    out = write_log(log, tmp_path, "my_scenario.yaml", {"difficulty": "2-medium"}, stamp=1234.5)
    assert out == tmp_path / "my_scenario-1234-5"
    assert json.loads((out / "logger_info.json").read_text()) == {"metrics_columns": ["reward"], "log_format_version": "1.1"}
    assert json.loads((out / "scenario_info.json").read_text()) == {"difficulty": "2-medium"}
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("data-log.tsv"))
    assert files == [f"worker-default/{b}-{'train' if b % 2 == 0 else 'test'}/data-log.tsv" for b in range(6)]
    header = (out / "worker-default" / "0-train" / "data-log.tsv").read_text().split("\n")[0].split("\t")
    assert header == list(STANDARD_COLUMNS) + ["episode_step_count", "reward"]
    back = read_log(out, raw=True)
    assert set(back.columns) == set(log.columns)
    for name, values in log.columns.items():
        assert back[name].dtype == values.dtype, name
        assert np.array_equal(back[name], values), name
    assert back.metrics_columns == ("reward",)


def test_incremental_logger_flushes_every_episode(tmp_path):
    lg = L2Logger(tmp_path, "inc", ["reward"], {"scenario_type": "custom"}, stamp=1.0)
    lg.log_episode(block_num=0, exp_num=0, block_type="train", task_name="a_b", task_params={"k": 1}, reward=0.5,
                   timestamp="20240101T000000.000000")
    # before close (a crash now) the row is on disk
    first = read_log(lg.scenario_dir)
    assert first["reward"].tolist() == [0.5] and json.loads(first["task_params"][0]) == {"k": 1}
    lg.log_episode(block_num=1, exp_num=1, block_type="test", task_name="a_b", reward=0.25,
                   timestamp="20240101T000001.000000")
    lg.log_episode(block_num=1, exp_num=2, block_type="test", task_name="a_b", reward=float("nan"),
                   timestamp="20240101T000002.000000")
    log = read_log(lg.scenario_dir, raw=True)
    assert log["exp_num"].tolist() == [0, 1, 2] and log["block_type"].tolist() == ["train", "test", "test"]
    assert (lg.scenario_dir / "worker-default" / "1-test" / "data-log.tsv").exists()
    with pytest.raises(L2LogError, match="exp_num must be non-decreasing"):
        lg.log_episode(block_num=1, exp_num=1, block_type="test", task_name="a_b", reward=1.0)
    with pytest.raises(L2LogError, match="block_type"):
        lg.log_episode(block_num=1, exp_num=3, block_type="eval", task_name="a_b", reward=1.0)
    lg.close()


def test_missing_column_names_file_and_column(tmp_path):
    root = _scenario(tmp_path)
    path = root / "w" / "0-train" / "data-log.tsv"
    _write(path, "block_num\texp_num\tworker_id\tblock_type\ttask_name\ttask_params\ttimestamp\treward\n"
                 "0\t0\tw\ttrain\ta_b\t{}\t20210101T000000.000000\t1\n")
    with pytest.raises(L2LogError) as err:
        read_log(root)
    assert str(path) in str(err.value) and "line 1" in str(err.value) and "exp_status" in str(err.value)


def test_malformed_row_names_file_and_line(tmp_path):
    root = _scenario(tmp_path)
    path = root / "w" / "0-train" / "data-log.tsv"
    _write(path, HEADER + "0\t0\tw\ttrain\twake\ta_b\t{}\tcomplete\t20210101T000000.000000\t1\n"
                          "0\t1\tw\ttrain\twake\ta_b\t{}\tcomplete\t1\n")
    with pytest.raises(L2LogError) as err:
        read_log(root)
    assert f"{path} line 3" in str(err.value) and "expected 10" in str(err.value)


@pytest.mark.parametrize("field,bad,column", [(1, "x7", "exp_num"), (3, "eval", "block_type"),
                                              (7, "done", "exp_status"), (9, "abc", "reward"),
                                              (6, "{not json", "task_params"), (0, "-1", "block_num")])
def test_bad_values_name_file_line_and_column(tmp_path, field, bad, column):
    root = _scenario(tmp_path)
    path = root / "w" / "0-train" / "data-log.tsv"
    good = ["0", "0", "w", "train", "wake", "a_b", "{}", "complete", "20210101T000000.000000", "1"]
    row = list(good)
    row[field] = bad
    row[1] = "1" if field != 1 else bad
    _write(path, HEADER + "\t".join(good) + "\n" + "\t".join(row) + "\n")
    with pytest.raises(L2LogError) as err:
        read_log(root)
    msg = str(err.value)
    assert str(path) in msg and "line 3" in msg and column in msg


def test_no_logs_and_missing_perf_column(tmp_path):
    with pytest.raises(L2LogError, match="no data-log.tsv"):
        read_log(tmp_path)
    out = write_log(_sample_log(12), tmp_path, "s")
    with pytest.raises(L2LogError, match="performance column 'score'"):
        read_log(out, perf_measure="score")
