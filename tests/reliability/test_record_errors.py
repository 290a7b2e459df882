"""``owl-eval-evaluate +source=record`` on damaged, hand-edited or hostile saved records: each is
one ``error:`` line naming the file and the array / index / key (or the config key), no run, nothing
written outside the store. Includes a symbolic link in the record folder (never followed), a record of an
unknown protocol, corrupted members (CRC), pickled objects and JSON that is a list or nested 100 000 deep."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.reliability.harness import assert_clean_failure, run_cli
from tests.reliability.test_trajectories_errors import arrays as trajectory_arrays
from tests.reliability.test_trajectories_errors import corrupt_member


def ond_record(folder: Path) -> Path:
    from owl_eval.protocols.ond.metrics import OndTrial
    from owl_eval.protocols.ond.record import OndRecord

    trial = OndTrial(
        gt_class=np.array([1, 2, 3, 0, 1, 0]),
        gt_novel=np.array([0, 0, 0, 1, 0, 1]),
        red_light=3,
        p_world_changed=np.array([0.1, 0.2, 0.3, 0.4, 0.8, 0.9]),
        p_class=np.array(
            [
                [0.1, 0.7, 0.1, 0.1],
                [0.1, 0.1, 0.2, 0.6],
                [0.1, 0.1, 0.1, 0.7],
                [0.6, 0.2, 0.1, 0.1],
                [0.5, 0.3, 0.1, 0.1],
                [0.2, 0.2, 0.3, 0.3],
            ]
        ),
        batch_size=2,
        trial_id="t1",
    )
    folder.mkdir(parents=True, exist_ok=True)
    return OndRecord(
        condition="system",
        known_classes=np.arange(3),
        novel_classes=np.zeros(0, np.int64),
        class_names=("a", "b", "c"),
        trials=[trial],
    ).save(folder)


def continual_record(folder: Path) -> Path:
    from owl_eval.protocols.continual.record import ContinualRecord

    return ContinualRecord(
        "class_incremental", np.array([[0.9, 0.1], [0.6, 0.8]]), np.array([0.1, 0.3]), np.array([10, 30]), ((0,), (1,))
    ).save(folder)


def trajectory_record(folder: Path) -> Path:
    from owl_eval.protocols.trajectory.classes import CLASS_NAMES
    from owl_eval.protocols.trajectory.record import TrajectoryRecord

    a = trajectory_arrays()
    folder.mkdir(parents=True, exist_ok=True)
    return TrajectoryRecord(
        a["Path_true"],
        a["Path_pred"],
        a["Pred_steps"],
        np.zeros((2, 2, 3, 2)),
        np.array([[1.0, 0, 0, 0]]),
        np.array([[0.7, 0.1, 0.1, 0.1]]),
        np.array([[0, 0]]),
        np.array(CLASS_NAMES),
        np.array(["s", "s"]),
        np.arange(2),
        0.4,
    ).save(folder)


def rewrite(path: Path, *, drop=(), **change) -> None:
    """Save the record's members again with some replaced (``a__b`` names member ``a/b``) or dropped."""
    with np.load(path, allow_pickle=True) as data:
        members = {k: data[k] for k in data.files if k not in drop}
    members |= {k.replace("__", "/"): v for k, v in change.items()}
    compressed = path.name != "trajectory_record.npz"
    (np.savez_compressed if compressed else np.savez)(path, **members)


def ond(**change):
    def build(inputs: Path) -> Path:
        rewrite(ond_record(inputs / "rec"), **change)
        return inputs / "rec"

    return build


def continual(**change):
    def build(inputs: Path) -> Path:
        rewrite(continual_record(inputs / "rec"), **change)
        return inputs / "rec" / "continual_record.npz"

    return build


def trajectory(key=None, index=None, value=None, **change):
    def build(inputs: Path) -> Path:
        path = trajectory_record(inputs / "rec")
        if key is not None:
            arr = trajectory_arrays()[key]
            arr[index] = value
            change[key] = arr
        rewrite(path, **change)
        return inputs / "rec"

    return build


def meta(**fields):
    return np.array(
        json.dumps(
            {
                "condition": "system",
                "class_names": ["a", "b", "c"],
                "has_baseline": False,
                "format": "owl-eval/ond-record/1",
            }
            | fields
        )
    )


