"""Records saved by owl-eval runs, re-scored with other metric settings through the record source."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from owl_eval.errors import ConfigError
from owl_eval.evaluation import evaluation_for
from owl_eval.formats.l2logger import read_log
from owl_eval.protocols.continual.record import ContinualRecord
from owl_eval.protocols.lifelong_rl.record import RLRecord
from owl_eval.protocols.ond.metrics import OndTrial
from owl_eval.protocols.ond.record import OndRecord
from owl_eval.protocols.trajectory.classes import CLASS_NAMES
from owl_eval.protocols.trajectory.record import TrajectoryRecord
from owl_eval.runner.api import evaluate
from owl_eval.sources import SourceFormatError
from owl_eval.sources.record import RecordSource


def ond_record(directory):
    directory.mkdir(parents=True, exist_ok=True)
    # 6 samples, red light at index 3; P(world changed) first >= 0.5 at index 4, first >= 0.85 at index 5.
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
    OndRecord(
        condition="system",
        known_classes=np.arange(3),
        novel_classes=np.zeros(0, np.int64),
        class_names=("a", "b", "c"),
        trials=[trial],
    ).save(directory)
    return directory / "ond_record.npz"


def test_ond_record_rescored_with_another_threshold(tmp_path):
    path = ond_record(tmp_path)
    at_05 = RecordSource(path=str(path)).load()  # OndMetricOptions' defaults: threshold 0.5
    assert at_05.tags["record_kind"] == "ond"
    # M1 = first detection - red light: 4 - 3 = 1 at threshold 0.5, 5 - 3 = 2 at 0.85
    assert evaluation_for(at_05.protocol).evaluate(at_05.record, {})["m1_mean_fn_cdt"] == 1.0
    at_085 = RecordSource(path=str(tmp_path), metrics={"threshold": 0.85}).load()  # the folder works too
    assert evaluation_for(at_085.protocol).evaluate(at_085.record, {"threshold": 0.85})["m1_mean_fn_cdt"] == 2.0


def test_continual_record_full_and_with_unknown_init(tmp_path):
    A = np.array([[0.9, 0.1], [0.6, 0.8]])
    ContinualRecord("class_incremental", A, np.array([0.1, 0.3]), np.array([10, 30]), ((0,), (1,))).save(tmp_path / "a")
    data = RecordSource(path=str(tmp_path / "a")).load()
    r = evaluation_for(data.protocol).evaluate(data.record, {})
    # forward transfer at t = 1: A[0][1] - b_1 = 0.1 - 0.3; micro: (10 * 0.6 + 30 * 0.8) / 40 = 0.75
    assert r["forward_transfer"] == pytest.approx(-0.2) and r["micro_average_accuracy"] == pytest.approx(0.75)
    # what the accuracy_matrix source saves when b and n were not given: NaN / 0 placeholders
    ContinualRecord("class_incremental", A, np.full(2, np.nan), np.zeros(2, np.int64), ((), ())).save(tmp_path / "b")
    data = RecordSource(path=str(tmp_path / "b" / "continual_record.npz")).load()
    r = evaluation_for(data.protocol).evaluate(data.record, {})
    assert r["average_accuracy"] == pytest.approx(0.7) and "init_accuracy" in r.na["forward_transfer"]


def trajectory_record(directory, true, pred, mask):
    n_s, n_a = mask.shape[:2]
    TrajectoryRecord(
        true,
        pred,
        mask,
        np.zeros((n_s, n_a, 3, 2)),
        np.zeros((0, 4)),
        np.zeros((0, 4)),
        np.zeros((0, 2), np.int64),
        np.array(CLASS_NAMES),
        np.array(["s"] * n_s),
        np.arange(n_s),
        0.4,
    ).save(directory)
    return directory / "trajectory_record.npz"


def test_trajectory_record_rescored_with_another_miss_threshold(tmp_path):
    # one scene, one agent, one step: truth (0, 0); predictions 1 m and 3 m away -> best final error 1 m
    true = np.zeros((1, 1, 1, 1, 2))
    pred = np.array([[0.0, 1.0], [0.0, 3.0]]).reshape(1, 2, 1, 1, 2)
    path = trajectory_record(tmp_path, true, pred, np.ones((1, 1, 1), bool))
    data = RecordSource(path=str(path)).load()
    settings = {"kde": False}
    assert evaluation_for(data.protocol).evaluate(data.record, settings)["ade_marginal"] == pytest.approx(
        2.0
    )  # (1 + 3) / 2
    assert (
        evaluation_for(data.protocol).evaluate(data.record, settings | {"miss_threshold": 0.5})["miss_rate_marginal"]
        == 1.0
    )
    assert (
        evaluation_for(data.protocol).evaluate(data.record, settings | {"miss_threshold": 2.0})["miss_rate_marginal"]
        == 0.0
    )


def write_l2log(base):
    from owl_eval.formats.l2logger import EpisodeLog, write_log

    log = EpisodeLog.from_columns(
        block_num=[0, 0, 0, 1, 1],
        block_type=np.array(["train"] * 3 + ["test"] * 2, dtype=object),
        task_name="task_a",
        reward=[1.0, 2.0, 3.0, 5.0, 7.0],
    )
    return write_log(log, base, "scen", stamp=0.0)


def test_rl_record_folder_and_bare_l2logger_directory(tmp_path):
    log_dir = write_l2log(tmp_path / "logs")
    RLRecord(log=read_log(log_dir), log_dir=log_dir).save(tmp_path / "record")
    for path in (tmp_path / "record", log_dir):
        data = RecordSource(path=str(path)).load()
        r = evaluation_for(data.protocol).evaluate(data.record, {"smoothing": "none", "normalization": "none"})
        # training 1, 2, 3 -> 2; evaluation 5, 7 -> 6
        assert r["avg_train_perf"] == pytest.approx(2.0) and r["avg_eval_perf"] == pytest.approx(6.0)
        assert data.protocol == "lifelong_rl"


def test_trajectories_source_summary_is_read_again(tmp_path):
    pred = np.array([[0.0, 1.0], [0.0, 3.0]]).reshape(1, 2, 1, 1, 2)
    np.savez(
        tmp_path / "preds.npz", Path_true=np.zeros((1, 1, 1, 1, 2)), Path_pred=pred, Pred_steps=np.ones((1, 1, 1), bool)
    )
    summary = {
        "path": str(tmp_path / "preds.npz"),
        "arrays": {"true": "Path_true", "pred": "Path_pred", "mask": "Pred_steps", "log_probs": None},
        "seed": 0,
    }
    (tmp_path / "trajectory_source.json").write_text(json.dumps(summary))
    data = RecordSource(path=str(tmp_path)).load()
    assert evaluation_for(data.protocol).evaluate(data.record, {"kde": False})["ade_marginal"] == pytest.approx(2.0)


def test_bad_records_give_one_clear_error(tmp_path):
    with pytest.raises(SourceFormatError, match="file or directory not found"):
        RecordSource(path=str(tmp_path / "nope")).load()
    (tmp_path / "x.npz").write_bytes(b"")
    with pytest.raises(SourceFormatError, match="x.npz: not a record file"):
        RecordSource(path=str(tmp_path / "x.npz")).load()
    (tmp_path / "empty").mkdir()
    with pytest.raises(SourceFormatError, match="no record here"):
        RecordSource(path=str(tmp_path / "empty")).load()
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "ond_record.npz").write_text("not a zip")
    with pytest.raises(SourceFormatError, match="ond_record.npz: not a readable .npz"):
        RecordSource(path=str(tmp_path / "bad")).load()
    path = ond_record(tmp_path / "empty")
    data = RecordSource(path=str(path), metrics={"treshold": 0.7}).load()
    with pytest.raises(ConfigError, match=r"metrics.treshold"):  # refused by the protocol's metric_options
        evaluation_for(data.protocol).options({"treshold": 0.7}, record=data.record)
    ContinualRecord(
        "class_incremental", np.array([[0.9, 0.1], [0.6, math.nan]]), np.zeros(2), np.ones(2, np.int64), ((), ())
    ).save(tmp_path / "empty")
    with pytest.raises(SourceFormatError, match="holds several records"):
        RecordSource(path=str(tmp_path / "empty")).load()
    with pytest.raises(SourceFormatError, match=r"'accuracy' \[1, 1\] is nan"):
        RecordSource(path=str(tmp_path / "empty" / "continual_record.npz")).load()


def test_evaluate_record_round_trip_through_mlflow(tmp_path, experiment, client):
    path = ond_record(tmp_path / "saved")
    values = evaluate(
        ["+source=record", f"source.path={path}", "+metrics.threshold=0.85", *experiment["overrides"]],
        output_dir=tmp_path / "out",
    )
    assert values["m1_mean_fn_cdt"] == 2.0
    exp = client.get_experiment_by_name(experiment["name"])
    (run,) = client.search_runs([exp.experiment_id])
    assert (
        run.info.status == "FINISHED" and run.data.tags["record_kind"] == "ond" and run.data.tags["source"] == "record"
    )
    assert run.data.params["metrics.threshold"] == "0.85" and run.data.tags["condition"] == "system"
    # the logged record is itself a record: re-score it at the default threshold
    local = client.download_artifacts(run.info.run_id, "record", str(tmp_path / "download"))
    again = evaluate(["+source=record", f"source.path={local}", *experiment["overrides"]], output_dir=tmp_path / "out2")
    assert again["m1_mean_fn_cdt"] == 1.0


def test_broken_record_creates_no_run(tmp_path, experiment, client):
    path = ond_record(tmp_path)
    with pytest.raises(ConfigError, match="metrics.treshold"):
        evaluate(
            ["+source=record", f"source.path={path}", "+metrics.treshold=0.7", *experiment["overrides"]],
            output_dir=tmp_path / "out",
        )
    exp = client.get_experiment_by_name(experiment["name"])
    assert exp is None or not client.search_runs([exp.experiment_id])


def test_links_unknown_protocols_and_damage_are_refused(tmp_path):
    from owl_eval.errors import UnsafePathError
    from tests.metrics.test_traj_npz import _corrupt

    ond_record(tmp_path / "linked")
    (tmp_path / "linked" / "notes.txt").symlink_to("/etc/hostname")
    with pytest.raises(UnsafePathError, match="notes.txt: an entry of the record folder is a symbolic link"):
        RecordSource(path=str(tmp_path / "linked")).load()
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "vision_record.npz").write_bytes(b"")
    with pytest.raises(SourceFormatError, match="vision_record.npz: a record of an unknown protocol 'vision'"):
        RecordSource(path=str(tmp_path / "other")).load()
    (tmp_path / "traj").mkdir()
    path = trajectory_record(
        tmp_path / "traj", np.zeros((1, 1, 1, 1, 2)), np.ones((1, 2, 1, 1, 2)), np.ones((1, 1, 1), bool)
    )
    _corrupt(path, "Path_pred.npy")
    with pytest.raises(SourceFormatError, match="trajectory_record.npz: member 'Path_pred.npy' is corrupted"):
        RecordSource(path=str(path)).load()
    with pytest.raises(ConfigError, match="source.chunk_size: expected an integer"):
        RecordSource(path=str(tmp_path / "linked"), chunk_size=2.5).load()


def test_trajectory_record_with_far_predictions_names_array_and_index(tmp_path):
    pred = np.ones((1, 2, 1, 1, 2))
    pred[0, 1, 0, 0, 0] = 1e308
    path = trajectory_record(tmp_path, np.zeros((1, 1, 1, 1, 2)), pred, np.ones((1, 1, 1), bool))
    with pytest.raises(
        SourceFormatError, match=r"'Path_pred' \[scene 0, prediction 1, agent 0, step 0\] is \[1e\+308, 1.0\]"
    ):
        RecordSource(path=str(path)).load()


def test_settings_are_the_protocol_defaults_under_the_given_ones(tmp_path):
    data = RecordSource(path=str(ond_record(tmp_path))).load()
    typed = evaluation_for(data.protocol).options({"threshold": 0.85}, record=data.record)
    assert typed.threshold == 0.85 and typed.asymptotic_width == 100  # the rest: the defaults
