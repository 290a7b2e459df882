"""Every lifelong-RL metric the README lists has a value in the real default run of each shipped syllabus
experiment (only the STE store and the MLflow store redirected, no figures), read back from MLflow: every listed
metric logged, none N/A. Integration suite: the agents learn at the shipped sizes (about a minute in all); the
layout-only check of the same promise is tests/runner/test_rl_default_syllabi.py."""

from __future__ import annotations

import pytest

from tests.runner.test_rl_default_syllabi import SYLLABUS_EXPERIMENTS, readme_rl_metrics


@pytest.mark.parametrize("shipped", SYLLABUS_EXPERIMENTS)
def test_the_default_run_logs_every_readme_metric(shipped, experiment, client, tmp_path):
    pytest.importorskip("gymnasium")
    if "minigrid" in shipped:
        pytest.importorskip("minigrid", reason='the minigrid extra: pip install -e ".[minigrid]"')
    from owl_eval.metrics.keys import MetricKey
    from owl_eval.runner.api import run
    from owl_eval.tracking.keys import mlflow_key

    run(
        [f"+experiment={shipped}", *experiment["overrides"], f"protocol.ste.dir={tmp_path / 'ste'}", "figures=false"],
        output_dir=tmp_path / "out",
    )
    (r,) = client.search_runs([client.get_experiment_by_name(experiment["name"]).experiment_id])
    assert r.info.status == "FINISHED"
    na = {k[len("na.") :]: v for k, v in r.data.tags.items() if k.startswith("na.")}
    for name in readme_rl_metrics():
        key = mlflow_key(MetricKey(name), "lifelong_rl")
        assert key in r.data.metrics and key not in na, f"{shipped}: {name} is N/A: {na.get(key)}"
