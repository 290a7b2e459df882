"""The fast set's sweep (``python -m pytest``): ``python -m owl_eval -m`` over two agents runs both jobs under one
parent run that logs the comparison and prints where it is. The sweeps' resume, stand-ins and verdicts are checked in
the slow set (tests/runner/test_sweeps.py); ``owl-eval-compare`` on a store in test_compare.py."""

from __future__ import annotations

import uuid

from tests.runner.test_sweeps import AGENTS, SMALL, jobs_by_config, only_parent, snapshot, sweep


def test_a_two_job_sweep_finishes_under_one_parent_that_logs_the_comparison(mlflow_store, tmp_path):
    name = f"small-sweep-{uuid.uuid4().hex[:8]}"
    sweep_dir = tmp_path / "sweep"
    proc = sweep(mlflow_store, name, sweep_dir, f"agent={','.join(AGENTS)}", "seed=0", *SMALL)
    runs = snapshot(mlflow_store, name)
    parent_id, parent = only_parent(runs)
    jobs = jobs_by_config(runs)
    assert sorted(jobs) == sorted((agent, 0) for agent in AGENTS)
    for (agent, _), job in jobs.items():
        assert job["status"] == "FINISHED" and job["tags"]["mlflow.parentRunId"] == parent_id
        # one seed: the parent's value of an agent is its one job's value
        assert parent["metrics"][f"{agent.split('/')[1]}/top1"][0][1] == job["metrics"]["top1"][0][1]
    assert parent["status"] == "FINISHED"
    assert f"comparison: {sweep_dir}" in proc.stdout
    assert "| Top-1 accuracy ↑ |" in (sweep_dir / "comparison.md").read_text()
