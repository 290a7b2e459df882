"""The adapter agents end to end from YAML alone: a user's scikit-learn estimator, function, General-Framework
model or policy named in an agent config, run by the real command line (in-process, tests/inprocess.py) into the
session's SQLite MLflow store and read back with MlflowClient; each run's numbers checked against values computed
here independently (scikit-learn called directly, gymnasium stepped directly, the shipped agents' runs, the
constant-velocity paper's reference numbers)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from tests.fixtures.searchpath import TEST_AGENTS
from tests.inprocess import run_module

PROJECT_ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow  # a run per adapter; tests/agents/test_adapters.py checks the adapters in the fast set


def _cli(args: list[str], tmp_path: Path):
    proc = run_module("owl_eval", [*args, "figures=false"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def _runs(client, name):
    exp = client.get_experiment_by_name(name)
    return client.search_runs([exp.experiment_id], order_by=["attributes.start_time ASC"])


def _only_run(client, name):
    (run,) = _runs(client, name)
    assert run.info.status == "FINISHED"
    return run


def _config(client, run, tmp_path) -> dict:
    return yaml.safe_load(
        Path(client.download_artifacts(run.info.run_id, "config/config.yaml", str(tmp_path))).read_text()
    )


# ------------------------------------------------------------------------------------------------- OND
OND_SMALL = ["protocol.num_trials=2", "protocol.trials_without_novelty=1", "agent.novelty.n_estimators=25"]


def test_ond_sklearn_pipeline_with_isolation_forest(experiment, client, tmp_path):
    """agent=ond/sklearn as shipped: StandardScaler + LogisticRegression, IsolationForest novelty. The known-class
    scores are the pipeline's own probabilities, fitted here with scikit-learn on the same training rows, and the
    logged top-1 before novelty is that pipeline's accuracy on the same samples, less the ones the agent calls
    unknown (its p_unknown column wins)."""
    from hydra.utils import instantiate
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from owl_eval.datasets.classification import DigitsDomain
    from owl_eval.protocols.ond.record import OndRecord
    from owl_eval.protocols.ond.trials import plan_trials, split_classes

    _cli(["+experiment=ond_system_detection", "agent=ond/sklearn", *OND_SMALL, *experiment["overrides"]], tmp_path)
    run = _only_run(client, experiment["name"])
    params, metrics = run.data.params, run.data.metrics
    assert params["agent._target_"] == "owl_eval.protocols.ond.agents.sklearn_model.SklearnNoveltyAgent"
    assert params["agent.classifier._target_"] == "sklearn.pipeline.make_pipeline"
    assert params["agent.novelty._target_"] == "sklearn.ensemble.IsolationForest"
    for key in ("top1", "detail/top1_pre", "auroc_novel", "baseline/top1"):
        assert key in metrics, key
    record = OndRecord.load(client.download_artifacts(run.info.run_id, "record/ond_record.npz", str(tmp_path)))

    # the run's split and trials, drawn again from the seed as the driver draws them
    config = _config(client, run, tmp_path)
    protocol = config["protocol"]
    data = DigitsDomain().load()
    rng = np.random.default_rng(int(run.data.tags["seed"]))
    split = split_classes(
        data, known_classes=protocol["known_classes"], train_fraction=protocol["train_fraction"], rng=rng
    )
    plans = plan_trials(
        data,
        split,
        **{k: protocol[k] for k in ("num_trials", "trials_without_novelty", "pre_novelty", "post_novelty")},
        novel_fraction=protocol["novel_fraction"],
        novel_classes_per_trial=protocol["novel_classes_per_trial"],
        rng=rng,
    )
    X_train = data.features[split.train_rows]
    y_train = np.searchsorted(split.known_classes, data.labels[split.train_rows]) + 1
    # which training rows the agent held out for calibration (its generator: the first of the run's two children)
    agent = instantiate(config["agent"], _convert_="all")
    agent_rng = np.random.default_rng(rng.bit_generator.seed_seq.spawn(2)[0])
    agent.fit(X_train, y_train, num_known=protocol["known_classes"], rng=agent_rng)
    fit_rows = ~agent.held_out
    assert 0.2 < agent.held_out.mean() < 0.3
    pipe = make_pipeline(StandardScaler(), LogisticRegression(C=0.1, max_iter=1000))
    pipe.fit(X_train[fit_rows], y_train[fit_rows])

    per_trial = []
    for plan, trial in zip(plans, record.trials):
        np.testing.assert_array_equal(plan.gt_class, trial.gt_class)
        X = data.features[plan.sample_rows]
        # p_class = [p_unknown, (1 - p_unknown) * the pipeline's probabilities]
        np.testing.assert_allclose(
            trial.p_class[:, 1:], (1.0 - trial.p_class[:, :1]) * pipe.predict_proba(X), rtol=1e-9, atol=1e-12
        )
        pre = slice(0, plan.red_light if plan.red_light is not None else len(X))
        correct = pipe.predict(X[pre]) == trial.gt_class[pre]
        unknown_wins = trial.p_class[pre, 0] >= trial.p_class[pre, 1:].max(1)  # ties go to the lower column
        per_trial.append(np.mean(correct & ~unknown_wins))
        assert np.mean(correct) >= per_trial[-1]
    assert metrics["detail/top1_pre"] == pytest.approx(np.mean(per_trial), abs=1e-12)
    assert 0.85 < metrics["detail/top1_pre"] <= 1.0


def test_ond_sklearn_refuses_a_classifier_without_probabilities(experiment, client, tmp_path):
    proc = run_module(
        "owl_eval",
        [
            "+experiment=ond_system_detection",
            "agent=ond/sklearn",
            "~agent.classifier",
            "+agent.classifier._target_=sklearn.svm.SVC",
            *experiment["overrides"],
        ],
        cwd=tmp_path,
    )
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: agent.classifier (sklearn.svm._classes.SVC) has no predict_proba() method")
    assert "CalibratedClassifierCV" in lines[0] and "Traceback" not in proc.stdout + proc.stderr
    exp = client.get_experiment_by_name(experiment["name"])  # refused before any run exists
    assert exp is None or not client.search_runs([exp.experiment_id])


# ------------------------------------------------------------------------------------------- continual
def test_continual_mlp_partial_fit_on_split_digits(experiment, client, tmp_path):
    """An MLPClassifier trained with partial_fit (3 epochs, a 100-sample reservoir): the logged accuracy matrix
    equals the one of the same loop written here with scikit-learn directly."""
    from sklearn.neural_network import MLPClassifier

    from owl_eval.protocols.continual.agents.replay import ReservoirBuffer
    from owl_eval.protocols.continual.domains import SplitDigits
    from owl_eval.protocols.continual.record import ContinualRecord

    _cli(
        ["+experiment=continual_split_digits", TEST_AGENTS, "agent=continual/sklearn_mlp", *experiment["overrides"]],
        tmp_path,
    )
    run = _only_run(client, experiment["name"])
    assert run.data.params["agent.estimator._target_"] == "sklearn.neural_network.MLPClassifier"
    record = ContinualRecord.load(
        client.download_artifacts(run.info.run_id, "record/continual_record.npz", str(tmp_path))
    )
    # the same tasks and the learner's generators, drawn from the seed as driver and learner draw them
    domain_cfg = _config(client, run, tmp_path)["domain"]
    domain = SplitDigits(**{k: v for k, v in domain_cfg.items() if k != "_target_"})
    data_rng, agent_rng = np.random.default_rng(int(run.data.tags["seed"])).spawn(2)
    tasks = domain.tasks(data_rng)
    shuffle_rng, _, model_rng = agent_rng.spawn(3)
    model = MLPClassifier(
        hidden_layer_sizes=(32,), learning_rate_init=0.01, random_state=int(model_rng.integers(2**31 - 1))
    )
    buffer = ReservoirBuffer(100, tasks[0].X_train.shape[1])
    expected = []
    for task in tasks:
        X = np.concatenate([task.X_train, buffer.X[: buffer.size]])
        y = np.concatenate([task.y_train, buffer.y[: buffer.size]])
        for epoch in range(3):
            order = shuffle_rng.permutation(len(y))
            if task.task_id == 0 and epoch == 0:
                model.partial_fit(X[order], y[order], classes=np.arange(10))
            else:
                model.partial_fit(X[order], y[order])
        buffer.add(task.X_train, task.y_train, shuffle_rng)
        expected.append([np.mean(model.predict(t.X_test) == t.y_test) for t in tasks])
    np.testing.assert_array_equal(record.accuracy, np.array(expected))
    assert run.data.metrics["average_accuracy"] == pytest.approx(np.mean(expected[-1]), abs=1e-12)


# ------------------------------------------------------------------------------------------ trajectory
CROWD_SMALL = ["domain.num_train_scenes=10", "domain.num_test_scenes=8", "protocol.num_preds=1", "metrics.k_values=[1]"]


def test_trajectory_function_and_model_template_equal_the_shipped_constant_velocity(experiment, client, tmp_path):
    """The same crowd scenes predicted by the shipped constant-velocity agent, by a user's plain function and by a
    user's General-Framework model: the same ADE/FDE, and the function's futures are the hand loop's."""
    from tests.fixtures.agents.trajectory.callables import constant_velocity

    for agent in ("trajectory/constant_velocity", "trajectory/cv_function", "trajectory/cv_template"):
        _cli(
            ["+experiment=trajectory_crowd", TEST_AGENTS, f"agent={agent}", *CROWD_SMALL, *experiment["overrides"]],
            tmp_path,
        )
    shipped, function, template = _runs(client, experiment["name"])
    assert (
        function.data.params["agent.predictor._target_"]
        == "tests.fixtures.agents.trajectory.callables.constant_velocity"
    )
    for run in (function, template):
        assert run.info.status == "FINISHED"
        for key in ("ade_marginal", "fde_marginal", "min_ade_1_marginal", "collision_rate_marginal"):
            assert run.data.metrics[key] == pytest.approx(shipped.data.metrics[key], rel=1e-12), key
    with np.load(client.download_artifacts(function.info.run_id, "record/trajectory_record.npz", str(tmp_path))) as d:
        history, pred, steps = d["Path_history"], d["Path_pred"], d["Pred_steps"]
    mask = np.isfinite(history[:, :, -1]).all(-1)
    loop = constant_velocity(history, mask, num_steps=pred.shape[-2])  # [S, N_A, N_O, 2]
    np.testing.assert_allclose(pred[:, 0][steps], loop[steps], rtol=1e-12)


