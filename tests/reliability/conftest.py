"""Fixtures of the reliability catalogue (the checks themselves are in ``harness.py``)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.reliability.harness import Workspace


@pytest.fixture(scope="session")
def store_template(tmp_path_factory) -> Path:
    """A real MLflow SQLite store holding one finished run (creating the schema costs ~8 s: done once)."""
    from mlflow.tracking import MlflowClient

    root = tmp_path_factory.mktemp("store_template")
    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
    exp = client.create_experiment("owl-eval", artifact_location=(root / "mlartifacts").as_uri())
    run = client.create_run(exp, run_name="existing")
    client.set_terminated(run.info.run_id)
    return root / "mlflow.db"


@pytest.fixture()
def workspace(tmp_path, store_template, request) -> Workspace:
    """A workspace with its own copy of the store; a test marked ``subprocess`` runs the real ``python -m``."""
    store = tmp_path / "store"
    store.mkdir()
    shutil.copy(store_template, store / "mlflow.db")
    real = request.node.get_closest_marker("subprocess") is not None
    return Workspace(root=tmp_path, store=store, in_process=False if real else None)
