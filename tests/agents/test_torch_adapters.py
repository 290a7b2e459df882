"""The torch and Stable-Baselines3 adapters on their own: a bad object or setting is one ConfigError naming the key
before any run; a module of the wrong output width is one error naming agent.module, the expected and the actual
shape; the same seed gives the same numbers and the process's global generators are left as they were."""

from __future__ import annotations

import random

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch adapters need torch: pip install -e '.[torch]'")

from owl_eval.datasets.classification import DigitsDomain  # noqa: E402
from owl_eval.errors import ConfigError  # noqa: E402
from owl_eval.protocols.continual.agents.torch_model import TorchContinualLearner  # noqa: E402
from owl_eval.protocols.continual.domains import SplitDigits  # noqa: E402
from owl_eval.protocols.continual.driver import ContinualDriver  # noqa: E402
from owl_eval.protocols.ond.agents.torch_model import TorchNoveltyAgent  # noqa: E402
from owl_eval.protocols.ond.driver import OndDriver  # noqa: E402

SMALL_OND = {"num_trials": 2, "trials_without_novelty": 1, "pre_novelty": 20, "post_novelty": 40}


def mlp(out: int, hidden: int = 16) -> dict:
    """The config node of a small MLP, as the YAML gives it to the adapter (_recursive_: false)."""
    return {
        "_target_": "torch.nn.Sequential",
        "_args_": [
            {"_target_": "torch.nn.LazyLinear", "out_features": hidden},
            {"_target_": "torch.nn.ReLU"},
            {"_target_": "torch.nn.Linear", "in_features": hidden, "out_features": out},
        ],
    }


ADAM = {"_target_": "torch.optim.Adam", "_partial_": True, "lr": 0.01}


def _states():
    return random.getstate(), np.random.get_state()[1].copy(), torch.get_rng_state().clone(), torch.get_num_threads()


def _same_states(a, b) -> bool:
    return a[0] == b[0] and np.array_equal(a[1], b[1]) and torch.equal(a[2], b[2]) and a[3] == b[3]


# ------------------------------------------------------------------------------------- bad objects: one line
@pytest.mark.parametrize(
    "build, message",
    [
        (lambda: TorchNoveltyAgent("abc"), "agent.module: expected a torch.nn.Module"),
        (
            lambda: TorchNoveltyAgent({"_target_": "builtins.dict"}),
            "agent.module (builtins.dict) is not a torch.nn.Module",
        ),
        (lambda: TorchNoveltyAgent({"_target_": "torch.nn.Nowhere"}), "agent.module: cannot build 'torch.nn.Nowhere'"),
        (lambda: TorchNoveltyAgent(mlp(6), novelty="odin"), "agent.novelty: expected one of ['max_softmax', 'energy']"),
        (lambda: TorchNoveltyAgent(mlp(6), device="tpu"), "agent.device: 'tpu' is not a torch device"),
        (lambda: TorchNoveltyAgent(mlp(6), epochs=0), "agent.epochs"),
        (lambda: TorchNoveltyAgent(mlp(6), optimizer=3), "agent.optimizer (builtins.int) is not callable"),
        (lambda: TorchNoveltyAgent(mlp(6), threads=0), "agent.threads"),
        (lambda: TorchContinualLearner(mlp(10), strategy="si"), "agent.strategy"),
        (lambda: TorchContinualLearner(mlp(10), replay={"size": 10, "every": 2}), "agent.replay"),
        (lambda: TorchContinualLearner(mlp(10), ewc={"lambda": -1.0}), "agent.ewc.lambda"),
        (lambda: TorchContinualLearner(mlp(10), ewc=[1]), "agent.ewc: expected null or a mapping"),
    ],
)
def test_a_bad_module_or_setting_is_one_config_error(build, message):
    with pytest.raises(ConfigError) as info:
        build()
    text = str(info.value)
    assert message in text and "\n" not in text, text


def test_a_wrong_output_width_names_the_module_and_both_shapes():
    agent = TorchNoveltyAgent(mlp(5), optimizer=ADAM)
    with pytest.raises(ConfigError) as info:
        OndDriver(**SMALL_OND).run(domain=DigitsDomain(), agent=agent, rng=np.random.default_rng(0), progress=False)
    assert str(info.value) == (
        "agent.module (torch.nn.modules.container.Sequential) outputs shape (2, 5) for a batch of shape (2, 64), "
        "expected (2, 6): one logit per known class (K = 6); make its last layer's out_features 6"
    )
    learner = TorchContinualLearner(mlp(6))
    with pytest.raises(ConfigError, match=r"outputs shape \(2, 6\) .* expected \(2, 10\): one logit per class"):
        learner.setup(64, 10, np.random.default_rng(0))
    wrong_input = {"_target_": "torch.nn.Linear", "in_features": 8, "out_features": 10}
    with pytest.raises(ConfigError, match=r"fails on a batch of shape \(2, 64\) .* its input width must be 64"):
        TorchContinualLearner(wrong_input).setup(64, 10, np.random.default_rng(0))


