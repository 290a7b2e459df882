"""General-Framework trajectory arrays in an .npz, written by hand here, read (in chunks) and scored."""

from __future__ import annotations

import math

import numpy as np
import pytest

from owl_eval.evaluation import evaluation_for
from owl_eval.protocols.trajectory.sources.trajectories import TrajectoriesSource
from owl_eval.runner.api import evaluate
from owl_eval.sources import SourceFormatError

NAN = np.nan


def arrays():
    """2 scenes, 2 predictions, 2 agents, 2 future steps.

    Scene 0: agent 0 counts at both steps, truth (1,0),(2,0); prediction 0 exact, prediction 1 one metre off
    (y + 1) at both steps. Agent 1 counts at step 0 only: truth (0,5); prediction 0 exact, prediction 1 at (0,8).
    Scene 1: agent 0 at both steps, truth (0,0),(0,0); prediction 0 at (3,4) (5 m off), prediction 1 at (0,1)
    (1 m off). Agent 1 never counts (NaN everywhere).
    """
    true = np.full((2, 1, 2, 2, 2), NAN)
    pred = np.full((2, 2, 2, 2, 2), NAN)
    mask = np.zeros((2, 2, 2), bool)
    true[0, 0, 0] = [[1, 0], [2, 0]]
    pred[0, 0, 0] = [[1, 0], [2, 0]]
    pred[0, 1, 0] = [[1, 1], [2, 1]]
    true[0, 0, 1, 0] = [0, 5]
    pred[0, 0, 1, 0] = [0, 5]
    pred[0, 1, 1, 0] = [0, 8]
    mask[0, 0] = True
    mask[0, 1, 0] = True
    true[1, 0, 0] = 0.0
    pred[1, 0, 0] = [3, 4]
    pred[1, 1, 0] = [0, 1]
    mask[1, 0] = True
    # log-probabilities [N_S, N_P + 1, N_A]: columns prediction 0, prediction 1, truth
    log_probs = np.full((2, 3, 2), NAN)
    log_probs[0, :, 0] = [-1.0, -2.0, -1.5]
    log_probs[0, :, 1] = [-3.0, -1.0, -2.0]
    log_probs[1, :, 0] = [-1.0, -2.0, -0.5]
    return {"Path_true": true, "Path_pred": pred, "Pred_steps": mask, "Log_probs": log_probs}


# ADE marginal: per agent the mean over predictions of its mean step error:
#   scene 0 agent 0: (0 + 1) / 2 = 0.5; agent 1: (0 + 3) / 2 = 1.5; scene 1 agent 0: (5 + 1) / 2 = 3.
ADE = (0.5 + 1.5 + 3.0) / 3
MIN_ADE = (0 + 0 + 1) / 3
# joint: per prediction the mean over steps of the RMS over agents counted at that step
#   scene 0: prediction 0 -> 0; prediction 1 -> (sqrt((1 + 9) / 2) + 1) / 2; scene 1: (5 + 1) / 2 = 3.
ADE_JOINT = ((0 + (math.sqrt(5) + 1) / 2) / 2 + 3.0) / 2
# miss (threshold 0.5): scene 1 agent 0's best final error is 1 > 0.5; the others have an exact prediction.
MISS = 1 / 3
# most likely prediction by the given log-probabilities: scene 0 agent 0 -> prediction 0 (error 0),
# agent 1 -> prediction 1 (error 3), scene 1 agent 0 -> prediction 0 (error 5)
ML_ADE = (0 + 3 + 5) / 3


def write(tmp_path, name="preds.npz", compressed=False, drop=(), **change):
    data = {k: v for k, v in arrays().items() if k not in drop} | change
    path = tmp_path / name
    (np.savez_compressed if compressed else np.savez)(path, **data)
    return path


SETTINGS = {"k_values": [20], "miss_threshold": 0.5, "kde": True}


@pytest.mark.parametrize("chunk_size, compressed", [(256, False), (1, False), (1, True)])
def test_hand_computed_table_any_chunk_size(tmp_path, chunk_size, compressed):
    data = TrajectoriesSource(path=str(write(tmp_path, compressed=compressed)), chunk_size=chunk_size).load()
    assert data.record.num_valid_agents == 3 and data.tags["log_probs"] == "Log_probs"
    results = evaluation_for(data.protocol).evaluate(data.record, SETTINGS)
    assert results["ade_marginal"] == pytest.approx(ADE)
    assert results["min_ade_20_marginal"] == pytest.approx(MIN_ADE)
    assert results["ade_joint"] == pytest.approx(ADE_JOINT)
    assert results["miss_rate_marginal"] == pytest.approx(MISS)
    assert results["ml_ade_marginal"] == pytest.approx(ML_ADE)
    assert results["num_agents"] == 3 and results["num_scenes"] == 2


