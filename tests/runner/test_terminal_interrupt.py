"""Ctrl-C the terminal's way: SIGINT to the whole foreground process group (the launcher, the job's process and a
launcher's workers at once), not only to the launcher's pid. The run ends KILLED with the trials it completed scored
and logged, and the command exits 130."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from mlflow.tracking import MlflowClient

from tests.fixtures.searchpath import TEST_AGENTS
from tests.runner.test_sweeps import PROJECT_ROOT


def _interrupt_after_marks(args: list[str], marks, count: int, *, group: bool) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("OWL_EVAL_PARENT_RUN_ID", "MLFLOW_TRACKING_URI")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "owl_eval", *args],
        cwd=PROJECT_ROOT,
        env=env | {"MLFLOW_DISABLE_TELEMETRY": "true", "PYTHONPATH": str(PROJECT_ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a terminal's foreground job has
    )
    deadline = time.monotonic() + 300
    while (not marks.is_dir() or len(list(marks.iterdir())) < count) and proc.poll() is None:
        assert time.monotonic() < deadline, "the agents never completed their first trials"
        time.sleep(0.1)
    if group:
        os.killpg(proc.pid, signal.SIGINT)
    else:
        os.kill(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _job_runs(experiment) -> list:
    client = MlflowClient(experiment["uri"])
    exp = client.get_experiment_by_name(experiment["name"])
    return [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("owl_eval.kind") == "job"]


JOBLIB = ["-m", "seed=0,1", "hydra/launcher=joblib"]


@pytest.mark.parametrize(
    ("launch", "group"),
    [
        pytest.param([], True, id="single-run"),
        pytest.param(JOBLIB, True, id="joblib-sweep", marks=pytest.mark.slow),
        pytest.param(JOBLIB, False, id="joblib-sweep-launcher-only", marks=pytest.mark.slow),
    ],
)
@pytest.mark.slow
def test_ctrl_c_keeps_the_completed_trials(experiment, tmp_path, launch, group):
    """``group``: the terminal's way (every process of the group); else ``kill -INT`` of the launcher alone."""
    marks = tmp_path / "marks"
    jobs = 2 if launch else 1
    args = [
        *launch,
        "+experiment=ond_given_detection",
        TEST_AGENTS,
        "agent=ond/marking",
        f"agent.marker_dir={marks}",
        "agent.after_trials=2",
        "protocol.num_trials=400",
        *experiment["overrides"],
        f"hydra.run.dir={tmp_path}/run",
        f"hydra.sweep.dir={tmp_path}/sweep",
    ]
    proc = _interrupt_after_marks(args, marks, jobs, group=group)
    assert proc.returncode == 130, (proc.returncode, proc.stderr[-3000:])
    assert "Traceback" not in proc.stderr
    runs = _job_runs(experiment)
    assert len(runs) == jobs
    for run in runs:
        assert run.info.status == "KILLED"
        assert run.data.tags.get("partial_record") == "true"  # the two completed trials, scored
        assert 0 <= run.data.metrics["top1"] <= 1
