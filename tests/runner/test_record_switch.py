"""``tracking.log_record=false`` turns the record artifact off (records are the bulk of a run's size)."""

from __future__ import annotations

from owl_eval.runner.api import run


def test_log_record_false_writes_no_record(experiment, client, tmp_path):
    run(
        [
            "+experiment=trajectory_crowd",
            *experiment["overrides"],
            "domain.num_train_scenes=20",
            "domain.num_test_scenes=4",
            "tracking.log_record=false",
            "figures=false",
        ],
        output_dir=tmp_path,
    )
    exp = client.get_experiment_by_name(experiment["name"])
    (r,) = client.search_runs([exp.experiment_id])
    assert r.info.status == "FINISHED" and "ade_marginal" in r.data.metrics
    assert client.list_artifacts(r.info.run_id, "record") == []