def test_without_log_probs_uses_kde_or_skips_it(tmp_path):
    data = TrajectoriesSource(path=str(write(tmp_path)), log_probs=None).load()
    results = evaluation_for(data.protocol).evaluate(data.record, SETTINGS | {"kde": False})
    assert results["ade_marginal"] == pytest.approx(ADE)
    assert "ml_ade_marginal" not in results


def _broken(true=None, pred=None, mask=None, lp=None):
    a = arrays()
    for key, fn in (("Path_true", true), ("Path_pred", pred), ("Pred_steps", mask), ("Log_probs", lp)):
        if fn is not None:
            a[key] = fn(a[key].copy())
    return a


def _set(arr, index, value):
    arr[index] = value
    return arr


@pytest.mark.parametrize(
    "change, words",
    [
        (dict(drop=("Pred_steps",)), ["array 'Pred_steps' (mask) not found"]),
        (dict(Path_true=arrays()["Path_true"][:, 0]), ["'Path_true' has 4 axes", "[N_S, 1, N_A, N_O, 2]"]),
        (dict(Path_true=np.zeros((2, 1, 3, 2, 2))), ["'Path_true' axis 2 (N_A) has length 3, expected 2"]),
        (dict(Path_pred=np.zeros((2, 2, 2, 2, 3))), ["'Path_pred' axis 4 (x, y) has length 3"]),
        (dict(Pred_steps=np.ones((2, 2, 3), bool)), ["'Pred_steps' axis 2 (N_O) has length 3, expected 2"]),
        (dict(Log_probs=np.zeros((2, 2, 2))), ["'Log_probs' axis 1 (N_P + 1) has length 2, expected 3"]),
        (_broken(true=lambda t: _set(t, (1, 0, 0, 1, 0), NAN)), ["'Path_true' [scene 1, 0, agent 0, step 1]", "NaN"]),
        (
            _broken(pred=lambda p: _set(p, (0, 1, 1, 0, 1), NAN)),
            ["'Path_pred' [scene 0, prediction 1, agent 1, step 0]"],
        ),
        (dict(Pred_steps=np.where(arrays()["Pred_steps"], 2, 0)), ["'Pred_steps' [scene 0, agent 0, step 0] is 2"]),
        (_broken(lp=lambda v: _set(v, (1, 2, 0), NAN)), ["'Log_probs' [scene 1, column 2, agent 0]"]),
        (dict(Path_pred=np.array([None, 1], dtype=object)), ["Python objects"]),
        (
            _broken(pred=lambda p: _set(p, (1, 1, 0, 0, 1), 1e308)),
            ["'Path_pred' [scene 1, prediction 1, agent 0, step 0]", "1e+308", "beyond +-1e+12"],
        ),
        (
            _broken(true=lambda t: _set(t, (0, 0, 1, 0, 0), -2e12)),
            ["'Path_true' [scene 0, 0, agent 1, step 0]", "beyond"],
        ),
        (
            dict(P_true=np.array([[1.0, 0.0], [0.0, 1.0]]), P_pred=np.array([["a", "b"], ["c", "d"]])),
            ["'P_pred'", "expected numbers"],
        ),
    ],
)
def test_broken_arrays_give_one_clear_error(tmp_path, change, words):
    drop = change.pop("drop", ())
    path = write(tmp_path, drop=drop, **change)
    with pytest.raises(SourceFormatError) as info:
        TrajectoriesSource(path=str(path), chunk_size=1).load()
    assert "preds.npz" in str(info.value)
    for w in words:
        assert w in str(info.value)


def test_missing_and_unreadable_files(tmp_path):
    with pytest.raises(SourceFormatError, match="none.npz: trajectories .npz not found"):
        TrajectoriesSource(path=str(tmp_path / "none.npz")).load()
    (tmp_path / "text.npz").write_text("not a zip")
    with pytest.raises(SourceFormatError, match="text.npz: not a readable .npz"):
        TrajectoriesSource(path=str(tmp_path / "text.npz")).load()


def test_evaluate_cli_logs_like_a_live_run(tmp_path, experiment, client):
    path = write(tmp_path)
    values = evaluate(
        [
            "+source=trajectories",
            f"source.path={path}",
            "source.chunk_size=1",
            "metrics.miss_threshold=0.5",
            "metrics.k_values=[2]",
            *experiment["overrides"],
        ],
        output_dir=tmp_path / "out",
    )
    assert values["ade_marginal"] == pytest.approx(ADE)
    exp = client.get_experiment_by_name(experiment["name"])
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.status == "FINISHED" and run.data.tags["source"] == "trajectories"
    assert run.data.metrics["miss_rate_marginal"] == pytest.approx(MISS)
    assert {a.path for a in client.list_artifacts(run.info.run_id, "record")} == {
        "record/trajectory_source.json",  # names the predictions file (not copied) and its SHA-256
        "record/record_checksums.json",
    }