# ------------------------------------------------------------------------------------------- determinism
@pytest.mark.parametrize("novelty", ["max_softmax", "energy"])
def test_ond_same_seed_same_numbers_and_the_global_generator_untouched(novelty):
    before = _states()
    runs = []
    for seed in (3, 3, 4):
        agent = TorchNoveltyAgent(mlp(6), optimizer=ADAM, epochs=3, novelty=novelty)
        runs.append(
            OndDriver(**SMALL_OND).run(
                domain=DigitsDomain(), agent=agent, rng=np.random.default_rng(seed), progress=False
            )
        )
    assert _same_states(before, _states())
    for a, b in zip(runs[0].trials, runs[1].trials):
        np.testing.assert_array_equal(a.p_class, b.p_class)
        np.testing.assert_array_equal(a.p_world_changed, b.p_world_changed)
        np.testing.assert_allclose(a.p_class.sum(1), 1.0)
    assert not np.array_equal(runs[0].trials[0].p_class, runs[2].trials[0].p_class)  # another seed, other weights


def test_a_built_module_is_reinitialised_from_the_seed():
    """A module given already built (the Python API) is deep-copied and reset_parameters() called under the seed:
    the same numbers as the config node, whatever torch's global generator did when it was built."""
    torch.manual_seed(123)
    built = torch.nn.Sequential(torch.nn.Linear(64, 16), torch.nn.ReLU(), torch.nn.Linear(16, 10))
    node = {
        "_target_": "torch.nn.Sequential",
        "_args_": [
            {"_target_": "torch.nn.Linear", "in_features": 64, "out_features": 16},
            {"_target_": "torch.nn.ReLU"},
            {"_target_": "torch.nn.Linear", "in_features": 16, "out_features": 10},
        ],
    }
    records = [
        ContinualDriver().run(
            domain=SplitDigits(),
            agent=TorchContinualLearner(module, optimizer=ADAM, epochs=1),
            rng=np.random.default_rng(0),
            progress=False,
        )
        for module in (built, node)
    ]
    np.testing.assert_array_equal(records[0].accuracy, records[1].accuracy)
    np.testing.assert_array_equal(records[0].init_accuracy, records[1].init_accuracy)


@pytest.mark.parametrize("strategy", ["finetune", "replay", "ewc"])
def test_continual_strategies_are_deterministic(strategy):
    before = _states()
    kwargs = {
        "optimizer": ADAM,
        "epochs": 2,
        "strategy": strategy,
        "replay": {"size": 40, "per_task": False},
        "ewc": {"lambda": 50.0, "fisher_samples": 30},
    }
    records = [
        ContinualDriver().run(
            domain=SplitDigits(),
            agent=TorchContinualLearner(mlp(10), **kwargs),
            rng=np.random.default_rng(1),
            progress=False,
        )
        for _ in range(2)
    ]
    assert _same_states(before, _states())
    np.testing.assert_array_equal(records[0].accuracy, records[1].accuracy)
    assert records[0].accuracy[-1, -1] > 0.2  # the last task is learned, if slowly under EWC (chance: 0.1)


def test_ewc_penalty_is_the_papers_formula():
    """(lambda/2) sum_i F_i (theta_i - theta*_i)^2, one term per past task, with F the mean squared gradient of
    log p(y|x) at the true label."""
    learner = TorchContinualLearner(mlp(10), optimizer=ADAM, epochs=1, strategy="ewc", ewc={"lambda": 7.0})
    learner.setup(64, 10, np.random.default_rng(0))
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(12, 64)), rng.integers(0, 2, size=12)
    learner.learn(0, X, y)
    (fisher, anchor), params = learner.anchors[0], list(learner.model.parameters())
    expected_f = [torch.zeros_like(p) for p in params]
    for i in range(12):
        learner.model.zero_grad()
        torch.log_softmax(learner.model(torch.as_tensor(X[i : i + 1], dtype=torch.float32)), 1)[0, y[i]].backward()
        for f, p in zip(expected_f, params):
            f += p.grad**2 / 12
    for f, g in zip(fisher, expected_f):
        torch.testing.assert_close(f, g, rtol=1e-5, atol=1e-9)
    with torch.no_grad():
        for p in params:
            p.add_(0.01)
    expected = 3.5 * sum(float((f * (p.detach() - a) ** 2).sum()) for f, p, a in zip(fisher, params, anchor))
    assert learner._penalty().item() == pytest.approx(expected, rel=1e-5)