def test_trajectory_function_on_eth_ucy_hotel_gives_the_reference_ade(experiment, client, tmp_path, shared_dir):
    """A plain function on ETH/UCY hotel (the cvm windows): the constant-velocity paper's own ADE/FDE
    (tests/domains/test_cvm_reference.py)."""
    from tests.domains.test_cvm_reference import CVM_REFERENCE

    _cli(
        [
            "+experiment=trajectory_eth_ucy",
            TEST_AGENTS,
            "agent=trajectory/cv_function",
            f"domain.path={shared_dir / 'data' / 'eth_ucy'}",
            "domain.test_group=hotel",
            "protocol.num_preds=1",
            "metrics.k_values=[1]",
            "metrics.kde=false",
            "tracking.log_record=false",
            *experiment["overrides"],
        ],
        tmp_path,
    )
    run = _only_run(client, experiment["name"])
    count, ade, fde = CVM_REFERENCE["hotel"]
    assert run.data.metrics["detail/num_agents"] == count
    assert run.data.metrics["ade_marginal"] == pytest.approx(ade, rel=1e-6)
    assert run.data.metrics["fde_marginal"] == pytest.approx(fde, rel=1e-6)


def test_trajectory_complex_output_stops_the_run_with_one_line(experiment, client, tmp_path):
    proc = run_module(
        "owl_eval",
        [
            "+experiment=trajectory_crowd",
            TEST_AGENTS,
            "agent=trajectory/complex_output",
            *CROWD_SMALL,
            *experiment["overrides"],
        ],
        cwd=tmp_path,
    )
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert "dtype complex128 (complex numbers), expected real numbers" in lines[0] and "as_complex" in lines[0]
    assert _runs(client, experiment["name"])[0].info.status == "FAILED"


