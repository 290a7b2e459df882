"""A store that is not there, or is not a database any more: one ``error:`` line naming the store file and what to
do, never SQL or a traceback; a command that only reads (``owl-eval-compare``) never creates a store."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from tests.inprocess import COMPARE, run_module

OND = ["+experiment=ond_given_detection", "protocol.num_trials=2", "progress=false", "figures=false"]


def _one_error_line(proc, *words: str) -> str:
    assert proc.returncode != 0, proc.stdout[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr[-3000:]
    for word in words:
        assert word in errors[0], errors[0]
    for leak in ("Traceback", "[SQL:", "sqlalche.me", "sqlite3.DatabaseError"):
        assert leak not in proc.stdout + proc.stderr, (leak, proc.stderr[-3000:])
    return errors[0]


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_compare_in_a_folder_without_a_store_creates_nothing(tmp_path):
    proc = run_module(COMPARE, ["experiment=ond_given_detection"], cwd=tmp_path)
    _one_error_line(proc, "no MLflow store at", str(tmp_path / "outputs" / "mlflow.db"), "--store-dir")
    assert _files(tmp_path) == []  # no outputs/, no mlflow.db
    elsewhere = tmp_path / "archive"
    proc = run_module(COMPARE, [f"--store-dir={elsewhere}", "experiment=x"], cwd=tmp_path)
    _one_error_line(proc, str(elsewhere / "mlflow.db"))
    proc = run_module(COMPARE, [f"--uri=sqlite:///{tmp_path}/none.db", "experiment=x"], cwd=tmp_path)
    _one_error_line(proc, str(tmp_path / "none.db"))
    assert _files(tmp_path) == []


@pytest.mark.parametrize("damage", ["not-a-database", "truncated"])
def test_a_damaged_store_is_named_with_what_to_do(tmp_path, damage):
    """Run once, damage the store, then both a run and a comparison say which file and what to do."""
    launch = tmp_path / "launch"
    launch.mkdir()
    first = run_module("owl_eval", OND, cwd=launch)
    assert first.returncode == 0, first.stderr[-3000:]
    db = launch / "outputs" / "mlflow.db"
    good = db.read_bytes()
    # A truncated store keeps SQLite's header but loses the pages its schema points at.
    db.write_bytes(b"this is not a database\n" * 50 if damage == "not-a-database" else good[:5000])
    damaged = db.read_bytes()

    proc = run_module("owl_eval", OND, cwd=launch)
    line = _one_error_line(proc, str(db), "restore it from a backup", "tracking.store_dir")
    assert ("not a SQLite database" if damage == "not-a-database" else "is damaged") in line
    proc = run_module(COMPARE, ["experiment=ond_given_detection"], cwd=launch)
    _one_error_line(proc, str(db), "--store-dir")
    assert db.read_bytes() == damaged  # reading it wrote nothing


def test_compare_reads_a_store_it_may_not_write(tmp_path):
    """An archived store on a read-only medium: the comparison reads it, no ``--uri`` needed. (A copy of the
    store opened as SQLite's ``immutable`` file stands in for a read-only mount when the tests run as root.)"""
    launch = tmp_path / "launch"
    launch.mkdir()
    for seed in (0, 1):
        proc = run_module("owl_eval", [*OND, f"seed={seed}"], cwd=launch)
        assert proc.returncode == 0, proc.stderr[-3000:]
    archive = tmp_path / "archive"
    shutil.copytree(launch / "outputs", archive / "outputs")
    db = archive / "outputs" / "mlflow.db"
    before = db.read_bytes()
    folder_mode = (archive / "outputs").stat().st_mode
    (archive / "outputs").chmod(0o555)
    db.chmod(0o444)
    try:
        proc = run_module(COMPARE, ["experiment=ond_given_detection"], cwd=archive)
    finally:
        (archive / "outputs").chmod(folder_mode)
        db.chmod(0o644)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "knn_novelty" in proc.stdout
    assert db.read_bytes() == before
    with sqlite3.connect(db) as con:  # the two runs, nothing added
        assert con.execute("select count(*) from runs").fetchone()[0] == 2