def summary_json(content: str | bytes):
    def build(inputs: Path) -> Path:
        np.savez(inputs / "preds.npz", **trajectory_arrays())
        (inputs / "run").mkdir()
        path = inputs / "run" / "trajectory_source.json"
        path.write_bytes(
            content if isinstance(content, bytes) else content.replace("NPZ", str(inputs / "preds.npz")).encode()
        )
        return inputs / "run"

    return build


def with_link(name: str, target):
    def build(inputs: Path) -> Path:
        ond_record(inputs / "rec")
        (inputs / "rec" / name).symlink_to(target(inputs) if callable(target) else target)
        return inputs / "rec"

    return build


def record_as_link(inputs: Path) -> Path:
    real = ond_record(inputs / "elsewhere")
    (inputs / "rec").mkdir()
    (inputs / "rec" / "ond_record.npz").symlink_to(real)
    return inputs / "rec"


def files(**contents):
    def build(inputs: Path) -> Path:
        (inputs / "rec").mkdir()
        for name, text in contents.items():
            (inputs / "rec" / name.replace("__", ".")).write_text(text)
        return inputs / "rec"

    return build


def two_records(inputs: Path) -> Path:
    ond_record(inputs / "rec")
    continual_record(inputs / "rec")
    return inputs / "rec"


def corrupted(build_record, member, at):
    def build(inputs: Path) -> Path:
        path = build_record(inputs / "rec")
        corrupt_member(path, member, at=at)
        return inputs / "rec"

    return build


def rl_record(meta_text=None, drop_log=False):
    def build(inputs: Path) -> Path:
        from owl_eval.formats.l2logger import EpisodeLog, read_log, write_log
        from owl_eval.protocols.lifelong_rl.record import RLRecord

        log = EpisodeLog.from_columns(
            block_num=[0, 0, 1],
            block_type=np.array(["train", "train", "test"], dtype=object),
            task_name="task_a",
            reward=[1.0, 2.0, 5.0],
        )
        log_dir = write_log(log, inputs / "logs", "scen", stamp=0.0)
        RLRecord(log=read_log(log_dir), log_dir=log_dir).save(inputs / "rec")
        if meta_text is not None:
            (inputs / "rec" / "rl_record.json").write_text(meta_text)
        if drop_log:
            import shutil

            shutil.rmtree(inputs / "rec" / "l2log")
        return inputs / "rec"

    return build


