"""SWEEPS.md's tracking-server block, whole, against a real ``mlflow server`` (integration suite: a service started
for the test; the other blocks of docs/ run in ``tests/runner/test_docs.py``)."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import time
import urllib.request

import pytest

from tests.runner.test_docs import SERVER_BLOCK, _run, code_blocks, commands
from tests.runner.test_readme import _environment, _prepared


@pytest.mark.slow
def test_docs_tracking_server_block_runs_against_a_real_server(tmp_path, free_port):
    """SWEEPS.md's server block, whole: the server on a free port with its store in a temp folder, the
    environment line, the sweep; the sweep's parent and both jobs are on the server."""
    from mlflow.tracking import MlflowClient

    block = next(b for b in code_blocks() if SERVER_BLOCK in b.text)
    server, export, sweep = commands(block)
    server_words = shlex.split(
        server.replace("/abs/path", str(tmp_path)).replace("5000", str(free_port)), comments=True
    )
    key, _, uri = shlex.split(export, comments=True)[1].partition("=")
    assert key == "MLFLOW_TRACKING_URI" and uri == "http://127.0.0.1:5000"
    uri = uri.replace("5000", str(free_port))
    (tmp_path / "outputs").mkdir()
    env = _environment(tmp_path)
    proc = subprocess.Popen(
        server_words, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
                    assert response.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline, "mlflow server did not answer /health within 180 s"
                time.sleep(1)
        words, env = _prepared(sweep, tmp_path)
        seeds = re.search(r"\bseed=(\S+)", sweep)[1]  # both seeds, as written: two jobs on joblib's two workers
        words = [f"seed={seeds}" if w.startswith("seed=") else w for w in words]
        env["MLFLOW_TRACKING_URI"] = uri
        _run(words, env, tmp_path, free_port)
        client = MlflowClient(tracking_uri=uri)
        runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
        kinds = sorted(r.data.tags.get("owl_eval.kind") for r in runs)
        assert kinds == ["job"] * len(seeds.split(",")) + ["sweep"] and all(r.info.status == "FINISHED" for r in runs)
        parent = next(r.info.run_id for r in runs if r.data.tags["owl_eval.kind"] == "sweep")
        assert all(r.data.tags.get("mlflow.parentRunId") == parent for r in runs if r.info.run_id != parent)
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
