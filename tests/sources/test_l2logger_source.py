"""l2logger log directories (and STE logs), written by hand here in the l2logger 1.1 layout, read and scored."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from owl_eval.evaluation import evaluation_for
from owl_eval.protocols.lifelong_rl.record import RLRecord
from owl_eval.protocols.lifelong_rl.sources.l2logger import L2LoggerSource
from owl_eval.runner.api import evaluate
from owl_eval.sources import SourceFormatError

HEADER = (
    "block_num\texp_num\tworker_id\tblock_type\tblock_subtype\ttask_name\ttask_params\texp_status\ttimestamp\treward"
)
PARAMS = '"{""speed"": 1}"'  # task_params: JSON, quoted as l2logger's csv writer does


def rows(block, first_exp, block_type, task, rewards, status="complete"):
    return [
        f"{block}\t{first_exp + i}\tworker-default\t{block_type}\twake\t{task}\t{PARAMS}\t{status}\t"
        f"20240101T000000.{first_exp + i:06d}\t{r}"
        for i, r in enumerate(rewards)
    ]


# (block, type, task, rewards): train A, eval A, eval B, train B, eval A, eval B.
BLOCKS = [
    (0, "train", "Task_A", [1, 2, 3, 4]),
    (1, "test", "task_a", [4, 4]),
    (2, "test", "task_b", [1, 1]),
    (3, "train", "task_b", [2, 4, 6, 8]),
    (4, "test", "task_a", [3, 3]),
    (5, "test", "task_b", [7, 7]),
]


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
    return write_log(
        base, [(0, "train", task, list(rewards)), (1, "test", task, [8, 8])], name=name or f"ste_{task}-1.0"
    )


PLAIN = {"smoothing": "none", "normalization": "none"}


def test_hand_computed_metrics_with_ste(tmp_path):
    log = write_log(tmp_path / "logs")
    ste = write_ste(tmp_path / "ste")
    data = L2LoggerSource(path=str(tmp_path / "logs"), ste_paths=[str(ste)]).load()
    assert len(data.record.log) == 16 and list(data.record.ste_logs) == ["task_a"]
    assert data.record.log_dir == log
    r = evaluation_for(data.protocol).evaluate(data.record, PLAIN)
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
        if block == 0:  # an incomplete episode and one without a reward (exp_num 4, 5): l2metrics drops both
            return lines + [
                lines[-1].replace("complete", "incomplete").replace("\t3\t", "\t4\t", 1),
                lines[-1].replace("\t3\t", "\t5\t", 1).rsplit("\t", 1)[0] + "\tNaN",
            ]
        return lines

    write_log(tmp_path / "logs", blocks=BLOCKS[:1], edit=edit)
    write_ste(tmp_path / "ste", "task_a")
    write_ste(tmp_path / "ste", "task_a", rewards=(4, 4, 4, 4), name="ste_task_a-2.0")
    data = L2LoggerSource(path=str(tmp_path / "logs"), ste_paths=[str(tmp_path / "ste")]).load()
    assert len(data.record.log) == 4 and sorted(data.record.ste_logs) == ["task_a", "task_a-1"]


@pytest.mark.parametrize(
    "kw, words",
    [
        (dict(header=HEADER.replace("\ttask_name", "")), ["data-log.tsv line 1", "missing column(s) ['task_name']"]),
        (
            dict(edit=lambda b, l: [l[0], l[1] + "\textra", *l[2:]] if b == 3 else l),
            ["3-train", "data-log.tsv line 3", "expected 10 tab-separated fields, got 11"],
        ),
        (
            dict(edit=lambda b, l: [l[0].replace("\t2\n", "\t2"), l[1].rsplit("\t", 1)[0] + "\tlots"] if b == 3 else l),
            ["3-train", "line 3, column reward", "expected a number, got 'lots'"],
        ),
        (
            dict(edit=lambda b, l: [x.replace("\ttest\t", "\tevaluation\t") for x in l] if b == 5 else l),
            ["5-test", "line 2, column block_type", "'evaluation'"],
        ),
        (
            dict(edit=lambda b, l: [x.replace("5\t14", "x\t14") for x in l] if b == 5 else l),
            ["5-test", "line 2, column block_num", "'x'"],
        ),
    ],
)
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
    values = evaluate(
        [
            "+source=l2logger",
            f"source.path={log}",
            f"source.ste_paths=[{ste}]",
            "metrics.smoothing=none",
            "metrics.normalization=none",
            *experiment["overrides"],
            "figures=true",
        ],
        output_dir=tmp_path / "out",
    )
    assert values["avg_eval_perf"] == pytest.approx(3.75)
    exp = client.get_experiment_by_name(experiment["name"])
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.status == "FINISHED" and run.data.tags["source"] == "l2logger"
    assert run.data.tags["ste_logs"] == "task_a"
    assert run.data.metrics["detail/task/task_a/ste_rel_perf"] == pytest.approx(0.5)
    assert run.data.params["metrics.smoothing"] == "none"
    assert "plots/learning_curve.png" in {a.path for a in client.list_artifacts(run.info.run_id, "plots")}


def test_broken_source_creates_no_run(tmp_path, experiment, client):
    log = write_log(tmp_path / "logs")
    with pytest.raises(SourceFormatError):
        evaluate(
            [
                "+source=l2logger",
                f"source.path={log}",
                f"source.ste_paths=[{tmp_path / 'missing'}]",
                *experiment["overrides"],
            ],
            output_dir=tmp_path / "out",
        )
    exp = client.get_experiment_by_name(experiment["name"])
    assert exp is None or not client.search_runs([exp.experiment_id])


# ------------------------------------------------------------------ options, links, records (issue 11)


@pytest.mark.parametrize(
    "kw, key, words",
    [
        (dict(perf_measure=2.5), "source.perf_measure", "2.5 (float)"),
        (dict(variant_mode="sideways"), "source.variant_mode", "'sideways'"),
        (dict(ste_paths=5), "source.ste_paths", "5 (int)"),
        (dict(ste_paths=[3]), "source.ste_paths[0]", "3 (int)"),
        (dict(path=7), "source.path", "7 (int)"),
    ],
)
def test_mistyped_options_name_the_key(tmp_path, kw, key, words):
    from owl_eval.errors import ConfigError

    log = write_log(tmp_path / "logs")
    with pytest.raises(ConfigError) as info:
        L2LoggerSource(**({"path": str(log)} | kw)).load()
    assert str(info.value).startswith(f"{key}: ") and words in str(info.value)


def test_one_ste_path_as_a_string_and_several_logs_of_one_task(tmp_path):
    write_log(tmp_path / "logs")
    for k in range(3):
        write_ste(tmp_path / "ste", "task_a", name=f"ste_task_a-{k}.0")
    data = L2LoggerSource(path=str(tmp_path / "logs"), ste_paths=str(tmp_path / "ste")).load()
    assert sorted(data.record.ste_logs) == ["task_a", "task_a-1", "task_a-2"]


def test_a_link_anywhere_under_the_given_folders_is_refused(tmp_path):
    from owl_eval.errors import UnsafePathError

    log = write_log(tmp_path / "logs")
    ste = write_ste(tmp_path / "ste")
    (tmp_path / "secret.txt").write_text("secret")
    os.symlink(tmp_path / "secret.txt", ste.parent / "notes.txt")  # beside the STE log, not inside it
    with pytest.raises(UnsafePathError, match="notes.txt: .* is a symbolic link"):
        L2LoggerSource(path=str(tmp_path / "logs"), ste_paths=[str(tmp_path / "ste")]).load()
    os.symlink(log / "worker-default", log / "worker-default" / "0-train" / "up")
    with pytest.raises(UnsafePathError, match="0-train/up: .* is a symbolic link"):
        L2LoggerSource(path=str(tmp_path / "logs")).load()


def _relative_files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_saved_record_holds_exactly_the_parsed_files(tmp_path):
    log = write_log(tmp_path / "logs")
    ste = write_ste(tmp_path / "ste")
    (log / "notes.txt").write_text("not part of the log")
    (log / "worker-default" / "0-train" / "debug.tsv").write_text("neither")
    data = L2LoggerSource(path=str(log), ste_paths=[str(ste)]).load()
    saved = data.record.save(tmp_path / "record")
    expected = {
        rel: content for rel, content in _relative_files(log).items() if rel.endswith((".json", "data-log.tsv"))
    }
    assert len(expected) == 2 + len(BLOCKS)
    assert _relative_files(saved / "l2log" / log.name) == expected
    assert _relative_files(saved / "ste" / "task_a" / ste.name) == _relative_files(ste)
    back = RLRecord.load(saved)
    assert back.log["exp_num"].tolist() == data.record.log["exp_num"].tolist() and list(back.ste_logs) == ["task_a"]


def test_saving_refuses_unsafe_names_and_links_and_writes_nothing(tmp_path):
    from owl_eval.errors import UnsafePathError
    from owl_eval.formats.l2logger import EpisodeLog

    log = write_log(tmp_path / "logs")
    ste = write_ste(tmp_path / "ste")
    record = L2LoggerSource(path=str(log), ste_paths=[str(ste)]).load().record
    hostile = "task_/../../../x"
    record.ste_dirs = {hostile: ste}
    target = tmp_path / "deep" / "a" / "b" / "record"
    with pytest.raises(UnsafePathError, match="STE name 'task_/../../../x' is not a safe name"):
        record.save(target)
    in_memory = EpisodeLog.from_columns(block_num=[0, 0], block_type="train", task_name=hostile, reward=[1.0, 2.0])
    with pytest.raises(UnsafePathError, match="task name 'task_/../../../x' is not a safe name"):
        RLRecord(log=in_memory).save(target)
    assert not (tmp_path / "deep").exists() and not (tmp_path / "x").exists()
    # a parsed data file swapped for a link after reading: refused, and the linked content is never copied
    record = L2LoggerSource(path=str(log)).load().record
    (tmp_path / "secret.txt").write_text("secret-content")
    data_file = log / "worker-default" / "3-train" / "data-log.tsv"
    data_file.unlink()
    os.symlink(tmp_path / "secret.txt", data_file)
    with pytest.raises(UnsafePathError, match="is a symbolic link"):
        record.save(tmp_path / "record")
    assert all(b"secret-content" not in content for content in _relative_files(tmp_path / "record").values())


@pytest.mark.parametrize(
    "meta, words",
    [
        ("[1, 2]", "expected a JSON object"),
        ('{"mode": "other"}', "mode: expected one of"),
        ('{"timings": {"../x": 1.0}}', "timing name '../x' is not a safe name"),
        ('{"timings": {"syllabus_s": "soon"}}', "timings.syllabus_s: expected a finite number"),
        ("{" * 50_000, "not valid JSON"),
    ],
)
def test_loading_a_broken_record_file_names_it(tmp_path, meta, words):
    log = write_log(tmp_path / "logs")
    saved = L2LoggerSource(path=str(log)).load().record.save(tmp_path / "record")
    (saved / "rl_record.json").write_text(meta)
    with pytest.raises(ValueError) as info:
        RLRecord.load(saved)
    assert "rl_record.json" in str(info.value) and words in str(info.value)


@pytest.mark.parametrize(
    "info", ["[1]", '{"identity": IDENTITY, "log_dir": "../../.."}', '{"identity": IDENTITY, "log_dir": 5}', "\udcff"]
)
def test_a_broken_stored_ste_entry_counts_as_absent(tmp_path, info):
    from owl_eval.protocols.lifelong_rl.ste import INFO_FILE, SteStore

    store = SteStore(tmp_path / "ste", seed=0, episodes=4, agent_cfg=None)
    identity = store.identity("cartpole", "default", {"length": 1.0})
    produced = store.compute(identity, lambda base: write_log(base, [(0, "train", "cartpole_default", [1, 2])]))
    assert store.find(identity) == produced
    entry = store.path(identity) / INFO_FILE
    entry.write_bytes(info.replace("IDENTITY", json.dumps(identity)).encode("utf-8", "surrogateescape"))
    assert store.find(identity) is None
    with pytest.raises(ValueError, match="STE task name 'a/b_c' is not a safe name"):
        store.path(store.identity("a/b", "c", {}))
