"""l2logger layout: reading hand-written logs, exact round trips, the incremental writer, clear errors."""

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

from owl_eval.formats.l2logger import STANDARD_COLUMNS, EpisodeLog, L2LogError, L2Logger, read_log, write_log

HEADER = (
    "block_num\texp_num\tworker_id\tblock_type\tblock_subtype\ttask_name\ttask_params\texp_status\ttimestamp\treward\n"
)


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
    _write(
        root / "worker-default" / "10-test" / "data-log.tsv",
        HEADER
        + '10\t5\tworker-default\ttest\twake\t"Task_B"\t"{""speed"": 2,\t""name"": ""x\\ty""}"\tcomplete\t20210101T000005.000000\t7.5\n',
    )
    _write(
        root / "worker-default" / "2-train" / "data-log.tsv",
        HEADER + '2\t1\tworker-default\ttrain\twake\tTASK_A\t"{""speed"": 1}"\tcomplete\t20210101T000001.000000\t1.5\n'
        '2\t2\tworker-default\ttrain\twake\tTASK_A\t"{""speed"": 1}"\tincomplete\t20210101T000002.000000\t2.5\n'
        '2\t3\tworker-default\ttrain\twake\tTASK_A\t"{""speed"": 1}"\tcomplete\t20210101T000003.000000\tnan\n'
        '2\t4\tworker-default\ttrain\twake\tTASK_A\t"{""speed"": 1}"\tcomplete\t20210101T000004.000000\t-3e-2\n',
    )
    log = read_log(root)
    # incomplete row (exp 2) and NaN reward row (exp 3) are dropped, as l2metrics does
    assert log["exp_num"].tolist() == [1, 4, 5]
    assert log["block_num"].tolist() == [2, 2, 10]
    # lower-cased (quotes removed); a quoted field may hold a tab (the csv-module path reads it)
    assert log["task_name"].tolist() == ["task_a", "task_a", "task_b"]
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
    _write(
        root / "w" / "0-train" / "data-log.tsv",
        "block_num\texp_num\tworker_id\tblock_type\ttask_name\ttask_params\texp_status\ttimestamp\treward\n"
        "0\t0\tw\ttrain\ta_b\t{}\tcomplete\t20210101T000000.000000\t1\n",
    )
    log = read_log(root)
    assert log["block_subtype"].tolist() == ["wake"]
    assert log["task_params"].tolist() == ["{}"]


