"""agent=lifelong_rl/tella from the command line alone (python -m owl_eval in the test process, tests/inprocess.py)
into the test session's SQLite MLflow store (tests/conftest.py), read back with MlflowClient: the fixture tella
agent (tests/fixtures/agents/lifelong_rl/tella_q_agent.py) on the shipped FrozenLake CL syllabus, small sizes.

Checked independently of the adapter: every episode's return equals the return of the same agent class run through
tella's own loop (``tella/experiment.py``'s ``run``: block/task/variant events, ``choose_actions`` on a list,
``receive_transitions`` with the reward set to None in evaluation blocks) written here over gymnasium's
``FrozenLakeEnv`` directly, with the seeds the protocol documents; the agent got no reward in evaluation blocks,
every reward in training blocks, tella's event sequence per block, and one log row per syllabus episode.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gymnasium")

from owl_eval.formats.l2logger import read_log  # noqa: E402
from tests.fixtures.agents.lifelong_rl.tella_q_agent import TabularQAgent  # noqa: E402

PROJECT_ROOT = Path(__file__).resolve().parents[2]
AGENT = "tests.fixtures.agents.lifelong_rl.tella_q_agent.TabularQAgent"
# frozenlake_cl: plain -> mirrored -> slippery, each followed by an evaluation of all three; one cycle
VARIANTS = ["plain", "mirrored", "slippery"]
TRAIN, TEST, SEED, EVAL_SEED, MAX_STEPS = 25, 2, 4, 1_000_000, 100
MAPS = {"plain": ["SFFF", "FHFH", "FFFH", "HFFG"], "mirrored": ["FFFS", "HFHF", "HFFF", "GFFH"]}


def tella_loop(config_file: str) -> tuple[list[str], list[float]]:
    """The syllabus through tella's run loop, over gymnasium directly: (block types per episode, returns)."""
    from gymnasium.envs.toy_text.frozen_lake import FrozenLakeEnv

    def make(variant):
        if variant == "slippery":
            return FrozenLakeEnv(desc=MAPS["plain"], is_slippery=True, success_rate=0.8)
        return FrozenLakeEnv(desc=MAPS[variant], is_slippery=False)

    blocks = [b for v in VARIANTS for b in [("train", v, TRAIN)] + [("test", w, TEST) for w in VARIANTS]]
    env_rng, agent_rng = np.random.default_rng(SEED).spawn(2)  # the run's generator, split as the protocol does
    envs = {v: make(v) for v in VARIANTS}
    first = envs[blocks[0][1]]
    agent = TabularQAgent(
        agent_rng.bit_generator.random_raw(), first.observation_space, first.action_space, 1, config_file
    )
    types, returns = [], []
    for kind, variant, episodes in blocks:
        learning = kind == "train"
        seeds = env_rng.integers(0, 2**31 - 1, size=episodes) if learning else EVAL_SEED + np.arange(episodes)
        agent.is_learning_allowed = learning
        agent.block_start(learning)
        agent.task_start("frozenlake")
        agent.task_variant_start("frozenlake", variant)
        env = envs[variant]
        for seed in seeds:
            obs, _ = env.reset(seed=int(seed))
            total, steps, done = 0.0, 0, False
            while not done:
                (action,) = agent.choose_actions([np.int64(obs)])
                nxt, reward, terminated, _, _ = env.step(action)
                steps += 1
                done = terminated or steps >= MAX_STEPS
                agent.receive_transitions([(np.int64(obs), action, reward if learning else None, done, np.int64(nxt))])
                total += reward
                obs = nxt
            types.append(kind)
            returns.append(total)
        agent.task_variant_end("frozenlake", variant)
        agent.task_end("frozenlake")
        agent.block_end(learning)
    return types, returns


@pytest.mark.slow
def test_a_tella_agent_runs_the_frozenlake_syllabus_from_the_command_line(experiment, client, tmp_path):
    from tests.inprocess import run_module

    record = tmp_path / "calls.jsonl"
    config = tmp_path / "agent.json"
    config.write_text(json.dumps({"record": str(record)}))
    proc = run_module(
        "owl_eval",
        [
            "+experiment=lifelong_rl_frozenlake_syllabus",
            "agent=lifelong_rl/tella",
            f"agent.agent._target_={AGENT}",
            f"agent.config_file={config}",
            "protocol.syllabus.generate.cycles=1",
            f"protocol.syllabus.generate.train_episodes={TRAIN}",
            f"protocol.syllabus.generate.test_episodes={TEST}",
            "protocol.ste.missing=skip",
            f"seed={SEED}",
            *experiment["overrides"],
            "figures=false",
            f"hydra.run.dir={tmp_path / 'job'}",
        ],
        cwd=PROJECT_ROOT,
        env={"MLFLOW_DISABLE_TELEMETRY": "true"},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = client.search_runs([client.get_experiment_by_name(experiment["name"]).experiment_id])
    assert run.info.status == "FINISHED"
    assert run.data.tags["agent"] == "lifelong_rl/tella" and run.data.params["agent.agent._target_"] == AGENT

    # one l2logger row per syllabus episode: 3 x (25 training + 3 x 2 evaluation)
    (log_dir,) = client.list_artifacts(run.info.run_id, "record/l2log")
    log = read_log(client.download_artifacts(run.info.run_id, log_dir.path, str(tmp_path / "dl")))
    assert len(log) == 3 * (TRAIN + 3 * TEST)
    assert list(log["block_num"][[0, TRAIN, TRAIN + TEST, TRAIN + 3 * TEST]]) == [0, 1, 2, 4]

    # every episode's return equals tella's own loop run directly on gymnasium with the same seeds
    (tmp_path / "reference.json").write_text("{}")  # the same defaults, no record
    types, returns = tella_loop(str(tmp_path / "reference.json"))
    assert list(log["block_type"]) == types
    np.testing.assert_array_equal(log["reward"], returns)
    assert 0 < np.sum(returns) < len(returns)  # not a degenerate run: some episodes reach the goal, some do not

    calls = [json.loads(line) for line in record.read_text().splitlines()]
    assert calls[0]["event"] == "init" and calls[0]["num_envs"] == 1 and calls[0]["n_obs"] == 16
    events = [c for c in calls if c["event"] != "transition"]
    per_block = ["block_start", "task_start", "task_variant_start", "task_variant_end", "task_end", "block_end"]
    assert [e["event"] for e in events[1:]] == per_block * 12
    starts = [e for e in events if e["event"] == "block_start"]
    assert (
        [e["is_learning_allowed"] for e in starts]
        == [e["attribute"] for e in starts]
        == [True, False, False, False] * 3
    )
    variants = [e["variant_name"] for e in events if e["event"] == "task_variant_start"]
    assert variants == [v for t in VARIANTS for v in [t, *VARIANTS]]
    # the rewards: given in training blocks, withheld (None) in evaluation blocks, one transition per step
    block, rewards = -1, {}
    for c in calls:
        if c["event"] == "block_start":
            block += 1
        elif c["event"] == "transition":
            rewards.setdefault(block, []).append(c["reward"])
            assert c["obs_type"] == "int64"
    for b, got in rewards.items():
        assert (all(r is None for r in got)) == (not starts[b]["is_learning_allowed"]), b
        assert all(r is not None for r in got) == starts[b]["is_learning_allowed"], b
        assert len(got) == int(np.sum(log["episode_step_count"][log["block_num"] == b])), b
