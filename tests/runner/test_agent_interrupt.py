"""An agent's own KeyboardInterrupt (raised by its code, no Ctrl-C pressed) is the agent's crash: its run ends
FAILED with the completed trials, and a sweep goes on to its next job. Only a real SIGINT is an interruption
(tests/runner/test_faults.py keeps that side)."""

from __future__ import annotations

import pytest
from mlflow.tracking import MlflowClient

from tests.fixtures.searchpath import TEST_AGENTS
from tests.inprocess import run_module
from tests.runner.test_sweeps import PROJECT_ROOT

INTERRUPTING = [TEST_AGENTS, "agent=ond/crashing", "agent.interrupt=true", "agent.crash_at_trial=1"]


def _runs(experiment) -> list:
    client = MlflowClient(experiment["uri"])
    exp = client.get_experiment_by_name(experiment["name"])
    return client.search_runs([exp.experiment_id])


@pytest.mark.parametrize("job_process", ["fork", "inline"])
@pytest.mark.slow
def test_an_agents_keyboard_interrupt_fails_its_run_and_the_sweep_goes_on(experiment, tmp_path, job_process):
    args = ["-m", "+experiment=ond_given_detection", *INTERRUPTING, "seed=0,1", "protocol.num_trials=3"]
    proc = run_module(
        "owl_eval",
        [*args, *experiment["overrides"], f"hydra.sweep.dir={tmp_path}/sweep"],
        cwd=PROJECT_ROOT,
        env={"OWL_EVAL_JOB_PROCESS": job_process},
        unset=("OWL_EVAL_PARENT_RUN_ID",),
        timeout=600,
    )
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-3000:])  # a failed job, not 130 (Ctrl-C)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "KeyboardInterrupt" in errors[0] and "no Ctrl-C" in errors[0], proc.stderr[-3000:]
    assert "interrupted" not in proc.stderr
    runs = _runs(experiment)
    jobs = sorted((r.data.params["seed"], r.info.status) for r in runs if r.data.tags.get("owl_eval.kind") == "job")
    assert jobs == [("0", "FAILED"), ("1", "FAILED")]  # the second job ran after the first one's "interrupt"
    for run in runs:
        if run.data.tags.get("owl_eval.kind") == "job":
            # trial 0 was completed before the agent raised in trial 1: it is scored and logged
            assert run.data.tags.get("partial_record") == "true"
            assert 0 <= run.data.metrics["top1"] <= 1
