"""Tracking details that every protocol relies on, against a real SQLite store."""
from __future__ import annotations

import numpy as np
import pytest

from metrics.results import MetricResults, Series
from runner.tracking import TrackedRun, TrackingSettings, flatten, metric_key


def test_long_series_are_binned_and_kept_whole_in_a_csv(experiment, client, tmp_path):
    settings = TrackingSettings(uri=experiment["uri"], experiment_name=experiment["name"],
                                artifact_location=experiment["artifacts"], max_series_points=100)
    steps = np.arange(5, 10_005)
    values = np.sin(steps / 50.0)
    values[17] = np.nan
    with TrackedRun.start(settings, run_name="binning") as run:
        run.log_results(MetricResults(values={"final": 1.0}, series={"reward": Series(steps, values), "short": Series([0, 1], [2.0, 3.0])}))
    history = sorted(client.get_metric_history(run.run_id, "reward"), key=lambda m: m.step)
    assert len(history) == 100
    # Plain loop: 10,000 points in 100 bins of exactly 100, NaN left out of its bin's mean.
    for b, point in enumerate(history):
        chunk = [v for v in values[b * 100:(b + 1) * 100] if v == v]
        assert point.step == steps[b * 100]
        assert point.value == pytest.approx(sum(chunk) / len(chunk), abs=1e-12)
    assert [m.value for m in sorted(client.get_metric_history(run.run_id, "short"), key=lambda m: m.step)] == [2.0, 3.0]
    local = client.download_artifacts(run.run_id, "series/reward.csv", str(tmp_path))
    table = np.genfromtxt(local, delimiter=",", skip_header=1)
    np.testing.assert_array_equal(table[:, 0], steps)
    np.testing.assert_array_equal(np.isnan(table[:, 1]), np.isnan(values))
    assert "downsampled.reward" in client.get_run(run.run_id).data.tags


def test_scalar_and_series_of_one_name_do_not_collide(experiment, client):
    settings = TrackingSettings(uri=experiment["uri"], experiment_name=experiment["name"], artifact_location=experiment["artifacts"])
    with TrackedRun.start(settings, run_name="collide") as run:
        run.log_results(MetricResults(values={"acc": 0.5}, series={"acc": Series([0, 1, 2], [0.9, 0.7, 0.5])}))
    assert [m.value for m in client.get_metric_history(run.run_id, "acc")] == [0.5]
    assert sorted(m.value for m in client.get_metric_history(run.run_id, "acc_by_step")) == [0.5, 0.7, 0.9]


def test_na_values_are_tags_with_reasons(experiment, client):
    settings = TrackingSettings(uri=experiment["uri"], experiment_name=experiment["name"], artifact_location=experiment["artifacts"])
    with TrackedRun.start(settings, run_name="na") as run:
        results = MetricResults()
        results.set("m1", float("nan"))
        results.set("m2@0.3", 4.0)
        run.log_results(results)
    data = client.get_run(run.run_id).data
    assert "m1" not in data.metrics and "undefined" in data.tags["na.m1"]
    assert data.metrics["m2_at_0.3"] == 4.0


def test_metric_keys_and_flattening():
    assert metric_key("m2_cdt_pct@0.175") == "m2_cdt_pct_at_0.175"
    assert metric_key("task/cartpole_default/saturation") == "task/cartpole_default/saturation"
    assert flatten({"a": {"b": 1, "c": [1, 2]}, "d": None}) == {"a.b": "1", "a.c": "[1, 2]", "d": "null"}


def test_failed_run_keeps_what_was_logged(experiment, client):
    settings = TrackingSettings(uri=experiment["uri"], experiment_name=experiment["name"], artifact_location=experiment["artifacts"])
    with pytest.raises(RuntimeError):
        with TrackedRun.start(settings, run_name="fails") as run:
            run.log_metrics({"partial": 3.0})
            raise RuntimeError("agent exploded")
    r = client.get_run(run.run_id)
    assert r.info.status == "FAILED" and r.data.metrics["partial"] == 3.0
    assert "agent exploded" in r.data.tags["error"]
