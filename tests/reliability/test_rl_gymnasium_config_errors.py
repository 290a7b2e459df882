"""domain=gymnasium's bad configs stop ``python -m owl_eval`` before any MLflow run exists (the catalogue's checks,
``assert_clean_failure``: one ``error:`` line naming the key, no traceback, no run in the store, nothing written
outside it): an unknown environment id, an attribute the unwrapped env lacks, a bad gymnasium.make keyword (each
naming the task, the variant and the key), and spaces the agent cannot take (naming both spaces)."""

from __future__ import annotations

import pytest

from tests.reliability.harness import assert_clean_failure, run_cli

pytest.importorskip("gymnasium")

MC = "+experiment=lifelong_rl_mountaincar_syllabus"

CASES = [
    (
        "unknown_env_id",
        [MC, "domain.tasks.mountaincar.id=NoSuchCar-v0"],
        ["domain.tasks.mountaincar.id", "variant default", "NoSuchCar-v0"],
    ),
    (
        "unknown_attribute",
        [MC, "+domain.tasks.mountaincar.variants.strong_engine.forse=0.002"],
        ["domain.tasks.mountaincar.variants.strong_engine.forse", "MountainCarEnv", "no attribute 'forse'"],
    ),
    (
        "bad_make_kwarg",
        [MC, "+domain.tasks.mountaincar.variants.fast_finish.make_kwargs.top_speed=1"],
        ["domain.tasks.mountaincar.variants.fast_finish.make_kwargs.top_speed", "unexpected keyword argument"],
    ),
    (
        "bad_make_kwarg_value",
        [MC, "domain.tasks.mountaincar.variants.fast_finish.make_kwargs.goal_velocity=fast"],
        ["domain.tasks.mountaincar.variants.fast_finish.make_kwargs.goal_velocity", "MountainCar-v0"],
    ),
    (
        "agent_observation_space",
        [MC, "agent.tiles=[4,4,8,8]"],
        ["agent.tiles", "expects observations Box(shape=(4,))", "observes Box([-1.2", "(2,))", "mountaincar"],
    ),
    (
        "env_action_space",
        [MC, "domain.tasks.mountaincar.id=MountainCarContinuous-v0"],
        ["domain.tasks.mountaincar.variants.default", "acts in Box(-1.0, 1.0, (1,), float32)", "Discrete(n)"],
    ),
    (
        "unknown_wrapper",
        [MC, "+domain.tasks.mountaincar.wrappers=[{_target_:gymnasium.wrappers.NoSuchWrapper}]"],
        ["domain.tasks.mountaincar.wrappers[0]", "variant default", "NoSuchWrapper"],
    ),
]


@pytest.mark.parametrize("name, args, mentions", CASES, ids=[c[0] for c in CASES])
def test_bad_gymnasium_domain_stops_before_any_run(workspace, name, args, mentions):
    line = assert_clean_failure(run_cli("runner", args, workspace), *mentions)
    assert len(line) < 1000, line