NESTED = "[" * 100_000 + "]" * 100_000
CASES = [
    # (id, build(inputs) -> source.path, extra args, words the error line must contain)
    ("folder-holds-a-symlink", with_link("notes.txt", "/etc/hostname"), [], ["notes.txt", "symbolic link"]),
    ("folder-holds-a-link-loop", with_link("loop", lambda inputs: inputs / "rec"), [], ["loop", "symbolic link"]),
    ("record-file-is-a-link", record_as_link, [], ["ond_record.npz", "symbolic link"]),
    ("unknown-protocol", files(vision_record__npz="x"), [], ["vision_record.npz", "unknown protocol 'vision'"]),
    ("no-record-here", files(renate_results__json="{}"), [], ["rec", "no record here"]),
    ("several-records", two_records, [], ["several records", "continual_record.npz", "ond_record.npz"]),
    (
        "ond-other-format",
        ond(meta_json=meta(format="owl-eval/vision-record/1")),
        [],
        ["ond_record.npz", "not an OND record"],
    ),
    (
        "ond-meta-not-json",
        ond(meta_json=np.array("{condition: system")),
        [],
        ["ond_record.npz", "'meta_json'", "not valid JSON"],
    ),
    ("ond-meta-a-list", ond(meta_json=np.array("[1, 2]")), [], ["ond_record.npz", "'meta_json'", "JSON object"]),
    ("ond-meta-nested", ond(meta_json=np.array(NESTED)), [], ["ond_record.npz", "'meta_json'", "nested too deeply"]),
    (
        "ond-unknown-condition",
        ond(meta_json=meta(condition="sometimes")),
        [],
        ["ond_record.npz", "condition", "'sometimes'"],
    ),
    (
        "ond-lengths-disagree",
        ond(agent__lengths=np.array([100])),
        [],
        ["ond_record.npz", "'agent/gt_class'", "expected 100"],
    ),
    (
        "ond-red-light-outside",
        ond(agent__red_light=np.array([10])),
        [],
        ["ond_record.npz", "'agent/red_light' [0] is 10"],
    ),
    (
        "ond-pickled-objects",
        ond(agent__p_class=np.array([None] * 6, dtype=object)),
        [],
        ["ond_record.npz", "'agent/p_class.npy'", "Python objects"],
    ),
    ("ond-missing-member", ond(drop=("agent/gt_novel",)), [], ["ond_record.npz", "'agent/gt_novel' not found"]),
    ("ond-p-class-rows", ond(agent__p_class=np.full((6, 4), 0.5)), [], ["ond_record.npz", "agent trial 0", "p_class"]),
    (
        "ond-corrupted",
        corrupted(ond_record, "agent/p_class.npy", at=20),
        [],
        ["ond_record.npz", "'agent/p_class.npy'", "corrupted"],
    ),
    (
        "continual-accuracy-above-one",
        continual(accuracy=np.array([[0.9, 0.1], [0.6, 1.5]])),
        [],
        ["continual_record.npz", "'accuracy' [1, 1] is 1.5"],
    ),
    (
        "continual-counts-do-not-split",
        continual(task_class_counts=np.array([1, 5])),
        [],
        ["continual_record.npz", "'task_class_counts'"],
    ),
    (
        "continual-unknown-scenario",
        continual(
            meta_json=np.array(json.dumps({"scenario": "domain_incremental", "format": "owl-eval/continual-record/1"}))
        ),
        [],
        ["continual_record.npz", "scenario", "'domain_incremental'"],
    ),
    (
        "continual-negative-size",
        continual(num_instances=np.array([-5, 30])),
        [],
        ["continual_record.npz", "'num_instances' [0] is -5"],
    ),
    ("continual-no-row", continual(accuracy=np.zeros((0, 2))), [], ["continual_record.npz", "no row"]),
    (
        "trajectory-1e308",
        trajectory("Path_pred", (0, 1, 0, 0, 1), 1e308),
        [],
        ["trajectory_record.npz", "'Path_pred' [scene 0, prediction 1, agent 0, step 0]", "beyond"],
    ),
    (
        "trajectory-missing-member",
        trajectory(drop=("Path_history",)),
        [],
        ["trajectory_record.npz", "'Path_history' not found"],
    ),
    (
        "trajectory-mask-wrong-steps",
        trajectory(Pred_steps=np.ones((2, 2, 3), bool)),
        [],
        ["trajectory_record.npz", "'Pred_steps'", "[2, 2, 2]"],
    ),
    (
        "trajectory-class-index-outside",
        trajectory(Class_index=np.array([[5, 0]])),
        [],
        ["trajectory_record.npz", "'Class_index' [0]"],
    ),
    ("trajectory-dt-negative", trajectory(dt=np.array(-0.4)), [], ["trajectory_record.npz", "'dt'", "positive"]),
    (
        "trajectory-corrupted",
        corrupted(trajectory_record, "Path_pred.npy", at=8),
        [],
        ["trajectory_record.npz", "'Path_pred.npy'", "corrupted"],
    ),
    ("summary-a-list", summary_json('["NPZ"]'), [], ["trajectory_source.json", "JSON object"]),
    ("summary-nested", summary_json(NESTED), [], ["trajectory_source.json", "nested too deeply"]),
    (
        "summary-seed-1e19",
        summary_json('{"path": "NPZ", "seed": 10000000000000000000}'),
        [],
        ["trajectory_source.json", "'seed'"],
    ),
    (
        "summary-names-a-missing-file",
        summary_json('{"path": "/nonexistent/none.npz"}'),
        [],
        ["none.npz", "not found", "trajectory_source.json"],
    ),
    (
        "summary-not-utf8",
        summary_json('{"path": "caf\xe9"}'.encode("latin-1")),
        [],
        ["trajectory_source.json", "not UTF-8"],
    ),
    ("rl-record-a-list", rl_record(meta_text="[]"), [], ["rl_record.json", "JSON object"]),
    ("rl-record-without-log", rl_record(drop_log=True), [], ["l2log"]),
    ("chunk-size-fraction", ond(), ["source.chunk_size=2.5"], ["source.chunk_size", "integer"]),
    ("missing-path", lambda inputs: inputs / "nope", [], ["nope", "file or directory not found"]),
]


@pytest.mark.parametrize("build, args, mentions", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_record_error_is_one_line_and_creates_no_run(workspace, build, args, mentions):
    inputs = workspace.root / "inputs"
    inputs.mkdir()
    path = build(inputs)
    result = run_cli("owl_eval.runner.cli.evaluate", ["+source=record", f"source.path={path}", *args], workspace)
    assert_clean_failure(result, *mentions)
