"""How store faults are recognised wherever they surface (owl_eval.tracking.faults), and the bounded retries
owl-eval sets for MLflow's HTTP requests unless the user set them (owl_eval.tracking.store.bound_retries). The
end-to-end cases are tests/reliability/test_full_disk.py and integration/test_lost_server.py."""

from __future__ import annotations

import errno
import sqlite3

from owl_eval.errors import Terminated
from owl_eval.tracking.faults import disk_full, interruption_in, server_lost


def _raised_during(handled: BaseException, raised: BaseException) -> BaseException:
    """``raised`` as Python leaves it when raised while ``handled`` is being handled (implicit ``__context__``)."""
    try:
        try:
            raise handled
        except BaseException:
            raise raised  # noqa: B904 - the implicit context is what is tested
    except BaseException as exc:  # noqa: BLE001
        return exc


def test_a_full_disk_is_found_through_its_wrappers():
    import sqlalchemy.exc
    from mlflow.exceptions import MlflowException

    sqlite_error = sqlite3.OperationalError("database or disk is full")
    wrapped = sqlalchemy.exc.OperationalError("UPDATE runs SET status=?", {}, sqlite_error)
    try:
        raise MlflowException("(raised as a result of Query-invoked autoflush ...)") from wrapped
    except MlflowException as exc:
        assert disk_full(exc)
    assert disk_full(_raised_during(OSError(errno.ENOSPC, "No space left on device"), ValueError("writing failed")))
    assert disk_full(MlflowException("INTERNAL_ERROR: database or disk is full"))  # text only, as a server relays it
    assert not disk_full(sqlite3.OperationalError("database is locked"))
    assert not disk_full(None)


def test_a_lost_server_is_found_and_a_database_error_is_not_taken_for_one():
    from mlflow.exceptions import MlflowException

    assert server_lost(_raised_during(ConnectionRefusedError(111, "Connection refused"), MlflowException("failed")))
    assert server_lost(MlflowException("API request to http://h/api failed: Max retries exceeded with url"))
    assert not server_lost(MlflowException("RESOURCE_DOES_NOT_EXIST: run 'x' not found"))


def test_an_interruption_hidden_by_a_failed_write_is_found_but_an_agents_own_is_not():
    signal = Terminated("terminated (SIGTERM)")
    assert interruption_in(_raised_during(signal, OSError("write failed"))) is signal
    assert interruption_in(signal) is signal
    crash = RuntimeError("the agent raised KeyboardInterrupt with no Ctrl-C or signal sent")
    crash.__cause__ = KeyboardInterrupt()  # owl_eval.runner.process.worker.as_agent_crash
    assert interruption_in(_raised_during(crash.__cause__, crash)) is None
    assert interruption_in(ValueError("x")) is None


def test_http_retries_are_bounded_unless_the_user_set_them(monkeypatch):
    import os

    from owl_eval.tracking.store import HTTP_RETRY_DEFAULTS, bound_retries

    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "600")
    bound_retries()
    assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == HTTP_RETRY_DEFAULTS["MLFLOW_HTTP_REQUEST_MAX_RETRIES"]
    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "600"
    # the bound the README states: a refused connection gives up within ~10 s (sum of backoffs + jitter)
    retries = int(HTTP_RETRY_DEFAULTS["MLFLOW_HTTP_REQUEST_MAX_RETRIES"])
    factor = float(HTTP_RETRY_DEFAULTS["MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR"])
    assert sum(factor * 2**i for i in range(retries)) + retries * 1.0 <= 10.0


def test_a_full_disk_met_copying_a_file_names_the_copy_and_the_stores_own_disk_as_the_store(tmp_path):
    """shutil's copy (how an artifact reaches a local store) raises ENOSPC with the source as ``filename`` and the
    file written as ``filename2``: the message names the disk written to, never the source's (which has room)."""
    import os
    from pathlib import Path

    from owl_eval.tracking.faults import failed_file, full_disk_message

    store = tmp_path / "store" / "mlflow.db"
    store.parent.mkdir()
    store.write_bytes(b"")
    written = tmp_path / "store" / "mlartifacts" / "1" / "abc" / "artifacts" / "table.json"
    source = Path("/elsewhere/tmp/table.json")
    copy_error = OSError(errno.ENOSPC, "No space left on device", str(source), None, str(written))
    assert failed_file(copy_error) == written
    assert failed_file(OSError(errno.ENOSPC, "No space left on device", str(written))) == written
    line = full_disk_message(copy_error, str(store))
    assert line.startswith(f"the disk of MLflow store {store} is full ("), line  # the store's own disk
    assert str(source) not in line
    other_disk = Path("/dev/shm")
    if not other_disk.is_dir() or os.stat(other_disk).st_dev == os.stat(tmp_path).st_dev:
        return  # no second file system to write to here: the case above is the one that can be checked
    elsewhere = other_disk / "owl-eval-artifacts" / "table.json"
    line = full_disk_message(OSError(errno.ENOSPC, "full", str(source), None, str(elsewhere)), str(store))
    assert line.startswith(f"the disk of {elsewhere} (MLflow store {store}) is full ("), line
