"""The torch and Stable-Baselines3 adapters end to end from YAML alone: the shipped configs run by the real command
line (in-process) into the session's SQLite store, read back with MlflowClient and checked against the same
computation written here by hand: a torch training loop with the same seeds (OND p_class, the continual accuracy
matrix with finetune and with EWC), and the saved SB3 policies stepped in gymnasium with the evaluation seeds."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.inprocess import run_module
from tests.runner.test_adapters_end_to_end import RL_SMALL, _cli, _config, _only_run, _runs

torch = pytest.importorskip("torch", reason="the torch adapters need torch: pip install -e '.[torch]'")

SEED_HIGH = 2**31 - 1
OND_SMALL = ["protocol.num_trials=2", "protocol.trials_without_novelty=1", "agent.epochs=5"]


def _mlp(hidden: int, out: int):
    """The shipped configs' network, built here: LazyLinear(hidden), ReLU, Linear(hidden, out), probed once on two
    rows of zeros in eval mode as the adapters do (which sizes the lazy layer)."""
    net = torch.nn.Sequential(torch.nn.LazyLinear(hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, out))
    net.eval()
    with torch.no_grad():
        net(torch.zeros(2, 64))
    return net


def _train(net, opt, X, y, epochs: int, batch_size: int = 32, penalty=None) -> None:
    net.train()
    X, y = torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y, dtype=torch.long)
    for _ in range(epochs):
        order = torch.randperm(len(y))
        for start in range(0, len(y), batch_size):
            rows = order[start : start + batch_size]
            loss = torch.nn.functional.cross_entropy(net(X[rows]), y[rows])
            if penalty is not None:
                loss = loss + penalty()
            opt.zero_grad()
            loss.backward()
            opt.step()


def _logits(net, X) -> np.ndarray:
    net.eval()
    with torch.no_grad():
        return net(torch.as_tensor(X, dtype=torch.float32)).double().numpy()


@pytest.fixture()
def one_thread():
    """The adapters run torch on one thread (agent.threads: 1); the hand loops do too, for the same sums."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# ------------------------------------------------------------------------------------------------- OND