def test_task_incremental_prediction_stays_within_the_tasks_classes():
    learner = TorchContinualLearner(mlp(10), optimizer=ADAM, epochs=1)
    record = ContinualDriver(scenario="task_incremental").run(
        domain=SplitDigits(), agent=learner, rng=np.random.default_rng(0), progress=False
    )
    tasks = SplitDigits().tasks(np.random.default_rng(0).spawn(2)[0])
    for task in tasks:
        assert set(np.unique(learner.predict(task.X_test, task.task_id))) <= set(task.classes)
    assert record.accuracy[-1].mean() > 0.8


# -------------------------------------------------------------------------------------- Stable-Baselines3
def test_sb3_bad_settings_are_one_config_error():
    pytest.importorskip("stable_baselines3", reason="the sb3 adapter needs stable-baselines3: pip install -e '.[sb3]'")
    pytest.importorskip("gymnasium")
    from owl_eval.protocols.lifelong_rl.agents.sb3 import Sb3Agent

    cases = [
        (lambda: Sb3Agent("PPOO"), "agent.algo: stable_baselines3 has no algorithm 'PPOO'; known: A2C, DDPG, DQN, PPO"),
        (lambda: Sb3Agent("numpy.ndarray"), "agent.algo (numpy.ndarray) is not a Stable-Baselines3 algorithm"),
        (lambda: Sb3Agent("PPO", policy="LstmPolicy"), "agent.policy: expected one of PPO's policies"),
        (lambda: Sb3Agent("PPO", algo_kwargs={"seed": 3}), "agent.algo_kwargs: ['seed'] are set by the agent"),
        (
            lambda: Sb3Agent("DQN", algo_kwargs={"n_epochs": 8}),
            "agent.algo (stable_baselines3.dqn.dqn.DQN) cannot be called",
        ),
        (lambda: Sb3Agent("PPO", timesteps_per_episode=0), "agent.timesteps_per_episode"),
        (lambda: Sb3Agent({"n_steps": 8}), "agent.algo: expected an algorithm name"),
    ]
    for build, message in cases:
        with pytest.raises(ConfigError) as info:
            build()
        assert message in str(info.value) and "\n" not in str(info.value), str(info.value)


def test_sb3_algorithm_by_name_dotted_path_or_target_node():
    pytest.importorskip("stable_baselines3", reason="the sb3 adapter needs stable-baselines3: pip install -e '.[sb3]'")
    import stable_baselines3

    from owl_eval.protocols.lifelong_rl.agents.sb3 import Sb3Agent

    assert Sb3Agent("DQN").algo_class is stable_baselines3.DQN
    assert Sb3Agent("stable_baselines3.A2C").algo_class is stable_baselines3.A2C
    node = Sb3Agent({"_target_": "stable_baselines3.A2C", "_partial_": True, "n_steps": 8}, algo_kwargs={"gamma": 0.9})
    assert node.algo_class is stable_baselines3.A2C and node.kwargs == {"n_steps": 8, "gamma": 0.9}
    nested = {"net_arch": [8], "activation_fn": {"_target_": "hydra.utils.get_class", "path": "torch.nn.Tanh"}}
    assert Sb3Agent("PPO", algo_kwargs={"policy_kwargs": nested}).kwargs["policy_kwargs"]["activation_fn"] is (
        torch.nn.Tanh
    )


def test_sb3_algorithm_that_cannot_take_discrete_actions_is_one_error():
    pytest.importorskip("stable_baselines3", reason="the sb3 adapter needs stable-baselines3: pip install -e '.[sb3]'")
    from owl_eval.protocols.lifelong_rl.agents.sb3 import Sb3Agent
    from owl_eval.protocols.lifelong_rl.domains import RLDomain

    domain = RLDomain("cartpole", {"cartpole": {"family": "cartpole"}})
    agent = Sb3Agent("SAC")
    agent.seed(np.random.default_rng(0))
    with pytest.raises(ConfigError, match=r"agent.algo \(SAC\) cannot learn task cartpole_default \(observations Box"):
        agent.start_task(domain.spec("cartpole", "default"))


