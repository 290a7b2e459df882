"""The RL syllabus protocol without MLflow: logging, evaluation seeds, learning off, errors, records, STEs."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("gymnasium")

from owl_eval.evaluation import evaluation_for  # noqa: E402
from owl_eval.formats.l2logger import read_log  # noqa: E402
from owl_eval.protocols.base import AgentOutputError, partial_record  # noqa: E402
from owl_eval.protocols.lifelong_rl.agents import AgentHooks, QLearningAgent  # noqa: E402
from owl_eval.protocols.lifelong_rl.domains import RLDomain  # noqa: E402
from owl_eval.protocols.lifelong_rl.driver import RLSyllabusDriver  # noqa: E402
from owl_eval.protocols.lifelong_rl.record import RLRecord  # noqa: E402
from tests.fixtures.agents.lifelong_rl.crashing import AgentCrash, CrashingAgent  # noqa: E402

MAP = ["SFFF", "FHFH", "FFFH", "HFFG"]
AGENT_CFG = {"_target_": "owl_eval.protocols.lifelong_rl.agents.q_learning.QLearningAgent"}


@pytest.fixture(scope="module")
def domain():
    return RLDomain(
        "both",
        {
            "cartpole": {"max_episode_steps": 50, "variants": {"default": {}, "long_pole": {"length": 2.0}}},
            "frozenlake": {
                "params": {"map": MAP},
                "variants": {"plain": {}, "mirrored": {"map": [r[::-1] for r in MAP]}},
            },
        },
    )


class PushRight(AgentHooks):
    """Always action 1; counts the transitions it is shown."""

    def __init__(self, bad_action=None):
        self.observed, self.bad_action = 0, bad_action

    def seed(self, rng):
        self.observed = 0

    def act(self, observation):
        return self.bad_action if self.bad_action is not None else 1

    def observe(self, *transition):
        self.observed += 1


def protocol(tmp_path, syllabus, **kw):
    ste = {"dir": str(tmp_path / "ste"), "episodes": 5, "seed": 0, "agent": AGENT_CFG} | kw.pop("ste", {})
    return RLSyllabusDriver(syllabus=syllabus, log_dir=str(tmp_path / "log"), scenario_name="t", ste=ste, **kw)


ANT_A = {
    "kind": "ANT_A",
    "generate": {
        "task_variants": ["cartpole/default", "frozenlake/plain"],
        "cycles": 2,
        "train_episodes": 6,
        "test_episodes": 3,
    },
}


def test_ant_a_log_layout_eval_seeds_and_learning_off(tmp_path, domain):
    agent = PushRight()
    record = protocol(tmp_path, ANT_A, ste={"missing": "skip"}).run(
        domain=domain, agent=agent, rng=np.random.default_rng(0), progress=False
    )
    log = read_log(record.log_dir)
    # initial tests (2 x 3) + 2 cycles x 2 tasks x (6 train + 2 x 3 test) = 6 + 48 = 54 episodes
    assert len(log) == 54 and log["exp_num"].tolist() == list(range(54))
    assert sorted(set(log["task_name"])) == ["cartpole_default", "frozenlake_plain"]
    files = sorted(p.relative_to(record.log_dir).as_posix() for p in record.log_dir.rglob("data-log.tsv"))
    assert files[0] == "worker-default/0-test/data-log.tsv" and len(files) == 2 + 2 * 2 * 3
    train = log["block_type"] == "train"
    assert agent.observed == int(log["episode_step_count"][train].sum())  # observe only in training blocks
    # every evaluation block of a task replays the same reset seeds: a fixed policy gives equal rewards
    for name in ("cartpole_default",):
        test_blocks = [
            log["reward"][(log["block_num"] == b)]
            for b in np.unique(log["block_num"][~train & (log["task_name"] == name)])
        ]
        assert len(test_blocks) == 5 and all(np.array_equal(t, test_blocks[0]) for t in test_blocks)
        train_blocks = [
            log["reward"][(log["block_num"] == b)]
            for b in np.unique(log["block_num"][train & (log["task_name"] == name)])
        ]
        assert not np.array_equal(train_blocks[0], train_blocks[1])  # fresh training seeds
    assert record.ste_status == {"cartpole_default": "missing", "frozenlake_plain": "missing"}


def test_same_seed_gives_identical_logs(tmp_path, domain):
    syl = {
        "kind": "CL",
        "generate": {
            "task_variants": ["frozenlake/plain", "frozenlake/mirrored"],
            "cycles": 1,
            "train_episodes": 40,
            "test_episodes": 2,
        },
    }
    logs = []
    for i, seed in enumerate((3, 3, 4)):
        rec = protocol(tmp_path / str(i), syl, ste={"missing": "skip"}).run(
            domain=domain, agent=QLearningAgent(), rng=np.random.default_rng(seed), progress=False
        )
        logs.append(rec.log)
    cols = [c for c in logs[0].columns if c != "timestamp"]  # wall-clock time is the only difference
    assert all(np.array_equal(logs[0][c], logs[1][c]) for c in cols)
    assert not np.array_equal(logs[0]["episode_step_count"], logs[2]["episode_step_count"])


def test_bad_action_names_block_episode_and_step(tmp_path, domain):
    syl = {"kind": "CL", "blocks": [{"type": "train", "task": "cartpole", "variant": "default", "episodes": 2}]}
    with pytest.raises(AgentOutputError) as err:
        protocol(tmp_path, syl).run(
            domain=domain, agent=PushRight(bad_action=2), rng=np.random.default_rng(0), progress=False
        )
    assert "block 0 (train cartpole_default), episode 0, step 0: expected an int in [0, 2), got 2" in str(err.value)


def test_crash_keeps_the_logged_episodes(tmp_path, domain):
    syl = {
        "kind": "CL",
        "generate": {"task_variants": ["frozenlake/plain"], "cycles": 2, "train_episodes": 8, "test_episodes": 2},
    }
    p = protocol(tmp_path, syl)
    with pytest.raises(AgentCrash) as err:
        p.run(domain=domain, agent=CrashingAgent(crash_at_episode=11), rng=np.random.default_rng(0), progress=False)
    partial = partial_record(err.value)
    # blocks: 0 train 8, 1 test 2, 2 train 8, ...; the 11th training episode is the 3rd of block 2 and
    # crashes before it is logged: 8 + 2 + 2 rows
    assert partial.log["block_num"].tolist() == [0] * 8 + [1] * 2 + [2] * 2
    results = evaluation_for("lifelong_rl").evaluate(partial, {})
    assert results["episodes"] == 12 and "saturation" in results.values


def test_record_round_trip(tmp_path, domain):
    syl = {
        "kind": "CL",
        "generate": {
            "task_variants": ["frozenlake/plain", "frozenlake/mirrored"],
            "cycles": 1,
            "train_episodes": 10,
            "test_episodes": 2,
        },
    }
    rec = protocol(tmp_path, syl).run(
        domain=domain, agent=QLearningAgent(), rng=np.random.default_rng(0), progress=False
    )
    assert rec.ste_status == {"frozenlake_plain": "computed", "frozenlake_mirrored": "computed"}
    rec.save(tmp_path / "saved")
    back = RLRecord.load(tmp_path / "saved")
    assert np.array_equal(back.log["reward"], rec.log["reward"]) and back.kind == "CL"
    assert set(back.ste_logs) == {"frozenlake_plain", "frozenlake_mirrored"}
    assert all(len(v) == 5 for v in back.ste_logs.values())  # ste.episodes = 5


def test_ste_mode_and_reuse(tmp_path, domain):
    syl = {
        "kind": "CL",
        "generate": {
            "task_variants": ["frozenlake/plain", "frozenlake/mirrored"],
            "cycles": 1,
            "train_episodes": 10,
            "test_episodes": 2,
        },
    }
    first = protocol(tmp_path, syl, mode="ste").run(
        domain=domain, agent=QLearningAgent(), rng=np.random.default_rng(0), progress=False
    )
    assert first.ste_status == {"frozenlake_plain": "computed", "frozenlake_mirrored": "computed"}
    # the STE run's log: the two STE logs one after the other (5 + 5 episodes, blocks 0 and 1)
    assert first.log["block_num"].tolist() == [0] * 5 + [1] * 5 and first.log["exp_num"].tolist() == list(range(10))
    p = protocol(tmp_path, syl)
    second = p.run(domain=domain, agent=QLearningAgent(), rng=np.random.default_rng(0), progress=False)
    assert second.ste_status == {"frozenlake_plain": "reused", "frozenlake_mirrored": "reused"}
    assert np.array_equal(second.ste_logs["frozenlake_plain"]["reward"], first.ste_logs["frozenlake_plain"]["reward"])
    # another agent configuration is another STE
    other = protocol(tmp_path, syl, ste={"agent": AGENT_CFG | {"alpha": 0.3}, "missing": "skip"})
    third = other.run(domain=domain, agent=QLearningAgent(alpha=0.3), rng=np.random.default_rng(0), progress=False)
    assert third.ste_status == {"frozenlake_plain": "missing", "frozenlake_mirrored": "missing"}
    assert "protocol.mode=ste" in third.ste_reasons["frozenlake_plain"]
    results = evaluation_for("lifelong_rl").evaluate(third, {})
    assert "protocol.mode=ste" in results.na["task/frozenlake_plain/ste_rel_perf"]


# ------------------------------------------------------------------------------ checks before any run

CL = {
    "kind": "CL",
    "generate": {
        "task_variants": ["cartpole/default", "cartpole/long_pole"],
        "cycles": 1,
        "train_episodes": 2,
        "test_episodes": 1,
    },
}


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"mode": "STE"}, "protocol.mode: expected one of ['syllabus', 'ste'], got 'STE'"),
        ({"eval_seed": -1}, "protocol.eval_seed: expected an integer >= 0, got -1"),
        ({"eval_seed": 2.5}, "protocol.eval_seed: expected an integer, got 2.5 (float)"),
        ({"worker_id": "../w"}, "protocol.worker_id: worker id '../w' is not a safe name"),
        ({"scenario_name": "a/b"}, "protocol.scenario_name: scenario name 'a/b' is not a safe name"),
        ({"ste": {"episodes": 2.5}}, "protocol.ste.episodes: expected an integer, got 2.5 (float)"),
        ({"ste": {"missing": "ignore"}}, "protocol.ste.missing: expected one of ['compute', 'skip'], got 'ignore'"),
        ({"ste": {"epsiodes": 5}}, "protocol.ste.epsiodes: unknown key (did you mean protocol.ste.episodes?)"),
    ],
)
def test_each_bad_protocol_setting_is_one_error_naming_its_key(tmp_path, setting, message):
    kw = {"scenario_name": "t"} | setting
    with pytest.raises(ValueError) as err:
        RLSyllabusDriver(syllabus=CL, log_dir=str(tmp_path / "log"), **kw)
    assert str(err.value).startswith(message)


class OndLikeAgent:
    def fit(self, features, labels, *, num_known, rng): ...

    def predict_batch(self, batch): ...


def test_check_rejects_parts_of_other_protocols_and_unknown_tasks(tmp_path, domain):
    from owl_eval.datasets.classification import DigitsDomain
    from owl_eval.errors import ConfigError
    from owl_eval.paths import group_options

    proto = protocol(tmp_path, CL)
    proto.check(domain=domain, agent=PushRight())  # the right parts pass
    cases = [
        (
            dict(agent=OndLikeAgent()),
            "agent (tests.runner.test_rl_protocol.OndLikeAgent) is not a lifelong-RL agent: it "
            "has no act(observation) method; choose agent=lifelong_rl/<option> ("
            + ", ".join(o for o in group_options("agent") if o.startswith("lifelong_rl/"))  # linear_q, ..., tella
            + ")",
        ),
        (
            dict(baseline=PushRight()),
            "baseline (tests.runner.test_rl_protocol.PushRight): the lifelong_rl protocol runs "
            "no baseline agent; choose baseline=none",
        ),
        (
            dict(domain=DigitsDomain()),
            "domain (owl_eval.datasets.classification.DigitsDomain) is not an RL domain: it has "
            "no make(task, variant) method; choose domain=<option> (cartpole, frozenlake, "
            "classic_control, gymnasium, mountaincar, minigrid)",
        ),
    ]
    for kw, message in cases:
        with pytest.raises(ConfigError) as err:
            proto.check(**(dict(domain=domain, agent=PushRight(), baseline=None) | kw))
        assert str(err.value) == message
    unknown = protocol(tmp_path, {"kind": "CL", "generate": {"task_variants": ["cartpole/heavy"], "cycles": 1}})
    with pytest.raises(ConfigError, match=r"protocol.syllabus.blocks\[0\].variant: unknown variant 'heavy'") as err:
        unknown.check(domain=domain, agent=PushRight())


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"alpha": 0}, "agent.alpha: expected a number > 0, got 0"),
        ({"gamma": 1.5}, "agent.gamma: expected a number <= 1, got 1.5"),
        ({"epsilon_decay": "fast"}, "agent.epsilon_decay: expected a number, got 'fast'"),
        ({"bins": [1, 1, 6.5, 12]}, "agent.bins[2]: expected an integer, got 6.5 (float)"),
        ({"low": [0, 0]}, "agent.low: expected null or a list of 4 numbers (one per grid dimension), got [0, 0]"),
        ({"low": [0, 0, 0, 1], "high": [1, 1, 1, 1]}, "agent.high[3]: expected more than agent.low[3] (1), got 1"),
    ],
)
def test_q_learning_settings_are_typed(kwargs, message):
    from owl_eval.errors import ConfigError

    with pytest.raises(ConfigError) as err:
        QLearningAgent(**kwargs)
    assert str(err.value) == message
    typed = QLearningAgent(alpha="0.1", bins=[1.0, 1, 6, 12], low=[-1, -1, -1, -1], high=[1, 1, 1, 1])
    assert typed.alpha == 0.1 and typed.bins == [1, 1, 6, 12] and typed.low == [-1.0] * 4