# ------------------------------------------------------------------------------------------ lifelong RL
RL_SMALL = [
    "protocol.syllabus.generate.train_episodes=3",
    "protocol.syllabus.generate.test_episodes=2",
    "protocol.syllabus.generate.cycles=1",
    "protocol.ste.episodes=2",
]


def _balanced_return(variant_params: dict, seed: int) -> float:
    """The episode return of the balancing rule, stepped here in gymnasium's CartPoleEnv (200 steps at most)."""
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv

    from tests.fixtures.agents.lifelong_rl.policies import balance

    env = CartPoleEnv()
    for key, value in variant_params.items():
        setattr(env, key, float(value))
    env.total_mass = env.masspole + env.masscart
    env.polemass_length = env.masspole * env.length
    obs, _ = env.reset(seed=seed)
    total = 0.0
    for _ in range(200):
        obs, reward, terminated, _, _ = env.step(balance(obs))
        total += float(reward)
        if terminated:
            break
    return total


@pytest.mark.parametrize("agent", ["lifelong_rl/policy", "lifelong_rl/sb3_style"])
def test_policy_on_the_cartpole_syllabus(agent, experiment, client, tmp_path):
    """The shipped example function and an SB3-style predict object (whose state must be reset at every episode
    start): each evaluation episode's return is the rule's return stepped here in gymnasium with the same seed."""
    pytest.importorskip("gymnasium")
    from owl_eval.formats.l2logger import read_log

    _cli(
        [
            "+experiment=lifelong_rl_cartpole_syllabus",
            TEST_AGENTS,
            f"agent={agent}",
            *RL_SMALL,
            f"protocol.ste.dir={tmp_path / 'ste'}",
            *experiment["overrides"],
        ],
        tmp_path,
    )
    run = _only_run(client, experiment["name"])
    local = Path(client.download_artifacts(run.info.run_id, "record", str(tmp_path / "record")))
    log = read_log(local / "l2log")
    variants = {
        "cartpole_default": {},
        "cartpole_reversed_force": {"force_mag": -10.0},
        "cartpole_long_pole": {"length": 2.0},
    }
    eval_seed = int(run.data.params["protocol.eval_seed"])
    checked = 0
    for block in np.unique(log["block_num"]):
        rows = np.flatnonzero(log["block_num"] == block)
        if log["block_type"][rows[0]] != "test":
            continue
        for i, row in enumerate(rows):
            assert log["reward"][row] == _balanced_return(variants[str(log["task_name"][row])], eval_seed + i)
            checked += 1
    assert checked == 3 * 3 * 2  # 3 evaluation blocks after each of 3 training blocks, 2 episodes each
    assert run.data.tags["agent"] == agent


def test_masked_action_stops_the_run_with_one_line(experiment, client, tmp_path):
    pytest.importorskip("gymnasium")
    proc = run_module(
        "owl_eval",
        [
            "+experiment=lifelong_rl_cartpole_syllabus",
            TEST_AGENTS,
            "agent=lifelong_rl/masked_policy",
            *RL_SMALL,
            f"protocol.ste.dir={tmp_path / 'ste'}",
            *experiment["overrides"],
        ],
        cwd=tmp_path,
    )
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert "block 0 (train cartpole_default), episode 0, step 0" in lines[0] and "masked array" in lines[0]
