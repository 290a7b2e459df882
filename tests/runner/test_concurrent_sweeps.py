"""The same configs swept by two launches at once on one store: each config runs once, and a launch's comparison
counts every job of its sweep, waiting at its end for the jobs it found running in the other launch (or naming
them as not counted when they do not finish in time)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from mlflow.tracking import MlflowClient

from tests.fixtures.searchpath import TEST_AGENTS
from tests.runner.test_sweeps import PROJECT_ROOT

SMALL = ["protocol.num_trials=2", "protocol.pre_novelty=20", "protocol.post_novelty=40"]


def _launch(args: list[str], lines: list[str]) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("OWL_EVAL_PARENT_RUN_ID", "MLFLOW_TRACKING_URI")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "owl_eval", "-m", *args],
        cwd=PROJECT_ROOT,
        env=env | {"MLFLOW_DISABLE_TELEMETRY": "true", "PYTHONPATH": str(PROJECT_ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    threading.Thread(target=lambda: lines.extend(proc.stdout), daemon=True).start()
    return proc


def _wait_for(condition, what: str, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


@pytest.mark.slow
def test_a_sweep_waits_for_its_job_running_in_another_launch(experiment, tmp_path):
    """Launch B runs seed 1 and holds it (the gated agent); launch A sweeps seeds 0 and 1, runs seed 0 and finds
    seed 1 running in B. A's end waits for it; once B's job finishes, A's comparison counts both seeds."""
    gate = tmp_path / "gate"
    gate.mkdir()
    (gate / "hold").touch()
    common = ["+experiment=ond_given_detection", TEST_AGENTS, "agent=ond/gated", f"agent.gate_dir={gate}", *SMALL]
    common += experiment["overrides"]
    b_lines: list[str] = []
    b = _launch([*common, "seed=1", f"hydra.sweep.dir={tmp_path / 'b'}"], b_lines)
    _wait_for(lambda: list(gate.glob("held-*")), "launch B's job to take the gate")
    (held,) = gate.glob("held-*")

    a_lines: list[str] = []
    a = _launch([*common, "seed=0,1", f"hydra.sweep.dir={tmp_path / 'a'}"], a_lines)
    _wait_for(lambda: any("waiting up to" in line for line in a_lines) or a.poll() is not None, "launch A's end")
    held.unlink()  # B's job goes on and finishes
    assert a.wait(timeout=300) == 0 and b.wait(timeout=300) == 0, "".join(a_lines + b_lines)[-4000:]
    a_out = "".join(a_lines)
    assert "waiting up to" in a_out and "seed=1" in a_out
    assert "(n=2)" in a_out, a_out[-3000:]  # seed 0 of A, seed 1 of B
    assert "not counted" not in a_out

    client = MlflowClient(experiment["uri"])
    exp = client.get_experiment_by_name(experiment["name"])
    jobs = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("owl_eval.kind") == "job"]
    assert sorted(r.data.params["seed"] for r in jobs) == ["0", "1"]  # each config ran once
    assert {r.info.status for r in jobs} == {"FINISHED"}
    assert Path(tmp_path / "a" / "comparison.md").read_text().count("not counted") == 0


def test_a_job_still_running_elsewhere_is_named_not_counted(mlflow_store, experiment):
    """Past the wait's bound, a reused run still RUNNING in a live process is returned as not counted."""
    from owl_eval.comparison.sweep_end import wait_for_reused_running
    from owl_eval.tracking.liveness import owner_tags

    client = MlflowClient(mlflow_store["uri"])
    experiment_id = client.create_experiment(experiment["name"])
    parent = client.create_run(experiment_id, tags={"owl_eval.kind": "sweep"}).info.run_id
    busy = client.create_run(experiment_id, tags={"owl_eval.kind": "job", **owner_tags()}).info.run_id
    done = client.create_run(experiment_id, tags={"owl_eval.kind": "job", **owner_tags()}).info.run_id
    client.set_terminated(done, "FINISHED")
    client.set_tag(parent, f"owl_eval.reused.{busy}", "seed=1")
    client.set_tag(parent, f"owl_eval.reused.{done}", "seed=0")
    started = time.monotonic()
    (line,) = wait_for_reused_running(client, parent, bound=1.5)
    assert 1.5 <= time.monotonic() - started < 10
    assert line.startswith(f"seed=1: run {busy}, process {os.getpid()} on ")