def test_sb3_same_seed_same_log_and_global_generators_untouched(monkeypatch, tmp_path):
    """Two runs of one tiny syllabus (PPO, then DQN on FrozenLake's discrete observations) with the same seed log the
    same returns; the process's random, numpy and torch generators are as they were; no SB3-<time> folder is left in
    the temp folder (SB3's own logger makes an empty one per model)."""
    import tempfile

    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    pytest.importorskip("stable_baselines3", reason="the sb3 adapter needs stable-baselines3: pip install -e '.[sb3]'")
    from owl_eval.protocols.lifelong_rl.agents.sb3 import Sb3Agent
    from owl_eval.protocols.lifelong_rl.domains import RLDomain
    from owl_eval.protocols.lifelong_rl.episodes import run_syllabus
    from owl_eval.protocols.lifelong_rl.syllabus import Block

    class Log:
        def __init__(self):
            self.rows = []

        def log_episode(self, **row):
            self.rows.append((row["block_type"], row["task_name"], row["reward"], row["episode_step_count"]))

    domain = RLDomain(
        "mixed",
        {
            "cartpole": {
                "family": "cartpole",
                "max_episode_steps": 50,
                "variants": {"default": {}, "long": {"length": 1.0}},
            },
            "frozenlake": {"family": "frozenlake", "max_episode_steps": 20},
        },
    )
    blocks = [
        Block("test", "cartpole", "default", 1),
        Block("train", "cartpole", "default", 2),
        Block("train", "cartpole", "long", 2),
        Block("train", "frozenlake", "default", 2),
        Block("test", "cartpole", "default", 2),
        Block("test", "frozenlake", "default", 2),
    ]
    before = _states()
    logs = []
    # budgets: 4 CartPole and 2 FrozenLake learning episodes x 24 steps; PPO learns in whole rollouts of 32 steps
    # (the budget reached or passed by less than a rollout), DQN in steps of train_freq = 4 (exactly)
    runs = [("PPO", {"n_steps": 32, "batch_size": 32, "n_epochs": 2}, [96, 64])] * 2
    runs += [("DQN", {"learning_starts": 10, "train_freq": 4}, [96, 48])] * 2
    for algo, kwargs, steps in runs:
        agent = Sb3Agent(algo, algo_kwargs=kwargs, timesteps_per_episode=24)
        log = Log()
        assert run_syllabus(blocks, agent, domain, log, np.random.default_rng(5), eval_seed=100) == 11
        assert len(agent.models) == 2  # CartPole's variants share one model, FrozenLake has its own
        assert [m.num_timesteps for _, _, m in agent.models] == steps
        logs.append(log.rows)
    assert _same_states(before, _states())
    assert logs[0] == logs[1] and logs[2] == logs[3]
    assert [p.name for p in temp.iterdir() if p.name.startswith("SB3-")] == []  # (torch keeps its own cache there)


# ------------------------------------------------------------------------------------------- images
class _ImageDomain:
    """240 8x8 RGB uint8 images of 6 classes (the OND interface: load() -> LabeledData)."""

    name = "images"

    def load(self):
        from owl_eval.datasets.classification import LabeledData

        rng = np.random.default_rng(0)
        y = np.repeat(np.arange(6), 40)
        pixels = np.clip(y[:, None, None, None] * 40 + rng.integers(-20, 21, size=(240, 8, 8, 3)), 0, 255)
        return LabeledData(pixels.astype(np.uint8), y, tuple("abcdef"))


def test_images_reach_a_torch_module_channels_first_as_floats_in_0_1():
    from owl_eval.protocols.ond.agents.inputs import flat_features, torch_inputs

    pixels = _ImageDomain().load().features
    assert np.array_equal(flat_features(pixels), pixels.reshape(240, -1).astype(np.float64))
    inputs = torch_inputs(pixels[:5])
    assert inputs.shape == (5, 3, 8, 8) and inputs.dtype == np.float32
    np.testing.assert_allclose(
        inputs[2, 1, 4, 7], pixels[2, 4, 7, 1] / 255.0, rtol=1e-6
    )  # [n, c, h, w] <- [n, h, w, c]
    seen = []

    class Probe(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3)
            self.head = torch.nn.LazyLinear(4)

        def forward(self, x):
            seen.append((tuple(x.shape[1:]), float(x.min()), float(x.max())))
            return self.head(torch.relu(self.conv(x)).flatten(1))

    agent = TorchNoveltyAgent(Probe(), optimizer=ADAM, epochs=2, standardize=False)
    record = OndDriver(known_classes=4, **SMALL_OND).run(
        domain=_ImageDomain(), agent=agent, rng=np.random.default_rng(0), progress=False
    )
    assert record.trials and {shape for shape, _, _ in seen} == {(3, 8, 8)}
    assert min(lo for _, lo, _ in seen) >= 0.0 and max(hi for _, _, hi in seen) <= 1.0
    flat_module = TorchNoveltyAgent({"_target_": "torch.nn.Linear", "in_features": 192, "out_features": 4})
    with pytest.raises(
        ConfigError, match=r"fails on a batch of shape \(2, 3, 8, 8\) .* it must take images of shape \(3, 8, 8\)"
    ):
        OndDriver(known_classes=4, **SMALL_OND).run(
            domain=_ImageDomain(), agent=flat_module, rng=np.random.default_rng(0), progress=False
        )
