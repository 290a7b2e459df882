"""A sweep on a local Ray cluster (``ray start --head``, then ``hydra/launcher=ray`` connecting to it).

Opt-in: needs the ``ray`` extra (hydra-ray-launcher), which cannot share an environment with joblib 1.6,
so it lives in its own venv (see docs/SWEEPS.md); skipped otherwise. Ray listens on every interface, so
this is kept out of CI's default run (``-m "not ray"``). Jobs on an existing cluster do not inherit the
driver's environment: they find the sweep's parent run by its sweep-dir tag, which this test checks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

pytest.importorskip("hydra_plugins.hydra_ray_launcher", reason="the ray extra (hydra-ray-launcher) is not installed")

pytestmark = [pytest.mark.ray, pytest.mark.slow]
PROJECT_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def ray_cluster(tmp_path, start_background, free_port):
    """A one-node Ray cluster in the foreground (``--block``), so stopping that one process stops it all."""
    ray = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
    if ray is None:
        pytest.skip("the ray command is not on PATH")
    port = free_port
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_USAGE_STATS_ENABLED": "0"}
    proc = start_background(
        [
            ray,
            "start",
            "--head",
            "--block",
            f"--port={port}",
            "--node-ip-address=127.0.0.1",
            "--num-cpus=2",
            "--include-dashboard=false",
            "--disable-usage-stats",
        ],
        log_name="ray.log",
        env=env,
    )
    deadline = time.monotonic() + 120
    while "Ray runtime started" not in (tmp_path / "ray.log").read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"ray start failed:\n{(tmp_path / 'ray.log').read_text()[-3000:]}")
        time.sleep(1)
    return f"127.0.0.1:{port}"


def test_ray_sweep_on_existing_cluster(ray_cluster, mlflow_store, client, tmp_path):
    from owl_eval.runner.app import run

    name = f"ray-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true", "RAY_AUTH_MODE": "token"}
    env.pop("OWL_EVAL_PARENT_RUN_ID", None)
    common = [
        "+experiment=ond_system_detection",
        f"tracking.uri={mlflow_store['uri']}",
        f"tracking.artifact_location={mlflow_store['artifacts']}",
        "protocol.num_trials=2",
        "figures=false",
        "progress=false",
    ]
    cmd = [
        sys.executable,
        "-m",
        "owl_eval",
        "-m",
        *common,
        f"experiment_name={name}",
        "agent=ond/knn_novelty,ond/closed_world",
        "seed=0,1",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        "hydra/launcher=ray",
        f"hydra.launcher.ray.init.address={ray_cluster}",
        "+hydra.launcher.ray.init.object_store_memory=null",
    ]
    proc = subprocess.run(cmd, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    exp = client.get_experiment_by_name(name)
    runs = client.search_runs([exp.experiment_id])
    (parent,) = [r for r in runs if r.data.tags["owl_eval.kind"] == "sweep"]
    children = [r for r in runs if r.data.tags["owl_eval.kind"] == "job"]
    assert parent.info.status == "FINISHED" and len(children) == 4
    assert all(
        c.info.status == "FINISHED" and c.data.tags["mlflow.parentRunId"] == parent.info.run_id for c in children
    )
    assert "found by its sweep-dir tag" in proc.stdout + proc.stderr
    assert parent.data.metrics["ond.knn_novelty/n_runs"] == 2
    # Same config and seed, same numbers as a plain in-process run.
    knn0 = next(c for c in children if c.data.tags["agent"] == "ond/knn_novelty" and c.data.tags["seed"] == "0")
    local = run(
        [*common, f"experiment_name={name}-local", "agent=ond/knn_novelty", "seed=0"], output_dir=tmp_path / "local"
    )
    assert knn0.data.metrics["top1"] == local["top1"]
    assert knn0.data.metrics["top3"] == local["top3"]
