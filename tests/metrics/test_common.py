"""Common checks over every protocol of the registry, on real jobs (like sklearn's ``test_common.py``).

For each protocol one small job runs through the Python API (``owl_eval.runner.api.run``, real Hydra, a SQLite
MLflow store in a temp dir), once with non-default settings that make names from settings (the OND threshold,
the trajectory ``k_values``). Every name the job reports must have a declaration (``registry.spec_for``) whose
bounds hold its value, and every metric the job reported as N/A (an ``na.<key>`` tag, read back with
MlflowClient) must be declared too (its entry in the run's ``metric_keys.json``). These are also the fast suite's smoke run of each
protocol end to end.
"""

from __future__ import annotations

import math

import pytest

from owl_eval.evaluation.registry import spec_for
from owl_eval.protocols import all_protocols
from owl_eval.runner.api import run
from owl_eval.tracking.key_index import download_index
from owl_eval.tracking.keys import mlflow_key

NA_TAG = "na."
# One small job per protocol: (overrides, names the settings must have generated).
JOBS = {
    "ond": (
        [
            "+experiment=ond_system_detection",
            "protocol.num_trials=3",
            "protocol.trials_without_novelty=1",
            "protocol.pre_novelty=20",
            "protocol.post_novelty=40",
            "metrics.threshold=0.3",
            "metrics.threshold_grid=true",
            "metrics.asymptotic_width=20",
        ],
        ("m2_cdt_pct@0.175", "m21_fp_pct@0.9", "baseline.top1"),
    ),
    "continual": (["+experiment=continual_split_digits", "agent.epochs=2"], ("average_accuracy",)),
    "trajectory": (
        [
            "+experiment=trajectory_crowd",
            "domain.num_train_scenes=6",
            "domain.num_test_scenes=4",
            "protocol.num_preds=12",
            "metrics.k_values=[3,7]",
        ],
        ("min_ade_3_marginal", "min_fde_7_joint", "miss_rate_3_joint"),
    ),
    "lifelong_rl": (
        [
            "+experiment=lifelong_rl_frozenlake_syllabus",
            "protocol.syllabus.generate.train_episodes=30",
            "protocol.syllabus.generate.test_episodes=3",
            "protocol.ste.episodes=20",
        ],
        ("saturation", "ste_rel_perf"),
    ),
}


def test_every_protocol_of_the_registry_has_a_job():
    assert set(JOBS) <= set(all_protocols())
    assert set(JOBS) == {"ond", "continual", "trajectory", "lifelong_rl"}


@pytest.mark.parametrize("protocol", sorted(JOBS))
def test_every_reported_and_na_name_is_declared_and_within_its_bounds(protocol, experiment, client, tmp_path):
    if protocol == "lifelong_rl":
        pytest.importorskip("gymnasium")
    overrides, generated = JOBS[protocol]
    extra = [f"protocol.ste.dir={tmp_path / 'ste'}"] if protocol == "lifelong_rl" else []
    returned = run([*overrides, *experiment["overrides"], *extra, "figures=false"], output_dir=tmp_path / "out")
    (mlflow_run,) = client.search_runs([client.get_experiment_by_name(experiment["name"]).experiment_id])
    assert mlflow_run.info.status == "FINISHED" and mlflow_run.data.tags["protocol"] == protocol

    assert len(returned) > 5, returned
    for name in generated:  # the settings above really produced these names
        assert name in returned, f"{protocol}: {name!r} was not reported"
    undeclared = [name for name in returned if spec_for(protocol, name) is None]
    assert not undeclared, f"{protocol}: reported but not declared: {undeclared}"
    outside = {}
    for name, value in returned.items():
        low, high = spec_for(protocol, name).bounds
        if not (math.isfinite(value) and low <= value <= high):
            outside[name] = (value, (low, high))
    assert not outside, f"{protocol}: values outside their declared bounds: {outside}"

    index = download_index(client, mlflow_run.info.run_id)
    assert index is not None and set(mlflow_run.data.metrics) <= set(index)
    na_keys = [k for k in index if f"{NA_TAG}{k}" in mlflow_run.data.tags]
    assert len(na_keys) == sum(t.startswith(NA_TAG) for t in mlflow_run.data.tags)
    undeclared_na = [key for key in na_keys if not index[key].declared]
    assert not undeclared_na, f"{protocol}: N/A but not declared: {undeclared_na}"
    assert not set(na_keys) & {mlflow_key(name, protocol) for name in returned}, "a metric is both reported and N/A"