def _sample_log(n=300, seed=0) -> EpisodeLog:
    rng = np.random.default_rng(seed)
    block = np.repeat(np.arange(6), n // 6)
    btype = np.where(block % 2 == 0, "train", "test").astype(object)
    task = np.where(block % 4 < 2, "reach_easy", "push_hard").astype(object)
    params = np.array(
        [json.dumps({"goal": [1, 2], "label": 'quote " tab\t'}) if t == "push_hard" else "{}" for t in task],
        dtype=object,
    )
    reward = rng.normal(size=len(block)) * 10.0 ** rng.integers(-300, 300, len(block))
    reward[5] = 0.1
    steps = rng.integers(1, 500, len(block)).astype(float)
    ts = np.array([f"20240102T0304{i // 100:02d}.{i:06d}" for i in range(len(block))], dtype=object)
    return EpisodeLog.from_columns(
        block_num=block,
        block_type=btype,
        task_name=task,
        task_params=params,
        timestamp=ts,
        reward=reward,
        episode_step_count=steps,
        metrics_columns=["reward"],
    )


def test_round_trip_is_exact_and_layout_is_l2logger(tmp_path):
    log = _sample_log()
    out = write_log(log, tmp_path, "my_scenario.yaml", {"difficulty": "2-medium"}, stamp=1234.5)
    assert out == tmp_path / "my_scenario-1234-5"
    assert json.loads((out / "logger_info.json").read_text()) == {
        "metrics_columns": ["reward"],
        "log_format_version": "1.1",
    }
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
    lg.log_episode(
        block_num=0,
        exp_num=0,
        block_type="train",
        task_name="a_b",
        task_params={"k": 1},
        reward=0.5,
        timestamp="20240101T000000.000000",
    )
    # before close (a crash now) the row is on disk
    first = read_log(lg.scenario_dir)
    assert first["reward"].tolist() == [0.5] and json.loads(first["task_params"][0]) == {"k": 1}
    lg.log_episode(
        block_num=1, exp_num=1, block_type="test", task_name="a_b", reward=0.25, timestamp="20240101T000001.000000"
    )
    lg.log_episode(
        block_num=1,
        exp_num=2,
        block_type="test",
        task_name="a_b",
        reward=float("nan"),
        timestamp="20240101T000002.000000",
    )
    log = read_log(lg.scenario_dir, raw=True)
    assert log["exp_num"].tolist() == [0, 1, 2] and log["block_type"].tolist() == ["train", "test", "test"]
    assert (lg.scenario_dir / "worker-default" / "1-test" / "data-log.tsv").exists()
    with pytest.raises(L2LogError, match="exp_num must increase: got 2 after 2"):  # logged twice
        lg.log_episode(block_num=1, exp_num=2, block_type="test", task_name="a_b", reward=1.0)
    with pytest.raises(L2LogError, match="exp_num must increase"):
        lg.log_episode(block_num=1, exp_num=1, block_type="test", task_name="a_b", reward=1.0)
    with pytest.raises(L2LogError, match="block_type"):
        lg.log_episode(block_num=1, exp_num=3, block_type="eval", task_name="a_b", reward=1.0)
    lg.close()


def test_missing_column_names_file_and_column(tmp_path):
    root = _scenario(tmp_path)
    path = root / "w" / "0-train" / "data-log.tsv"
    _write(
        path,
        "block_num\texp_num\tworker_id\tblock_type\ttask_name\ttask_params\ttimestamp\treward\n"
        "0\t0\tw\ttrain\ta_b\t{}\t20210101T000000.000000\t1\n",
    )
    with pytest.raises(L2LogError) as err:
        read_log(root)
    assert str(path) in str(err.value) and "line 1" in str(err.value) and "exp_status" in str(err.value)


def test_malformed_row_names_file_and_line(tmp_path):
    root = _scenario(tmp_path)
    path = root / "w" / "0-train" / "data-log.tsv"
    _write(
        path,
        HEADER + "0\t0\tw\ttrain\twake\ta_b\t{}\tcomplete\t20210101T000000.000000\t1\n"
        "0\t1\tw\ttrain\twake\ta_b\t{}\tcomplete\t1\n",
    )
    with pytest.raises(L2LogError) as err:
        read_log(root)
    assert f"{path} line 3" in str(err.value) and "expected 10" in str(err.value)


@pytest.mark.parametrize(
    "field,bad,column",
    [
        (1, "x7", "exp_num"),
        (3, "eval", "block_type"),
        (7, "done", "exp_status"),
        (9, "abc", "reward"),
        (6, "{not json", "task_params"),
        (0, "-1", "block_num"),
    ],
)
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


# ------------------------------------------------------------------ hostile or broken input (issue 11)

GOOD = ["0", "0", "w", "train", "wake", "a_b", "{}", "complete", "20210101T000000.000000", "1"]


def _two_rows(tmp_path, field=None, bad=None, header=HEADER) -> Path:
    """A scenario whose one data file holds a good row (line 2) and a second row (line 3, exp_num 1) with
    ``field`` set to ``bad``; returns the data file."""
    root = _scenario(tmp_path)
    path = root / "w" / "0-train" / "data-log.tsv"
    second = list(GOOD)
    second[1] = "1"
    if field is not None:
        second[field] = bad
    _write(path, header + "\t".join(GOOD) + "\n" + "\t".join(second) + "\n")
    return path


@pytest.mark.parametrize("bad", ["inf", "-inf", "1e400", "-1E999", "Infinity"])
def test_infinite_reward_names_file_line_and_column(tmp_path, bad):
    path = _two_rows(tmp_path, 9, bad)
    with pytest.raises(L2LogError) as err:
        read_log(path.parents[2])
    assert f"{path} line 3, column reward" in str(err.value) and repr(bad) in str(err.value)


@pytest.mark.parametrize(
    "field,bad,column",
    [(1, "10000000000000000000", "exp_num"), (0, "10000000000000000000", "block_num"), (1, "9" * 5000, "exp_num")],
)
def test_integers_beyond_int64_name_file_line_and_column(tmp_path, field, bad, column):
    path = _two_rows(tmp_path, field, bad)
    with pytest.raises(L2LogError) as err:
        read_log(path.parents[2])
    assert f"{path} line 3, column {column}" in str(err.value) and "2**63" in str(err.value)


def test_duplicated_exp_num_names_both_rows(tmp_path):
    root = _scenario(tmp_path)
    first, second = root / "w" / "0-train" / "data-log.tsv", root / "w" / "1-test" / "data-log.tsv"
    _write(first, HEADER + "\t".join(GOOD) + "\n")
    _write(second, HEADER + "\t".join(["1", "0", *GOOD[2:3], "test", *GOOD[4:]]) + "\n")
    with pytest.raises(L2LogError) as err:
        read_log(root, raw=True)
    assert f"{second} line 2, column exp_num" in str(err.value) and f"also {first} line 2" in str(err.value)


def test_rows_with_a_missing_and_an_extra_field_do_not_balance_out(tmp_path):
    """Eleven fields on one row and nine on the next add up to two rows of ten: still an error."""
    root = _scenario(tmp_path)
    path = root / "w" / "0-train" / "data-log.tsv"
    _write(path, HEADER + "\t".join(GOOD + ["7"]) + "\n" + "\t".join(["0", "1", *GOOD[2:9]]) + "\n")
    with pytest.raises(L2LogError) as err:
        read_log(root)
    assert f"{path} line 2: expected 10 tab-separated fields, got 11" in str(err.value)


@pytest.mark.parametrize(
    "field,bad,what",
    [(5, "task_/../../../x", "task name"), (5, "a b", "task name"), (2, "..", "worker id"), (2, "w/x", "worker id")],
)
def test_unsafe_task_and_worker_names_name_file_line_and_column(tmp_path, field, bad, what):
    from owl_eval.errors import UnsafePathError

    path = _two_rows(tmp_path, field, bad)
    with pytest.raises(UnsafePathError) as err:
        read_log(path.parents[2])
    column = STANDARD_COLUMNS[field]
    assert f"{path} line 3, column {column}: {what} {bad!r} is not a safe name" in str(err.value)


def test_unsafe_folder_name_is_refused(tmp_path):
    from owl_eval.errors import UnsafePathError

    path = _two_rows(tmp_path)
    path.parents[1].rename(path.parents[2] / "-w")
    with pytest.raises(UnsafePathError, match="folder name '-w' is not a safe name"):
        read_log(path.parents[2])


def test_links_are_never_followed(tmp_path):
    from owl_eval.errors import UnsafePathError

    path = _two_rows(tmp_path)
    root = path.parents[2]
    loop = path.parent / "loop"
    os.symlink(".", loop)
    with pytest.raises(UnsafePathError, match=f"{loop}: .* is a symbolic link"):
        read_log(root)
    loop.unlink()
    outside = tmp_path / "elsewhere.tsv"
    outside.write_text(path.read_text())
    path.unlink()
    os.symlink(outside, path)  # the data file itself is a link to a file outside the log
    with pytest.raises(UnsafePathError, match="is a symbolic link"):
        read_log(root)


def test_a_directory_named_like_the_data_file_is_an_error(tmp_path):
    path = _two_rows(tmp_path)
    (path.parents[1] / "1-test" / "data-log.tsv").mkdir(parents=True)
    with pytest.raises(L2LogError, match=r"1-test/data-log.tsv: is a directory"):
        read_log(path.parents[2])


def test_non_utf8_data_file_names_file_and_line(tmp_path):
    path = _two_rows(tmp_path)
    path.write_bytes(path.read_bytes().replace(b"a_b", b"a_\xff", 2))
    with pytest.raises(ValueError) as err:
        read_log(path.parents[2])
    assert f"{path}, line 2: not UTF-8" in str(err.value)


@pytest.mark.parametrize(
    "name,text,words",
    [
        ("logger_info.json", '["reward"]', ["expected a JSON object", "got a JSON list"]),
        ("logger_info.json", '{"metrics_columns": "reward"}', ["metrics_columns: expected a list of column names"]),
        ("logger_info.json", '{"metrics_columns": ["reward", "score"]}', ["line 1: missing column(s) ['score']"]),
        ("scenario_info.json", '{\n"a": 1,\n"b": }', ["line 3, column 6: not valid JSON"]),
        ("scenario_info.json", "[" * 50_000 + "]" * 50_000, ["nested too deeply"]),
        ("scenario_info.json", '{"n": ' + "9" * 5000 + "}", ["not valid JSON", "4300"]),
    ],
)
def test_broken_info_files_name_the_file(tmp_path, name, text, words):
    path = _two_rows(tmp_path)
    (path.parents[2] / name).write_text(text)
    with pytest.raises(L2LogError) as err:
        read_log(path.parents[2])
    assert name in str(err.value) and all(w in str(err.value) for w in words), str(err.value)


@pytest.mark.parametrize(
    "bad,words",
    [("[" * 50_000 + "]" * 50_000, "nested too deeply"), ('{"n": ' + "9" * 5000 + "}", "must be valid JSON")],
)
def test_task_params_that_break_the_json_parser_name_file_line_and_column(tmp_path, bad, words):
    path = _two_rows(tmp_path, 6, '"' + bad.replace('"', '""') + '"')
    with pytest.raises(L2LogError) as err:
        read_log(path.parents[2])
    assert f"{path} line 3, column task_params" in str(err.value) and words in str(err.value)


def test_non_numeric_performance_column_without_logger_info(tmp_path):
    path = _two_rows(tmp_path, 9, "lots")
    (path.parents[2] / "logger_info.json").unlink()
    with pytest.raises(L2LogError, match=f"{path} line 3, column reward: expected a number, got 'lots'"):
        read_log(path.parents[2])


def test_the_log_remembers_exactly_the_files_it_parsed(tmp_path):
    path = _two_rows(tmp_path)
    root = path.parents[2]
    _write(root / "notes.txt", "not part of the log")
    _write(root / "w" / "0-train" / "extra.tsv", HEADER)
    log = read_log(root)
    expected = {root / "logger_info.json", root / "scenario_info.json", path}
    assert set(log.files) == {p.resolve() for p in expected} and log.source == str(root.resolve())
    assert set(log.take(np.array([True, False])).files) == set(log.files)


def test_writers_refuse_what_the_reader_would_refuse(tmp_path):
    from owl_eval.errors import UnsafePathError

    with pytest.raises(L2LogError, match=r"column reward, row 1 \(exp_num 1\): inf is not a finite number"):
        write_log(
            EpisodeLog.from_columns(block_num=[0, 0], block_type="train", task_name="a_b", reward=[1.0, np.inf]),
            tmp_path,
            "s",
        )
    with pytest.raises(UnsafePathError, match="worker id '..'"):
        write_log(
            EpisodeLog.from_columns(block_num=[0], block_type="train", task_name="a_b", worker_id="..", reward=[1.0]),
            tmp_path,
            "s",
        )
    with pytest.raises(UnsafePathError, match="scenario folder name"):
        write_log(_sample_log(12), tmp_path, "my scenario")
    lg = L2Logger(tmp_path, "inc", ["reward"], stamp=2.0)
    for kw, words in (
        (dict(worker_id="../x"), "worker id '../x'"),
        (dict(task_name="a/b"), "task name 'a/b'"),
        (dict(reward=-math.inf), "reward is -inf, not a finite number"),
    ):
        with pytest.raises(ValueError, match=words.replace("(", r"\(")):
            lg.log_episode(
                **({"block_num": 0, "exp_num": 0, "block_type": "train", "task_name": "a_b", "reward": 1.0} | kw)
            )
    lg.close()
    assert not (tmp_path / "x").exists() and not list(lg.scenario_dir.rglob("data-log.tsv"))