@pytest.mark.slow
def test_ond_torch_mlp_on_digits_equals_a_hand_written_loop(experiment, client, tmp_path, one_thread):
    """agent=ond/torch as shipped (5 epochs): p_class equals [p_unknown, (1 - p_unknown) softmax] of the same network
    trained here, p_unknown the sigmoid of the max-softmax score against the held-out rows' 95 % quantile."""
    from scipy.special import expit, softmax

    from owl_eval.datasets.classification import DigitsDomain
    from owl_eval.protocols.ond.record import OndRecord
    from owl_eval.protocols.ond.trials import plan_trials, split_classes

    _cli(["+experiment=ond_system_detection", "agent=ond/torch", *OND_SMALL, *experiment["overrides"]], tmp_path)
    run = _only_run(client, experiment["name"])
    assert run.data.params["agent._target_"] == "owl_eval.protocols.ond.agents.torch_model.TorchNoveltyAgent"
    assert run.data.params["agent.module._target_"] == "torch.nn.Sequential"
    record = OndRecord.load(client.download_artifacts(run.info.run_id, "record/ond_record.npz", str(tmp_path)))
    protocol = _config(client, run, tmp_path)["protocol"]
    K = protocol["known_classes"]
    data = DigitsDomain().load()
    rng = np.random.default_rng(int(run.data.tags["seed"]))
    split = split_classes(data, known_classes=K, train_fraction=protocol["train_fraction"], rng=rng)
    plans = plan_trials(
        data,
        split,
        **{k: protocol[k] for k in ("num_trials", "trials_without_novelty", "pre_novelty", "post_novelty")},
        novel_fraction=protocol["novel_fraction"],
        novel_classes_per_trial=protocol["novel_classes_per_trial"],
        rng=rng,
    )
    X = data.features[split.train_rows]
    y = np.searchsorted(split.known_classes, data.labels[split.train_rows]) + 1
    # the agent's generator (the first of agent and baseline), its held-out rows (a quarter of each class), its seed
    agent_rng = np.random.default_rng(rng.bit_generator.seed_seq.spawn(2)[0])
    held = np.zeros(len(y), dtype=bool)
    for c in range(1, K + 1):
        rows = agent_rng.permutation(np.flatnonzero(y == c))
        held[rows[: int(np.floor(0.25 * len(rows)))]] = True
    seed = int(agent_rng.integers(SEED_HIGH))
    mean, std = X[~held].mean(0), X[~held].std(0)
    std[std == 0] = 1.0
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        net = _mlp(64, K)
        _train(net, torch.optim.Adam(net.parameters(), lr=0.001), (X[~held] - mean) / std, y[~held] - 1, epochs=5)
    held_scores = 1.0 - softmax(_logits(net, (X[held] - mean) / std), axis=1).max(1)
    threshold, scale = np.quantile(held_scores, 0.95), np.std(held_scores)
    for plan, trial in zip(plans, record.trials):
        np.testing.assert_array_equal(plan.gt_class, trial.gt_class)
        proba = softmax(_logits(net, (data.features[plan.sample_rows] - mean) / std), axis=1)
        p_unknown = expit(8.0 * (1.0 - proba.max(1) - threshold) / scale)
        np.testing.assert_allclose(trial.p_class[:, 0], p_unknown, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(trial.p_class[:, 1:], (1 - p_unknown)[:, None] * proba, rtol=1e-9, atol=1e-12)
    assert run.data.metrics["detail/top1_pre"] > 0.8


@pytest.mark.slow
def test_ond_torch_wrong_output_width_is_one_line(experiment, client, tmp_path):
    proc = run_module(
        "owl_eval",
        ["+experiment=ond_system_detection", "agent=ond/torch", "agent.module._args_.2.out_features=4", *OND_SMALL]
        + experiment["overrides"],
        cwd=tmp_path,
    )
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert lines[0] == (
        "error: agent.module (torch.nn.modules.container.Sequential) outputs shape (2, 4) for a batch of shape "
        "(2, 64), expected (2, 6): one logit per known class (K = 6); make its last layer's out_features 6"
    )


# ------------------------------------------------------------------------------------------- continual
def _fisher(net, X, y) -> list:
    """The empirical Fisher diagonal: the mean over samples of the squared gradient of log p(y|x)."""
    params = list(net.parameters())
    total = [torch.zeros_like(p) for p in params]
    net.eval()
    for x_row, label in zip(torch.as_tensor(X, dtype=torch.float32), torch.as_tensor(y)):
        grads = torch.autograd.grad(torch.log_softmax(net(x_row[None]), 1)[0, label], params)
        for t, g in zip(total, grads):
            t += g**2
    return [t / len(y) for t in total]


@pytest.mark.parametrize("strategy", ["finetune", "ewc"])
@pytest.mark.slow
def test_continual_torch_on_split_digits_equals_a_hand_written_loop(strategy, experiment, client, tmp_path, one_thread):
    """agent=continual/torch as shipped (2 epochs): the logged accuracy matrix and the accuracies before training
    equal those of the same loop written here, with EWC's penalty and Fisher written here too."""
    from owl_eval.protocols.continual.domains import SplitDigits
    from owl_eval.protocols.continual.record import ContinualRecord

    extra = ["agent.ewc.lambda=1000", "agent.ewc.fisher_samples=null"] if strategy == "ewc" else []
    args = [
        "+experiment=continual_split_digits",
        "agent=continual/torch",
        f"agent.strategy={strategy}",
        "agent.epochs=2",
    ]
    _cli([*args, *extra, *experiment["overrides"]], tmp_path)
    run = _only_run(client, experiment["name"])
    assert run.data.params["agent.strategy"] == strategy
    record = ContinualRecord.load(
        client.download_artifacts(run.info.run_id, "record/continual_record.npz", str(tmp_path))
    )
    domain_cfg = _config(client, run, tmp_path)["domain"]
    domain = SplitDigits(**{k: v for k, v in domain_cfg.items() if k != "_target_"})
    data_rng, agent_rng = np.random.default_rng(int(run.data.tags["seed"])).spawn(2)
    tasks = domain.tasks(data_rng)
    _, torch_rng = agent_rng.spawn(2)

    def accuracies(net):
        return [np.mean(np.argmax(_logits(net, t.X_test), 1) == t.y_test) for t in tasks]

    anchors: list = []

    def penalty():
        total = 0.0
        for fisher, anchor in anchors:
            for p, f, a in zip(net.parameters(), fisher, anchor):
                total = total + (f * (p - a) ** 2).sum()
        return 500.0 * total  # lambda / 2

    with torch.random.fork_rng():
        torch.manual_seed(int(torch_rng.integers(SEED_HIGH)))
        net = _mlp(64, 10)
        opt = torch.optim.Adam(net.parameters(), lr=0.001)
        before = accuracies(net)
        expected = []
        for task in tasks:
            _train(net, opt, task.X_train, task.y_train, epochs=2, penalty=penalty if anchors else None)
            if strategy == "ewc":
                fisher = _fisher(net, task.X_train, task.y_train)
                anchors.append((fisher, [p.detach().clone() for p in net.parameters()]))
            expected.append(accuracies(net))
    np.testing.assert_array_equal(record.init_accuracy, before)
    np.testing.assert_array_equal(record.accuracy, np.array(expected))
    assert run.data.metrics["average_accuracy"] == pytest.approx(np.mean(expected[-1]), abs=1e-12)


# ------------------------------------------------------------------------------------------ lifelong RL
SB3_SMALL = [
    *RL_SMALL,
    "agent.timesteps_per_episode=32",
    "agent.algo_kwargs.n_steps=32",
    "+agent.algo_kwargs.batch_size=32",
    "+agent.algo_kwargs.n_epochs=2",
]
VARIANTS = {
    "cartpole_default": {},
    "cartpole_reversed_force": {"force_mag": -10.0},
    "cartpole_long_pole": {"length": 2.0},
}


def _rollout(model, variant_params: dict, seed: int) -> float:
    """One evaluation episode of a saved SB3 model, stepped here in gymnasium's CartPoleEnv (200 steps at most)."""
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv

    env = CartPoleEnv()
    for key, value in variant_params.items():
        setattr(env, key, float(value))
    env.total_mass = env.masspole + env.masscart
    env.polemass_length = env.masspole * env.length
    obs, _ = env.reset(seed=seed)
    total = 0.0
    for _ in range(200):
        action, _ = model.predict(obs, deterministic=True)
        obs, reward, terminated, _, _ = env.step(int(action))
        total += float(reward)
        if terminated:
            break
    return total


@pytest.mark.slow
def test_ppo_on_the_cartpole_syllabus_replays_in_gymnasium(experiment, client, tmp_path, one_thread):
    """agent=lifelong_rl/sb3 (PPO, 32-step rollouts): every evaluation episode's logged return is the return of the
    model saved after the preceding learning block, stepped here in gymnasium with the same evaluation seed; a second
    run with the same seed logs the same returns (learning blocks included)."""
    pytest.importorskip("stable_baselines3", reason="the sb3 adapter needs stable-baselines3: pip install -e '.[sb3]'")
    from stable_baselines3 import PPO

    from owl_eval.formats.l2logger import read_log

    logs = []
    for attempt in range(2):
        _cli(
            [
                "+experiment=lifelong_rl_cartpole_syllabus",
                "agent=lifelong_rl/sb3",
                *SB3_SMALL,
                f"agent.save_dir={tmp_path / f'models{attempt}'}",
                f"protocol.ste.dir={tmp_path / f'ste{attempt}'}",
                *experiment["overrides"],
            ],
            tmp_path,
        )
        run = _runs(client, experiment["name"])[attempt]
        assert run.info.status == "FINISHED"
        local = Path(client.download_artifacts(run.info.run_id, "record", str(tmp_path / f"record{attempt}")))
        logs.append(read_log(local / "l2log"))
    assert run.data.params["agent.algo"] == "PPO"
    for column in ("block_num", "task_name", "reward", "episode_step_count"):
        np.testing.assert_array_equal(logs[0][column], logs[1][column])
    log, models = logs[0], tmp_path / "models0" / "run-0"  # the syllabus's; the 3 STE runs' in run-1..3
    eval_seed = int(run.data.params["protocol.eval_seed"])
    saved = sorted(models.glob("block-*.zip"))
    assert sorted(p.name for p in models.parent.iterdir()) == ["run-0", "run-1", "run-2", "run-3"]
    assert [p.name for p in saved] == [
        "block-000-cartpole_default.zip",
        "block-004-cartpole_reversed_force.zip",
        "block-008-cartpole_long_pole.zip",
    ]
    checked = 0
    for block in np.unique(log["block_num"]):
        rows = np.flatnonzero(log["block_num"] == block)
        if log["block_type"][rows[0]] != "test":
            continue
        latest = max(p for p in saved if int(p.name.split("-")[1]) < block)
        model = PPO.load(latest, device="cpu")
        for i, row in enumerate(rows):
            assert log["reward"][row] == _rollout(model, VARIANTS[str(log["task_name"][row])], eval_seed + i)
            checked += 1
    assert checked == 3 * 3 * 2  # 3 evaluation blocks after each of 3 learning blocks, 2 episodes each
