"""l2logger log directories (and STE logs), written by hand here in the l2logger 1.1 layout, read and scored."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.evaluate import evaluate
from runner.sources import SourceFormatError
from runner.sources.l2logger import L2LoggerSource

HEADER = "block_num\texp_num\tworker_id\tblock_type\tblock_subtype\ttask_name\ttask_params\texp_status\ttimestamp\treward"
PARAMS = '"{""speed"": 1}"'  # task_params: JSON, quoted as l2logger's csv writer does


def rows(block, first_exp, block_type, task, rewards, status="complete"):
    return [f"{block}\t{first_exp + i}\tworker-default\t{block_type}\twake\t{task}\t{PARAMS}\t{status}\t"
            f"20240101T000000.{first_exp + i:06d}\t{r}" for i, r in enumerate(rewards)]


# (block, type, task, rewards): train A, eval A, eval B, train B, eval A, eval B.
BLOCKS = [(0, "train", "Task_A", [1, 2, 3, 4]), (1, "test", "task_a", [4, 4]), (2, "test", "task_b", [1, 1]),
          (3, "train", "task_b", [2, 4, 6, 8]), (4, "test", "task_a", [3, 3]), (5, "test", "task_b", [7, 7])]


def write_log(base: Path, blocks=BLOCKS, name="scen-1700000000.0", header=HEADER, edit=None) -> Path:
    """One data-log.tsv per block under <base>/<name>/worker-default/<block>-<type>/; ``edit(block, lines)``
    may change a block's lines."""
    root = base / name
    (root).mkdir(parents=True)
    (root / "logger_info.json").write_text(json.dumps({"metrics_columns": ["reward"], "log_format_version": "1.1"}))
    (root / "scenario_info.json").write_text(json.dumps({"scenario_type": "custom", "complexity": "1-low"}))
    exp = 0
    for block, btype, task, rewards in blocks:
        lines = rows(block, exp, btype, task, rewards)
        exp += len(rewards)
        if edit is not None:
            lines = edit(block, lines)
        folder = root / "worker-default" / f"{block}-{btype}"
        folder.mkdir(parents=True)
        (folder / "data-log.tsv").write_text("\n".join([header, *lines]) + "\n")
    return root


def write_ste(base: Path, task="task_a", rewards=(2, 4, 6, 8), name=None) -> Path:
    return write_log(base, [(0, "train", task, list(rewards)), (1, "test", task, [8, 8])], name=name or f"ste_{task}-1.0")


PLAIN = {"smoothing": "none", "normalization": "none"}


def test_hand_computed_metrics_with_ste(tmp_path):
    log = write_log(tmp_path / "logs")
    ste = write_ste(tmp_path / "ste")
    data = L2LoggerSource(path=str(tmp_path / "logs"), ste_paths=[str(ste)]).load()
    assert len(data.record.log) == 16 and list(data.record.ste_logs) == ["task_a"]
    assert data.record.log_dir == log
    r = data.protocol.evaluate(data.record, PLAIN)
    # task a (names lower-cased on read): train 1,2,3,4 -> average 2.5, saturation (max) 4; evaluations 4, 3 -> 3.5
    assert r["task/task_a/avg_train_perf"] == pytest.approx(2.5)
    assert r["task/task_a/avg_eval_perf"] == pytest.approx(3.5)
    assert r["task/task_a/saturation"] == pytest.approx(4.0)
    # task b: train 2,4,6,8 -> 5, saturation 8; evaluations 1, 7 -> 4
    assert r["task/task_b/avg_eval_perf"] == pytest.approx(4.0)
    # lifetime = mean over tasks: (2.5 + 5) / 2, (3.5 + 4) / 2, (4 + 8) / 2
    assert r["avg_train_perf"] == pytest.approx(3.75) and r["avg_eval_perf"] == pytest.approx(3.75)
    assert r["saturation"] == pytest.approx(6.0)
    # STE relative performance of task a: sum 1+2+3+4 over the STE's 2+4+6+8 on equal prefixes = 10 / 20
    assert r["task/task_a/ste_rel_perf"] == pytest.approx(0.5)
    assert "no STE log for task task_b" in r.na["task/task_b/ste_rel_perf"]
    assert r["episodes"] == 16


def test_ste_folder_of_logs_and_incomplete_or_nan_rows_dropped(tmp_path):
    def edit(block, lines):
        if block == 0:  # an incomplete episode and one without a reward: l2metrics drops both
            return lines + [lines[-1].replace("complete", "incomplete").replace("\t3\t", "\t30\t", 1),
                            lines[-1].rsplit("\t", 1)[0] + "\tNaN"]
        return lines

    write_log(tmp_path / "logs", blocks=BLOCKS[:1], edit=edit)
    write_ste(tmp_path / "ste", "task_a")
    write_ste(tmp_path / "ste", "task_a", rewards=(4, 4, 4, 4), name="ste_task_a-2.0")
    data = L2LoggerSource(path=str(tmp_path / "logs"), ste_paths=[str(tmp_path / "ste")]).load()
    assert len(data.record.log) == 4 and sorted(data.record.ste_logs) == ["task_a", "task_a-1"]


