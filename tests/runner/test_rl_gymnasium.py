"""domain=gymnasium (owl_eval/protocols/lifelong_rl/gym_tasks.py): any registered gymnasium environment as lifelong-RL
tasks, variants as attributes of the unwrapped env and gymnasium.make keywords, wrappers by _target_; the shipped
MountainCar and MiniGrid experiments end to end into the session's MLflow store. The bad configs' one-line errors
are in tests/reliability/test_rl_gymnasium_config_errors.py."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("gymnasium")

from owl_eval.errors import ConfigError  # noqa: E402
from owl_eval.formats.l2logger import read_log  # noqa: E402
from owl_eval.protocols.lifelong_rl.gym_tasks import GymnasiumDomain  # noqa: E402
from owl_eval.runner.api import run  # noqa: E402

TINY = "tests.fixtures.envs.tiny_chain:TinyChainEnv"
TINY_GRID = "tests.fixtures.envs.tiny_chain:TinyGridEnv"


def _only_run(client, name):
    runs = client.search_runs([client.get_experiment_by_name(name).experiment_id])
    assert len(runs) == 1
    return runs[0]


# -- the domain ------------------------------------------------------------------------------------------------


def test_a_variants_attributes_and_make_kwargs_reach_the_env():
    domain = GymnasiumDomain(
        "mc",
        {
            "mountaincar": {
                "id": "MountainCar-v0",
                "make_kwargs": {"goal_velocity": 0.01},
                "variants": {
                    "plain": {},
                    "both": {"force": 0.0015, "gravity": 0.002, "make_kwargs": {"goal_velocity": 0.03}},
                },
            }
        },
    )
    plain, both = (domain.make("mountaincar", v).env.unwrapped for v in ("plain", "both"))
    assert (plain.force, plain.gravity, plain.goal_velocity) == (0.001, 0.0025, 0.01)  # gymnasium's own, the task's
    assert (both.force, both.gravity, both.goal_velocity) == (0.0015, 0.002, 0.03)
    # the dynamics read them: one push from rest at the bottom gains force - gravity * cos(3 x) of speed
    env = domain.make("mountaincar", "both")
    env.reset(seed=0)
    x0 = float(env.env.unwrapped.state[0])
    obs, *_ = env.step(2)
    assert obs[1] == pytest.approx(0.0015 - 0.002 * np.cos(3 * x0), rel=1e-4)
    spec = domain.spec("mountaincar", "both")
    assert (spec.num_actions, spec.observation_shape, spec.max_episode_steps) == (3, (2,), 200)
    assert spec.family == "mountaincar" and spec.params == {
        "force": 0.0015,
        "gravity": 0.002,
        "make_kwargs": {"goal_velocity": 0.03},
    }
    assert domain.identity("mountaincar", "both") != domain.identity("mountaincar", "plain")


def test_a_users_env_by_entry_point_and_wrappers_in_order():
    domain = GymnasiumDomain(
        "mine",
        {
            "grid": {
                "id": "OwlTinyGrid-v0",
                "entry_point": TINY_GRID,
                "family": "chains",
                "max_episode_steps": 7,
                "wrappers": [{"_target_": "gymnasium.wrappers.FlattenObservation"}],
                "variants": {"short": {"make_kwargs": {"length": 3}}, "near": {"goal": 1}},
            }
        },
    )
    env = domain.make("grid", "short")
    assert type(env.env).__name__ == "FlattenObservation" and env.env.unwrapped.length == 3
    assert domain.make("grid", "near").env.unwrapped.goal == 1
    spec = domain.spec("grid", "short")
    assert spec.observation_shape == (4,) and spec.family == "chains" and spec.max_episode_steps == 7
    obs = env.reset(0)
    assert obs.shape == (4,)
    # left forever: our step limit ends the episode as truncated
    ends = [env.step(0)[2:] for _ in range(7)]
    assert ends[-1] == (False, True) and all(e == (False, False) for e in ends[:-1])


@pytest.mark.parametrize(
    "tasks, mentions",
    [
        ({"t": {"id": "NoSuchEnv-v0"}}, ["domain.tasks.t.id", "variant default", "NoSuchEnv-v0"]),
        (
            {"t": {"id": "MountainCar-v0", "variants": {"v": {"forse": 1.0}}}},
            ["domain.tasks.t.variants.v.forse", "MountainCarEnv", "no attribute 'forse'"],
        ),
        (
            {"t": {"id": "MountainCar-v0", "variants": {"v": {"make_kwargs": {"speed": 1}}}}},
            ["domain.tasks.t.variants.v.make_kwargs.speed", "unexpected keyword argument 'speed'"],
        ),
        (
            {"t": {"id": "MountainCarContinuous-v0", "variants": {"v": {}}}},
            ["domain.tasks.t.variants.v", "Box(-1.0, 1.0, (1,), float32)", "Discrete(n)"],
        ),
    ],
    ids=["unknown_id", "unknown_attribute", "bad_make_kwarg", "continuous_actions"],
)
def test_a_bad_task_is_one_config_error(tasks, mentions):
    with pytest.raises(ConfigError) as err:
        GymnasiumDomain("bad", tasks)
    text = str(err.value)
    assert "\n" not in text
    for m in mentions:
        assert m in text, text


# -- end to end --------------------------------------------------------------------------------------------------


def test_a_users_env_runs_a_syllabus_end_to_end(experiment, client, tmp_path):
    """A chain registered by entry_point, two variants (a make keyword, an attribute), CL: 2 cycles x 2 variants x
    (5 training + 2 variants x 2 evaluation episodes) = 36 episodes in the run."""
    task = (
        "{id:OwlTinyChain-v0,entry_point:'"
        + TINY
        + "',max_episode_steps:20,variants:{long:{make_kwargs:{length:6}},near:{goal:2}}}"
    )
    run(
        [
            "+experiment=lifelong_rl_mountaincar_syllabus",
            *experiment["overrides"],
            "domain=gymnasium",
            "~domain.tasks.mountaincar",
            f"+domain.tasks.chain={task}",
            "protocol.syllabus.generate.task_variants=[chain/long,chain/near]",
            "protocol.syllabus.generate.cycles=2",
            "protocol.syllabus.generate.train_episodes=5",
            "protocol.syllabus.generate.test_episodes=2",
            "protocol.syllabus.generate.initial_test=false",
            "protocol.ste.episodes=3",
            f"protocol.ste.dir={tmp_path / 'ste'}",
        ],
        output_dir=tmp_path / "out",
    )
    r = _only_run(client, experiment["name"])
    assert r.info.status == "FINISHED" and r.data.tags["domain"] == "gymnasium"
    assert r.data.metrics["detail/episodes"] == 36 and r.data.metrics["detail/ste/computed"] == 2
    arts = client.list_artifacts(r.info.run_id, "record/l2log")
    log = read_log(client.download_artifacts(r.info.run_id, arts[0].path, str(tmp_path / "dl")))
    assert len(log) == 36
    assert set(log["task_name"]) == {"chain_long", "chain_near"}
    assert (log["block_type"] == "train").sum() == 20
    # every episode ends at the goal (reward 1) or at the 20-step limit
    assert set(np.unique(log["reward"])) <= {0.0, 1.0}


def test_the_mountaincar_experiment_runs(experiment, client, tmp_path):
    run(
        [
            "+experiment=lifelong_rl_mountaincar_syllabus",
            *experiment["overrides"],
            "protocol.syllabus.generate.train_episodes=3",
            "protocol.syllabus.generate.test_episodes=1",
            "protocol.syllabus.generate.cycles=1",
            "protocol.ste.episodes=2",
            f"protocol.ste.dir={tmp_path / 'ste'}",
        ],
        output_dir=tmp_path / "out",
    )
    r = _only_run(client, experiment["name"])
    # 1 cycle x 2 variants x 3 training episodes, 2 variants x 1 evaluation episode before training and after each block
    assert r.info.status == "FINISHED" and r.data.metrics["detail/episodes"] == 6 + 3 * 2
    assert r.data.params["domain.tasks.mountaincar.variants.fast_finish.make_kwargs.goal_velocity"] == "0.02"


def test_the_minigrid_experiment_runs(experiment, client, tmp_path):
    pytest.importorskip("minigrid", reason='pip install -e ".[minigrid]"')
    run(
        [
            "+experiment=lifelong_rl_minigrid_syllabus",
            *experiment["overrides"],
            "protocol.syllabus.generate.train_episodes=2",
            "protocol.syllabus.generate.test_episodes=1",
            "protocol.syllabus.generate.cycles=1",
            "protocol.ste.episodes=2",
            f"protocol.ste.dir={tmp_path / 'ste'}",
        ],
        output_dir=tmp_path / "out",
    )
    r = _only_run(client, experiment["name"])
    # 3 sizes x 2 training episodes; 3 sizes x 1 evaluation episode before training and after each of the 3 blocks
    assert r.info.status == "FINISHED" and r.data.metrics["detail/episodes"] == 6 + 3 * 4
    assert r.data.tags["syllabus_kind"] == "ANT_A"


def test_a_missing_package_is_one_line_with_the_install_command(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "minigrid", None)
    with pytest.raises(ConfigError) as err:
        GymnasiumDomain("mg", {"doorkey": {"id": "MiniGrid-DoorKey-5x5-v0", "import": ["minigrid"]}})
    assert str(err.value).startswith("domain.tasks.doorkey.import: cannot import 'minigrid'")
    assert str(err.value).endswith('pip install -e ".[minigrid]"')
