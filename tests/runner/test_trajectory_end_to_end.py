"""Trajectory experiments end to end into the session's SQLite MLflow store, read back with MlflowClient."""

from __future__ import annotations

import numpy as np
import pytest

from owl_eval.evaluation import evaluation_for
from owl_eval.metrics.keys import MetricKey
from owl_eval.runner.api import run
from owl_eval.tracking.keys import mlflow_key

TABLE = [
    "ade_marginal",
    "fde_marginal",
    "min_ade_20_marginal",
    "min_fde_20_marginal",
    "miss_rate_marginal",
    "detail/ade_joint",
    "detail/min_fde_20_joint",
    "collision_rate_marginal",
    "detail/auc",
    "detail/class_ece",
    "detail/num_scenes",
]


def _only_run(client, name):
    exp = client.get_experiment_by_name(name)
    runs = client.search_runs([exp.experiment_id])
    assert len(runs) == 1
    return runs[0]


def _check_run(client, r, tmp_path, n_o=12):
    assert r.info.status == "FINISHED"
    for key in TABLE:
        assert key in r.data.metrics, key
    history = client.get_metric_history(r.info.run_id, "detail/displacement_by_step_marginal")
    assert sorted(m.step for m in history) == list(range(1, n_o + 1))
    artifacts = {a.path for folder in ("plots", "record") for a in client.list_artifacts(r.info.run_id, folder)}
    for path in (
        "plots/example_scenes.png",
        "plots/error_vs_horizon.png",
        "plots/kde_calibration.png",
        "plots/class_reliability.png",
        "record/trajectory_record.npz",
    ):
        assert path in artifacts, path
    local = client.download_artifacts(r.info.run_id, "record/trajectory_record.npz", str(tmp_path))
    with np.load(local, allow_pickle=False) as d:
        true, pred, steps = d["Path_true"][:, 0], d["Path_pred"], d["Pred_steps"]
    # plain recount of the logged marginal ADE: per agent, mean over predictions of its mean error over valid steps
    err = np.linalg.norm(np.nan_to_num(pred) - np.nan_to_num(true)[:, None], axis=-1)
    total, agents = 0.0, 0
    for s in range(steps.shape[0]):
        for a in range(steps.shape[1]):
            n = steps[s, a].sum()
            if n:
                total += err[s, :, a][:, steps[s, a]].sum() / n / pred.shape[1]
                agents += 1
    assert r.data.metrics["ade_marginal"] == pytest.approx(total / agents, rel=1e-9)
    # by-step series point 12 = mean final-step error over agents valid at step 12
    last = steps[..., -1]
    assert history[-1].value == pytest.approx(err[..., -1].mean(1)[last].mean(), rel=1e-9)


def test_crowd_experiment_logs_the_table(experiment, client, tmp_path):
    returned = run(
        [
            "+experiment=trajectory_crowd",
            *experiment["overrides"],
            "figures=true",
            "domain.num_train_scenes=40",
            "domain.num_test_scenes=12",
        ],
        output_dir=tmp_path,
    )
    r = _only_run(client, experiment["name"])
    _check_run(client, r, tmp_path)
    assert r.data.metrics["min_ade_20_marginal"] == pytest.approx(returned["min_ade_20_marginal"])
    assert r.data.metrics["detail/num_scenes"] == 12
    tags = r.data.tags
    assert (tags["protocol"], tags["domain"], tags["agent"]) == ("trajectory", "crowd_sim", "trajectory/knn_futures")
    assert r.data.params["protocol.num_preds"] == "100"
    _assert_no_na_kde_metric(r)


KDE_METRICS = [
    f"{name}_{kind}"
    for name in ("kde_nll", "kde_ece", "ml_ade", "ml_fde", "brier_min_fde")
    for kind in ("marginal", "joint")
]


def _assert_no_na_kde_metric(r):
    """The showcase is complete: 100 predictions > 24 marginal and 72 joint dimensions (3 agents at most)."""
    assert [t for t in r.data.tags if t.startswith("na.")] == []
    for name in KDE_METRICS:
        assert np.isfinite(r.data.metrics[mlflow_key(MetricKey(name), "trajectory")]), name
    assert r.data.metrics["detail/kde_nll_na_count"] == 0


@pytest.mark.slow
def test_default_crowd_experiment_reports_every_kde_metric(experiment, client, tmp_path):
    run(["+experiment=trajectory_crowd", *experiment["overrides"]], output_dir=tmp_path)
    _assert_no_na_kde_metric(_only_run(client, experiment["name"]))


@pytest.mark.slow
def test_eth_ucy_experiment_logs_the_table(experiment, client, tmp_path, shared_dir):
    run(
        [
            "+experiment=trajectory_eth_ucy",
            *experiment["overrides"],
            f"domain.path={shared_dir / 'data' / 'eth_ucy'}",
            "domain.test_group=hotel",
            "domain.stride=20",
            "agent=trajectory/cv_noise",
            "protocol.num_preds=30",
            "figures=true",
        ],
        output_dir=tmp_path,
    )
    r = _only_run(client, experiment["name"])
    _check_run(client, r, tmp_path)
    assert r.data.params["domain.test_group"] == "hotel"
    assert r.data.tags["windows"] == "cvm"  # which pedestrians are scored (domain.windows)
    assert "kde_nll_marginal" in r.data.metrics  # 30 noisy predictions > 24 dimensions: the KDE is defined


def test_eth_ucy_without_path_names_the_key(experiment, tmp_path):
    with pytest.raises(Exception, match="domain.path is not set"):
        run(["+experiment=trajectory_eth_ucy", *experiment["overrides"], "figures=false"], output_dir=tmp_path)


@pytest.mark.slow
def test_fitted_predictor_beats_constant_velocity_on_eth_ucy(shared_dir):
    from owl_eval.protocols.trajectory.agents.constant_velocity import ConstantVelocityPredictor
    from owl_eval.protocols.trajectory.agents.knn_futures import KnnFuturesPredictor
    from owl_eval.protocols.trajectory.domains.eth_ucy import EthUcyDomain
    from owl_eval.protocols.trajectory.driver import TrajectoryDriver

    dom = EthUcyDomain(str(shared_dir / "data" / "eth_ucy"), test_group="zara1", stride=2)
    scores = {}
    for name, agent in (("cv", ConstantVelocityPredictor()), ("knn", KnnFuturesPredictor())):
        record = TrajectoryDriver(num_preds=20).run(
            domain=dom, agent=agent, rng=np.random.default_rng(0), progress=False
        )
        scores[name] = evaluation_for("trajectory").evaluate(record, {"kde": False}).values["min_ade_20_marginal"]
    assert scores["knn"] < 0.8 * scores["cv"], scores