def test_broken_source_creates_no_run(tmp_path, experiment, client):
    path = write(tmp_path, drop=("Path_true",))
    with pytest.raises(SourceFormatError):
        evaluate(["+source=trajectories", f"source.path={path}", *experiment["overrides"]], output_dir=tmp_path / "out")
    exp = client.get_experiment_by_name(experiment["name"])
    assert exp is None or not client.search_runs([exp.experiment_id])


CLASSES = {"P_true": np.array([[1.0, 0.0], [0.0, 1.0]]), "Class_names": np.array(["go", "stop"])}


@pytest.mark.parametrize(
    "p_pred, expected_auc, expected_tnr",
    [
        # Scene 0 is "go" scored 0.8, scene 1 is "stop" scored 0.3 for "go": every positive above every negative.
        ([[0.8, 0.2], [0.3, 0.7]], 1.0, 1.0),
        # Scene 1 ("stop") scored 0.9 for "go": ranked above the true "go" (0.8) in both one-vs-rest AUCs; at the
        # threshold 0.8 that keeps "go" at perfect recall, the negative (0.9) is not rejected: TNR 0.
        ([[0.8, 0.2], [0.9, 0.1]], 0.0, 0.0),
    ],
)
def test_class_outputs_are_scored(tmp_path, p_pred, expected_auc, expected_tnr):
    data = TrajectoriesSource(path=str(write(tmp_path, **CLASSES, P_pred=np.array(p_pred)))).load()
    assert data.record.class_names == ("go", "stop")
    results = evaluation_for(data.protocol).evaluate(data.record, SETTINGS | {"tnr_pr_positive": "go"})
    assert results["auc"] == pytest.approx(expected_auc) and results["tnr_pr"] == pytest.approx(expected_tnr)
    assert "class_ece" in results


def test_without_class_outputs_class_metrics_are_na(tmp_path):
    results = TrajectoriesSource(path=str(write(tmp_path))).load()
    results = evaluation_for(results.protocol).evaluate(results.record, SETTINGS)
    assert "no class outputs" in results.na["auc"]


@pytest.mark.parametrize(
    "change, words",
    [
        ({"P_true": CLASSES["P_true"]}, ["'P_true' is there but 'P_pred' is not"]),
        (
            {"P_true": np.array([[1.0, 1.0], [0.0, 1.0]]), "P_pred": np.array([[0.5, 0.5], [0.5, 0.5]])},
            ["'P_true' scene 0 is not one-hot"],
        ),
        ({"P_true": CLASSES["P_true"], "P_pred": np.array([[0.5, 0.6], [0.5, 0.5]])}, ["'P_pred' scene 0 sums to 1.1"]),
        ({"P_true": CLASSES["P_true"], "P_pred": np.array([[0.5, 0.5]])}, ["'P_pred' has shape (1, 2)", "[2, >=2]"]),
    ],
)
def test_broken_class_outputs_give_one_clear_error(tmp_path, change, words):
    with pytest.raises(SourceFormatError) as info:
        TrajectoriesSource(path=str(write(tmp_path, **change))).load()
    for w in words:
        assert w in str(info.value)


def test_far_but_plausible_coordinates_are_scored(tmp_path):
    # 1e11 m (below the 1e12 bound) is accepted; errors are differences, so the numbers are the same as at 0
    a = arrays()
    shifted = {k: (v + 1e11 if k in ("Path_true", "Path_pred") else v) for k, v in a.items()}
    np.savez(tmp_path / "far.npz", **shifted)
    results = TrajectoriesSource(path=str(tmp_path / "far.npz")).load()
    assert evaluation_for(results.protocol).evaluate(results.record, SETTINGS | {"kde": False})[
        "ade_marginal"
    ] == pytest.approx(ADE, abs=1e-4)


def test_corrupted_member_is_one_error_naming_the_member(tmp_path):
    from tests.metrics.test_traj_npz import _corrupt

    path = write(tmp_path)
    _corrupt(path, "Path_pred.npy")
    with pytest.raises(SourceFormatError, match=r"preds.npz: member 'Path_pred.npy' is corrupted"):
        TrajectoriesSource(path=str(path)).load()


@pytest.mark.parametrize(
    "option, value, words",
    [
        ("chunk_size", 2.5, "source.chunk_size: expected an integer"),
        ("chunk_size", -1, "source.chunk_size: expected an integer >= 1"),
        ("seed", -3, "source.seed: expected an integer >= 0"),
        ("true_key", 5, "source.true_key: expected a non-empty string"),
    ],
)
def test_options_are_typed(tmp_path, option, value, words):
    from owl_eval.errors import ConfigError

    with pytest.raises(ConfigError, match=words.replace("(", r"\(")):
        TrajectoriesSource(path=str(write(tmp_path)), **{option: value}).load()
