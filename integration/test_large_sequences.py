"""A 1,000-task continual sequence from the command line: what it logs (a bounded store, Renate's values, the matrix
exactly in the record artifact) and the peak memory of the real command. Part of the integration suite (``.ci/full``
runs it after ``.ci/run``); the small pieces are in ``tests/runner/test_large_sequences.py``."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import numpy as np
import pytest

from owl_eval.formats.checksums import CHECKSUMS_FILE
from owl_eval.protocols.continual.evaluation import TASK_SERIES_TAG
from owl_eval.protocols.continual.metrics import SPECS
from owl_eval.protocols.continual.options import MAX_TASK_SERIES, task_series_tasks
from owl_eval.protocols.continual.record import RECORD_FILE
from tests.inprocess import PROJECT_ROOT, run_module
from tests.runner.test_large_sequences import (
    MEMORY_LIMIT,
    SCALARS_AND_TIMINGS,
    STORE_LIMIT,
    T,
    command,
    plain_renate,
    sequence,
    store_bytes,
    write_csv,
)


@pytest.mark.slow
def test_a_thousand_task_sequence_logs_a_bounded_store_and_renates_metrics(tmp_path):
    from mlflow.tracking import MlflowClient

    A, b, n = sequence()
    path = write_csv(tmp_path / "accuracy.csv", A)
    done = run_module("owl_eval.runner.cli.evaluate", command(path, b, n), cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]

    db = tmp_path / "outputs" / "mlflow.db"
    client = MlflowClient(tracking_uri=f"sqlite:///{db}")
    (run,) = client.search_runs([client.get_experiment_by_name("evaluate").experiment_id])
    assert run.info.status == "FINISHED"

    # the store: the one exact copy of the matrix (~7.5 MB of random float64) and O(T) metric rows
    size = store_bytes(tmp_path)
    assert size < STORE_LIMIT, f"{size / 1e6:.1f} MB"
    with sqlite3.connect(db) as con:
        rows = con.execute("select count(*) from metrics").fetchone()[0]
        keys = [k for (k,) in con.execute("select distinct key from metrics")]
    assert rows <= (len(SPECS) + MAX_TASK_SERIES) * T + SCALARS_AND_TIMINGS, rows
    series_of = sorted(int(k.split("/")[2]) for k in keys if k.startswith("detail/task/"))
    assert series_of == task_series_tasks(T, MAX_TASK_SERIES).tolist()
    assert series_of[0] == 0 and series_of[-1] == T - 1 and len(series_of) == MAX_TASK_SERIES
    i = series_of[3]
    history = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id, f"detail/task/{i}/accuracy"))
    assert history == [(j, A[j, i]) for j in range(T)]  # column i of A, exactly
    tag = run.data.tags[TASK_SERIES_TAG]
    assert tag.startswith(f"{MAX_TASK_SERIES} of {T} tasks have a series detail/task/<i>/accuracy")
    assert "record/continual_record.npz" in tag and ", ".join(map(str, series_of)) in tag

    # the matrix artifact: the record's npz holds A exactly; the text copies are left out beyond 200 tasks
    record_files = {a.path for a in client.list_artifacts(run.info.run_id, "record")}
    assert record_files == {f"record/{RECORD_FILE}", f"record/{CHECKSUMS_FILE}"}
    saved = client.download_artifacts(run.info.run_id, f"record/{RECORD_FILE}", str(tmp_path / "back"))
    with np.load(saved, allow_pickle=False) as arrays:
        assert arrays["accuracy"].dtype == np.float64
        assert np.array_equal(arrays["accuracy"], A)
        assert np.array_equal(arrays["init_accuracy"], b) and np.array_equal(arrays["num_instances"], n)

    # every scalar metric: Renate's definitions, computed here by loops; the series over tasks too
    metrics = run.data.metrics
    for name, value in plain_renate(A.tolist(), b.tolist(), n.tolist()).items():
        assert metrics[name] == pytest.approx(value, abs=1e-12), name
    assert metrics["detail/tasks_completed"] == T
    by_task = {m.step: m.value for m in client.get_metric_history(run.info.run_id, "detail/by_task/average_accuracy")}
    assert sorted(by_task) == list(range(T))
    for t in (0, 1, 499, T - 1):
        assert by_task[t] == pytest.approx(A[t, : t + 1].mean(), abs=1e-12)

    # the figures are drawn, each of bounded size
    plots = {a.path: a.file_size for a in client.list_artifacts(run.info.run_id, "plots")}
    assert set(plots) == {"plots/accuracy_matrix.png", "plots/task_accuracy.png", "plots/metrics_by_task.png"}
    assert max(plots.values()) < 2_000_000, plots


WRAPPER = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:])
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, done.returncode)
"""


@pytest.mark.slow
@pytest.mark.subprocess
def test_a_thousand_task_sequence_stays_under_a_gigabyte(tmp_path):
    """The peak resident memory of the real command and every process it waited for (its job process), measured by
    a wrapper process of its own: the test process's RUSAGE_CHILDREN would also count earlier tests' children."""
    A, b, n = sequence()
    path = write_csv(tmp_path / "accuracy.csv", A)
    env = os.environ | {"PYTHONPATH": str(PROJECT_ROOT), "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("MLFLOW_TRACKING_URI", None)
    done = subprocess.run(
        [sys.executable, "-c", WRAPPER, sys.executable, "-m", "owl_eval.runner.cli.evaluate", *command(path, b, n)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    peak_kib, code = (int(word) for word in done.stdout.split()[-2:])
    assert code == 0, done.stderr[-3000:]
    assert peak_kib * 1024 < MEMORY_LIMIT, f"peak RSS {peak_kib / 1024:.0f} MiB"
    assert store_bytes(tmp_path) < STORE_LIMIT
