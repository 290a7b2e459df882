"""Ambiguous and unreadable input: the same thing given twice (a config key on one command line, an option of
``owl-eval-compare``, two classes of one name, two ``.npz`` members of one name, a repeated JSON key) is one
``error:`` line naming both places and no run; text that is not what its format says and empty arrays where a
value per sample is needed are one line naming the file and the array, never a codec's or numpy's message."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.reliability.harness import assert_clean_failure, run_cli
from tests.reliability.test_l2logger_errors import TRAIN, replace_file, row, set_line, write_log
from tests.reliability.test_record_errors import meta, ond, trajectory, trajectory_record
from tests.reliability.test_trajectories_errors import arrays as trajectory_arrays

OND = "+experiment=ond_given_detection"
FAST = ["protocol.num_trials=3", "figures=false"]

REPEATED_KEYS = [
    # (id, module, args, words the error line must contain)
    ("seed", "runner", [OND, "seed=1", "seed=2"], ["'seed'", "seed=1", "seed=2", "twice"]),
    (
        "nested-key",
        "runner",
        [OND, "protocol.batch_size=3", "protocol.batch_size=4"],
        ["protocol.batch_size=3", "protocol.batch_size=4"],
    ),
    ("add-then-set", "runner", [OND, "+agent.k=1", "agent.k=2"], ["'agent.k'", "+agent.k=1", "agent.k=2"]),
    ("force-add", "runner", [OND, "++seed=1", "seed=2"], ["'seed'", "++seed=1", "seed=2"]),
    ("group", "runner", [OND, "domain=digits", "domain=handwriting"], ["'domain'", "domain=handwriting"]),
    ("hydra-key", "runner", [OND, "hydra.job.chdir=false", "hydra.job.chdir=true"], ["'hydra.job.chdir'"]),
    ("sweep-and-value", "runner", ["-m", OND, "seed=1,2", "seed=3"], ["seed=1,2", "seed=3"]),
    ("config-dir", "runner", [OND, "--config-dir", "a", "--config-dir=b"], ["--config-dir", "'--config-dir=b'"]),
    (
        "evaluate",
        "owl_eval.runner.cli.evaluate",
        ["+source=record", "source.path=a", "source.path=b"],
        ["'source.path'", "source.path=a", "source.path=b"],
    ),
]


@pytest.mark.parametrize("module,args,mentions", [pytest.param(*c[1:], id=c[0]) for c in REPEATED_KEYS])
def test_a_key_given_twice_on_the_command_line_is_refused(workspace, module, args, mentions):
    line = assert_clean_failure(run_cli(module, [*FAST, *args] if module == "runner" else args, workspace), *mentions)
    assert "argument" in line  # names both places


def test_the_same_value_twice_and_a_sweep_are_not_refused_as_repeats(workspace):
    # `seed=0 seed=0` says one thing; `seed=1.5` then fails on its own (not as a repeat).
    line = assert_clean_failure(run_cli("runner", [*FAST, OND, "seed=1.5", "seed=1.5"], workspace), "seed", "integer")
    assert "twice" not in line


def test_an_override_hydra_cannot_parse_keeps_hydras_words(workspace):
    line = assert_clean_failure(run_cli("runner", [*FAST, OND, "protocol.batch_size=[1,"], workspace), "[1,")
    assert "twice" not in line


# -- files: the same name twice, text that is not text, empty arrays ------------------------------------------


def _zip_with_two_members(path, name: str, first: np.ndarray, second: np.ndarray, **others) -> None:
    """An .npz holding two entries named ``name`` (zipfile warns but writes them; numpy keeps the last)."""
    import io
    import warnings
    import zipfile

    def npy(arr):
        buffer = io.BytesIO()
        np.lib.format.write_array(buffer, arr)
        return buffer.getvalue()

    with warnings.catch_warnings(), zipfile.ZipFile(path, "w") as zf:
        warnings.simplefilter("ignore")  # "Duplicate name": the point of the file
        for key, arr in others.items():
            zf.writestr(f"{key}.npy", npy(arr))
        zf.writestr(f"{name}.npy", npy(first))
        zf.writestr(f"{name}.npy", npy(second))


def trajectories_file(**change):
    def build(inputs: Path) -> Path:
        np.savez(inputs / "preds.npz", **(trajectory_arrays() | change))
        return inputs / "preds.npz"

    return build


def trajectories_with_two(name: str):
    def build(inputs: Path) -> Path:
        arrays = trajectory_arrays()
        first = arrays.pop(name)
        _zip_with_two_members(inputs / "preds.npz", name, first, first * 2, **arrays)
        return inputs / "preds.npz"

    return build


CLASSES = {
    "P_true": np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]),
    "P_pred": np.array([[0.8, 0.1, 0.1], [0.2, 0.7, 0.1]]),
}
EMPTY_SCENES = {
    "Path_true": np.zeros((0, 1, 2, 2, 2)),
    "Path_pred": np.zeros((0, 2, 2, 2, 2)),
    "Pred_steps": np.zeros((0, 2, 2), bool),
    "Log_probs": np.zeros((0, 3, 2)),
}

TRAJECTORY_CASES = [
    # (id, build(inputs) -> source.path, extra args, words the error line must contain)
    ("member-twice", trajectories_with_two("Path_pred"), [], ["preds.npz", "'Path_pred.npy'", "twice", "entries"]),
    (
        "class-names-not-utf8",
        trajectories_file(**CLASSES, Class_names=np.array([b"car", b"\xffbus", b"ped"])),
        [],
        ["preds.npz", "'Class_names'", "position 1", "not UTF-8"],
    ),
    (
        "class-names-twice",
        trajectories_file(**CLASSES, Class_names=np.array(["car", "bus", "car"])),
        [],
        ["preds.npz", "'Class_names'", "'car'", "positions 0 and 2"],
    ),
    (
        "no-scenes",
        trajectories_file(**EMPTY_SCENES),
        ["metrics.k_values=[2]"],
        ["preds.npz", "'Path_pred'", "no scene"],
    ),
    (
        "no-agents",
        trajectories_file(
            Path_true=np.zeros((2, 1, 0, 2, 2)),
            Path_pred=np.zeros((2, 2, 0, 2, 2)),
            Pred_steps=np.zeros((2, 0, 2), bool),
            Log_probs=np.zeros((2, 3, 0)),
        ),
        ["metrics.k_values=[2]"],
        ["preds.npz", "'Path_pred'", "agents", "empty"],
    ),
]


@pytest.mark.parametrize(
    "build, args, mentions", [c[1:] for c in TRAJECTORY_CASES], ids=[c[0] for c in TRAJECTORY_CASES]
)
def test_trajectories_file_that_is_ambiguous_or_empty_is_one_line(workspace, build, args, mentions):
    inputs = workspace.root / "inputs"
    inputs.mkdir()
    path = build(inputs)
    result = run_cli("owl_eval.runner.cli.evaluate", ["+source=trajectories", f"source.path={path}", *args], workspace)
    assert_clean_failure(result, *mentions)


def ond_meta_text(text: str):
    return ond(meta_json=np.array(text))


REPEATED_META = (
    '{"condition": "system", "class_names": ["a", "b", "c"], "has_baseline": false,\n'
    ' "condition": "given", "format": "owl-eval/ond-record/1"}'
)
EMPTY_TRIALS = {
    f"agent__{key}": np.zeros(0, dtype)
    for key, dtype in (
        ("lengths", np.int64),
        ("red_light", np.int64),
        ("batch_size", np.int64),
        ("trial_id", str),
        ("gt_class", np.int64),
        ("gt_novel", np.int64),
        ("p_world_changed", np.float64),
    )
} | {"agent__p_class": np.zeros((0, 4))}


def trajectory_without_scenes(inputs: Path) -> Path:
    path = trajectory_record(inputs / "rec")
    with np.load(path) as data:
        members = {k: data[k] for k in data.files}
    n_s = members["Path_true"].shape[0]
    for key in ("Path_true", "Path_pred", "Pred_steps", "Path_history", "Scene_source", "Scene_frame"):
        members[key] = members[key][n_s:]
    members |= {"P_true": np.zeros((0, 4)), "P_pred": np.zeros((0, 4)), "Class_index": np.zeros((0, 2), np.int64)}
    np.savez_compressed(path, **members)
    return inputs / "rec"


RECORD_CASES = [
    ("ond-class-names-twice", ond(meta_json=meta(class_names=["a", "b", "a"])), [], ["'a'", "positions 0 and 2"]),
    ("ond-meta-key-twice", ond_meta_text(REPEATED_META), [], ["'meta_json'", "'condition'", "twice", "line 2"]),
    (
        "ond-trial-id-not-utf8",
        ond(agent__trial_id=np.array([b"t\xff1"])),
        [],
        ["ond_record.npz", "'agent/trial_id'", "not UTF-8"],
    ),
    ("ond-no-trials", ond(**EMPTY_TRIALS), [], ["ond_record.npz", "'agent/lengths'", "no trial"]),
    (
        "trajectory-no-scenes",
        trajectory_without_scenes,
        ["+metrics.k_values=[2]"],
        ["trajectory_record.npz", "'Path_true'", "no scene"],
    ),
    (
        "trajectory-class-names-not-utf8",
        trajectory(Class_names=np.array([b"\xff", b"b", b"c", b"d"])),
        [],
        ["trajectory_record.npz", "'Class_names'", "not UTF-8"],
    ),
    (
        "trajectory-class-names-twice",
        trajectory(Class_names=np.array(["a", "b", "c", "a"])),
        [],
        ["trajectory_record.npz", "'Class_names'", "positions 0 and 3"],
    ),
]


@pytest.mark.parametrize("build, args, mentions", [c[1:] for c in RECORD_CASES], ids=[c[0] for c in RECORD_CASES])
def test_record_that_is_ambiguous_or_empty_is_one_line(workspace, build, args, mentions):
    inputs = workspace.root / "inputs"
    inputs.mkdir()
    path = build(inputs)
    result = run_cli("owl_eval.runner.cli.evaluate", ["+source=record", f"source.path={path}", *args], workspace)
    assert_clean_failure(result, *mentions)


def test_accuracy_matrix_json_with_a_key_twice_is_one_line(workspace):
    path = workspace.root / "inputs" / "results.json"
    path.parent.mkdir()
    path.write_text(
        '{"accuracy": [[0.9, 0.1], [0.8, 0.85]],\n "num_instances": [10, 20],\n "accuracy": [[0.1, 0.1], [0.1, 0.1]]}'
    )
    result = run_cli("owl_eval.runner.cli.evaluate", ["+source=accuracy_matrix", f"source.path={path}"], workspace)
    assert_clean_failure(result, "results.json", "line 3", "'accuracy'", "twice")


L2_CASES = [
    (
        "logger-info-key-twice",
        replace_file("logger_info.json", '{"metrics_columns": ["reward"],\n "metrics_columns": ["score"]}'),
        ["logger_info.json", "line 2", "'metrics_columns'", "twice"],
    ),
    (
        "task-params-key-twice",
        lambda root, ws: set_line(root, 3, row(0, 1, params='"{""speed"": 1, ""speed"": 2}"')),
        [TRAIN, "line 3", "task_params", "'speed'", "twice"],
    ),
]


@pytest.mark.parametrize("edit,mentions", [c[1:] for c in L2_CASES], ids=[c[0] for c in L2_CASES])
def test_l2logger_json_with_a_key_twice_is_one_line(workspace, edit, mentions):
    root = write_log(workspace.root / "inputs")
    edit(root, workspace)
    result = run_cli(
        "owl_eval.runner.cli.evaluate", ["+source=l2logger", f"source.path={root}", "figures=false"], workspace
    )
    assert_clean_failure(result, *mentions)


def test_a_uri_given_twice_is_named_without_its_password(workspace):
    secret = "owl-eval-secret-d41c"
    uris = [f"tracking.uri=postgresql://u:{secret}@db.example/a", f"tracking.uri=postgresql://u:{secret}2@db.example/b"]
    result = run_cli("runner", [*FAST, OND, *uris], workspace)
    line = assert_clean_failure(result, "'tracking.uri'", "twice", "u:***@db.example/a", "u:***@db.example/b")
    assert secret not in result.stdout + result.stderr, line
