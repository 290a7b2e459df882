"""Eight first runs at once on a SQLite store that does not exist yet: all finish (integration suite: eight real
command lines at once; the store-location cases are in ``tests/runner/test_store_location.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from owl_eval.tracking.settings import sqlite_uri
from tests.runner.test_store_location import SMALL


@pytest.mark.slow
@pytest.mark.subprocess
def test_eight_jobs_started_at_once_on_a_store_that_does_not_exist_yet_all_finish(tmp_path):
    """Each creates the SQLite store if it is not there (MLflow's schema migrations): they take turns on a lock
    file beside it. Without it, all 8 failed mid-migration and left the store unreadable."""
    import os
    import subprocess
    import sys

    from mlflow.tracking import MlflowClient

    store = tmp_path / "store"
    env = os.environ | {"MLFLOW_DISABLE_TELEMETRY": "true", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    env.pop("MLFLOW_TRACKING_URI", None)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "owl_eval", *SMALL, f"seed={seed}", f"tracking.store_dir={store}"],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed in range(8)
    ]
    outcomes = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    assert [code for code, _ in outcomes] == [0] * 8, [err[-1500:] for code, err in outcomes if code]
    client = MlflowClient(tracking_uri=sqlite_uri(store / "mlflow.db"))
    runs = client.search_runs([client.get_experiment_by_name("ond_given_detection").experiment_id])
    assert sorted(r.data.params["seed"] for r in runs) == [str(s) for s in range(8)]
    assert all(r.info.status == "FINISHED" for r in runs)