@pytest.mark.parametrize("kw, words", [
    (dict(header=HEADER.replace("\ttask_name", "")), ["data-log.tsv line 1", "missing column(s) ['task_name']"]),
    (dict(edit=lambda b, l: [l[0], l[1] + "\textra", *l[2:]] if b == 3 else l),
     ["3-train", "data-log.tsv line 3", "expected 10 tab-separated fields, got 11"]),
    (dict(edit=lambda b, l: [l[0].replace("\t2\n", "\t2"), l[1].rsplit("\t", 1)[0] + "\tlots"] if b == 3 else l),
     ["3-train", "line 3, column reward", "expected a number, got 'lots'"]),
    (dict(edit=lambda b, l: [x.replace("\ttest\t", "\tevaluation\t") for x in l] if b == 5 else l),
     ["5-test", "line 2, column block_type", "'evaluation'"]),
    (dict(edit=lambda b, l: [x.replace("5\t14", "x\t14") for x in l] if b == 5 else l),
     ["5-test", "line 2, column block_num", "'x'"]),
])
def test_broken_logs_give_one_clear_error(tmp_path, kw, words):
    write_log(tmp_path / "logs", **kw)
    with pytest.raises(SourceFormatError) as info:
        L2LoggerSource(path=str(tmp_path / "logs")).load()
    for w in words:
        assert w in str(info.value)


def test_ste_logs_that_do_not_match(tmp_path):
    write_log(tmp_path / "logs")
    other = write_ste(tmp_path / "ste1", "task_c")
    with pytest.raises(SourceFormatError, match=r"STE log of task 'task_c', which .* does not have"):
        L2LoggerSource(path=str(tmp_path / "logs"), ste_paths=[str(other)]).load()
    two = write_log(tmp_path / "ste2", [(0, "train", "task_a", [1, 2]), (1, "train", "task_b", [1, 2])], name="ste-1.0")
    with pytest.raises(SourceFormatError, match=r"must train exactly one task, it trains \['task_a', 'task_b'\]"):
        L2LoggerSource(path=str(tmp_path / "logs"), ste_paths=[str(two)]).load()
    with pytest.raises(SourceFormatError, match="STE log directory not found"):
        L2LoggerSource(path=str(tmp_path / "logs"), ste_paths=[str(tmp_path / "nope")]).load()
    # variant-agnostic mode compares the part before the first "_": task_c's base "task" is the log's task "task"
    source = L2LoggerSource(path=str(tmp_path / "logs"), ste_paths=[str(other)], variant_mode="agnostic")
    assert list(source.load().record.ste_logs) == ["task_c"]


def test_missing_or_ambiguous_log_directory(tmp_path):
    with pytest.raises(SourceFormatError, match="log directory not found"):
        L2LoggerSource(path=str(tmp_path / "none")).load()
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceFormatError, match="no data-log.tsv found"):
        L2LoggerSource(path=str(tmp_path / "empty")).load()
    write_log(tmp_path / "two", name="a-1.0")
    write_log(tmp_path / "two", name="b-2.0")
    with pytest.raises(SourceFormatError, match="holds 2 l2logger logs"):
        L2LoggerSource(path=str(tmp_path / "two")).load()


def test_evaluate_cli_logs_like_a_live_run(tmp_path, experiment, client):
    log = write_log(tmp_path / "logs")
    ste = write_ste(tmp_path / "ste")
    values = evaluate(["+source=l2logger", f"source.path={log}", f"source.ste_paths=[{ste}]", "metrics.smoothing=none",
                       "metrics.normalization=none", *experiment["overrides"]], output_dir=tmp_path / "out")
    assert values["avg_eval_perf"] == pytest.approx(3.75)
    exp = client.get_experiment_by_name(experiment["name"])
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.status == "FINISHED" and run.data.tags["source"] == "l2logger"
    assert run.data.tags["ste_logs"] == "task_a"
    assert run.data.metrics["task/task_a/ste_rel_perf"] == pytest.approx(0.5)
    assert run.data.params["metrics.smoothing"] == "none"
    assert "plots/learning_curve.png" in {a.path for a in client.list_artifacts(run.info.run_id, "plots")}


def test_broken_source_creates_no_run(tmp_path, experiment, client):
    log = write_log(tmp_path / "logs")
    with pytest.raises(SourceFormatError):
        evaluate(["+source=l2logger", f"source.path={log}", f"source.ste_paths=[{tmp_path / 'missing'}]",
                  *experiment["overrides"]], output_dir=tmp_path / "out")
    exp = client.get_experiment_by_name(experiment["name"])
    assert exp is None or not client.search_runs([exp.experiment_id])
