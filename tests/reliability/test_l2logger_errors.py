"""``owl-eval-evaluate +source=l2logger`` on broken, hostile or mistyped l2logger logs: each is one
``error:`` line naming the file / row / column (or the config key), no run, nothing written outside the
store. Includes the path-traversal task name, a symlink loop (must fail fast, not fill the disk) and a
link to a file outside the log (its content must reach no artifact)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.reliability.harness import assert_clean_failure, run_cli

HEADER = (
    "block_num\texp_num\tworker_id\tblock_type\tblock_subtype\ttask_name\ttask_params\texp_status\ttimestamp\treward"
)
SECRET = "owl-eval-secret-7f3a9c"


def row(block, exp, btype="train", task="task_a", reward="1.5", worker="worker-default", params="{}"):
    return f"{block}\t{exp}\t{worker}\t{btype}\twake\t{task}\t{params}\tcomplete\t20240101T000000.{exp:06d}\t{reward}"


def write_log(base: Path, name="scen-1") -> Path:
    """A valid two-block log: block 0 train task_a (exp 0-3), block 1 test task_a (exp 4-5)."""
    root = base / name
    (root / "worker-default" / "0-train").mkdir(parents=True)
    (root / "worker-default" / "1-test").mkdir(parents=True)
    (root / "logger_info.json").write_text(json.dumps({"metrics_columns": ["reward"], "log_format_version": "1.1"}))
    (root / "scenario_info.json").write_text(json.dumps({"scenario_type": "custom"}))
    train = [row(0, e, reward=str(e + 1)) for e in range(4)]
    test = [row(1, e, "test", reward="3") for e in (4, 5)]
    (root / "worker-default" / "0-train" / "data-log.tsv").write_text("\n".join([HEADER, *train]) + "\n")
    (root / "worker-default" / "1-test" / "data-log.tsv").write_text("\n".join([HEADER, *test]) + "\n")
    return root


TRAIN = "worker-default/0-train/data-log.tsv"


def set_line(root: Path, lineno: int, text: str, rel: str = TRAIN) -> None:
    """Replace 1-based line ``lineno`` of ``rel`` (line 1 is the header)."""
    path = root / rel
    lines = path.read_text().split("\n")
    lines[lineno - 1] = text
    path.write_text("\n".join(lines))


def reward_at_line_3(value):
    return lambda root, ws: set_line(root, 3, row(0, 1, reward=value))


def replace_file(rel, content: bytes | str):
    def edit(root, ws):
        (root / rel).write_bytes(content if isinstance(content, bytes) else content.encode())

    return edit


def data_dir_named_like_the_file(root, ws):
    (root / "worker-default" / "2-test" / "data-log.tsv").mkdir(parents=True)


def no_data_files(root, ws):
    for rel in (TRAIN, "worker-default/1-test/data-log.tsv"):
        (root / rel).unlink()


def empty_folder(root, ws):
    import shutil

    shutil.rmtree(root)
    root.mkdir()


def unsafe_worker_folder(root, ws):
    (root / "worker-default").rename(root / "worker default")


def link_loop(root, ws):
    os.symlink(".", root / "worker-default" / "loop")


def link_outside(root, ws):
    secret = ws.root / "secret.txt"
    secret.write_text(SECRET + "\n")
    os.symlink(secret, root / "notes.txt")


# (id, edit(root, workspace), extra CLI args, words the error line must contain)
CASES = [
    ("reward-inf", reward_at_line_3("inf"), [], [TRAIN, "line 3", "column reward", "finite"]),
    ("reward-minus-inf", reward_at_line_3("-inf"), [], [TRAIN, "line 3", "column reward", "'-inf'"]),
    ("reward-1e400", reward_at_line_3("1e400"), [], [TRAIN, "line 3", "column reward", "'1e400'"]),
    ("reward-not-a-number", reward_at_line_3("lots"), [], [TRAIN, "line 3", "column reward", "'lots'"]),
    ("exp-num-twice", lambda r, ws: set_line(r, 3, row(0, 0)), [], [TRAIN, "line 3", "column exp_num", "twice"]),
    ("exp-num-huge", lambda r, ws: set_line(r, 3, row(0, 10**19)), [], [TRAIN, "line 3", "column exp_num", "2**63"]),
    ("block-num-huge", lambda r, ws: set_line(r, 2, row(10**19, 0)), [], [TRAIN, "line 2", "column block_num"]),
    (
        "block-type-eval",
        lambda r, ws: set_line(r, 2, row(0, 0, btype="eval")),
        [],
        [TRAIN, "line 2", "column block_type", "'eval'"],
    ),
    ("extra-field", lambda r, ws: set_line(r, 4, row(0, 2) + "\t9"), [], [TRAIN, "line 4", "expected 10", "got 11"]),
    (
        "missing-column",
        lambda r, ws: set_line(r, 1, HEADER.replace("\ttask_name", "")),
        [],
        [TRAIN, "line 1", "task_name"],
    ),
    (
        "not-utf8",
        replace_file(TRAIN, (HEADER + "\n").encode() + b"0\t0\tw\ttrain\twake\tt\xe9\t{}\tcomplete\tx\t1\n"),
        [],
        [TRAIN, "line 2", "UTF-8"],
    ),
    ("data-file-is-a-directory", data_dir_named_like_the_file, [], ["2-test/data-log.tsv", "is a directory"]),
    ("no-data-file", no_data_files, [], ["no data-log.tsv found", "scen-1"]),
    ("empty-folder", empty_folder, [], ["no data-log.tsv found", "scen-1", "empty"]),
    ("unsafe-worker-folder", unsafe_worker_folder, [], ["worker default", "folder name", "not a safe name"]),
    (
        "logger-info-a-list",
        replace_file("logger_info.json", '["reward"]'),
        [],
        ["logger_info.json", "JSON object", "list"],
    ),
    (
        "scenario-info-invalid",
        replace_file("scenario_info.json", '{"scenario_type": '),
        [],
        ["scenario_info.json", "line 1", "not valid JSON"],
    ),
    (
        "scenario-info-deep",
        replace_file("scenario_info.json", "[" * 100_000 + "]" * 100_000),
        [],
        ["scenario_info.json", "nested too deeply"],
    ),
    (
        "task-params-deep",
        lambda r, ws: set_line(r, 2, row(0, 0, params="[" * 100_000 + "]" * 100_000)),
        [],
        [TRAIN, "line 2", "column task_params", "nested too deeply"],
    ),
    ("ste-path-missing", lambda r, ws: None, ["source.ste_paths=[nowhere/ste]"], ["nowhere/ste", "source.ste_paths"]),
    ("option-perf-measure-number", lambda r, ws: None, ["source.perf_measure=2.5"], ["source.perf_measure", "2.5"]),
    ("option-variant-mode", lambda r, ws: None, ["source.variant_mode=sideways"], ["source.variant_mode", "sideways"]),
    ("option-ste-paths-number", lambda r, ws: None, ["source.ste_paths=5"], ["source.ste_paths", "5"]),
    ("link-loop", link_loop, [], ["worker-default/loop", "symbolic link"]),
    (
        "task-params-quote-never-closed",
        lambda r, ws: set_line(r, 3, row(0, 1, params='"{""speed"": 1}')),
        [],
        [TRAIN, "line 3", "column task_params", "valid JSON"],
    ),
    (  # a blank line sends the file to the csv-module reader: the lines after it keep their numbers
        "bad-reward-after-a-blank-line",
        lambda r, ws: set_line(r, 3, "\n" + row(0, 1, reward="lots")),
        [],
        [TRAIN, "line 4", "column reward", "'lots'"],
    ),
]


@pytest.mark.parametrize("edit,extra,mentions", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_broken_log_is_one_clear_error(workspace, edit, extra, mentions):
    root = write_log(workspace.root / "inputs")
    edit(root, workspace)
    # a link loop must fail fast (it used to fill the disk): a short timeout is part of the check
    result = run_cli(
        "owl_eval.runner.cli.evaluate",
        ["+source=l2logger", f"source.path={root}", "figures=false", *extra],
        workspace,
        timeout=60,
    )
    assert_clean_failure(result, *mentions)


def test_traversal_task_name_in_an_ste_log_writes_nothing_outside(workspace):
    """The reported attack: an STE log whose task is ``task_/../../../x`` made RLRecord.save copy outside."""
    root = write_log(workspace.root / "inputs")
    ste = write_log(workspace.root / "inputs" / "ste", name="ste-1")
    hostile = "task_/../../../x"
    for rel in (TRAIN, "worker-default/1-test/data-log.tsv"):
        path = ste / rel
        path.write_text(path.read_text().replace("\ttask_a\t", f"\t{hostile}\t"))
    result = run_cli(
        "owl_eval.runner.cli.evaluate",
        ["+source=l2logger", f"source.path={root}", f"source.ste_paths=[{ste}]"],
        workspace,
        timeout=60,
    )
    assert_clean_failure(result, str(ste / TRAIN), "line 2", "column task_name", "not a safe name")
    assert not (workspace.root / "x").exists() and not (workspace.root.parent / "x").exists()


def test_link_to_a_file_outside_the_log_is_an_error_and_leaks_nowhere(workspace):
    root = write_log(workspace.root / "inputs")
    link_outside(root, workspace)
    result = run_cli("owl_eval.runner.cli.evaluate", ["+source=l2logger", f"source.path={root}"], workspace, timeout=60)
    assert_clean_failure(result, str(root / "notes.txt"), "symbolic link")
    assert SECRET not in result.stdout + result.stderr
    for folder, _, files in os.walk(workspace.store):
        for name in files:
            assert SECRET.encode() not in (Path(folder) / name).read_bytes(), f"{folder}/{name} holds the secret"
