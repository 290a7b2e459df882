"""A 1,000-task continual sequence stays small: the accuracy matrix (T² values) goes to the record artifact, the
per-task accuracy series are capped (``metrics.max_task_series``), every scalar metric is the one Renate defines,
and the store and the memory stay bounded (issue "Beyond one machine, nothing lost": before, such a sequence
logged a million metric rows, over 300 MB of store, and drew a heat map that took the process past 23 GiB).

The command line at full size (1,000 tasks, ~20-40 s each on two shared cores) is in the integration suite,
``integration/test_large_sequences.py``: in-process (what is logged) and as a real process (its peak memory).
The tests here are the pieces, small and fast.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from owl_eval.evaluation import evaluation_for
from owl_eval.protocols.continual.evaluation import CURVE_TASKS, TASK_SERIES_TAG, score_continual
from owl_eval.protocols.continual.options import MAX_TASK_SERIES, task_series_tasks
from owl_eval.protocols.continual.record import MATRIX_FILE, RENATE_FILE, ContinualRecord
from owl_eval.protocols.continual.sources.accuracy_matrix import AccuracyMatrixSource

T = 1000
STORE_LIMIT = 20_000_000  # bytes: mlflow.db and the run's artifacts
MEMORY_LIMIT = 1 << 30  # bytes of peak resident memory of the command and its job process
SCALARS_AND_TIMINGS = 40  # rows of everything that is not a series: the metrics, tasks_completed, time/*


# -------------------------------------------------------------------------------------------- the inputs
def sequence(num_tasks: int = T, seed: int = 1000):
    """A random accuracy matrix ``A`` (values in [0, 1), full float64 precision: the worst case for the size of
    every copy), init accuracies ``b`` and test sizes ``n``."""
    rng = np.random.default_rng(seed)
    return rng.random((num_tasks, num_tasks)), rng.random(num_tasks), rng.integers(50, 5000, num_tasks)


def write_csv(path: Path, A: np.ndarray) -> Path:
    """The layout owl-eval writes and reads (docs/BRING_YOUR_OWN_RESULTS.md): a header row, ``after_task``
    first, every value at repr precision (so it reads back exactly)."""
    header = ",".join(["after_task"] + [f"task_{i}" for i in range(A.shape[1])])
    lines = [header] + [",".join([str(j)] + [repr(float(v)) for v in row]) for j, row in enumerate(A)]
    path.write_text("\n".join(lines) + "\n")
    return path


def command(path: Path, b: np.ndarray, n: np.ndarray) -> list[str]:
    return [
        "+source=accuracy_matrix",
        f"source.path={path}",
        "source.init_accuracy=[" + ",".join(repr(float(v)) for v in b) + "]",
        "source.num_instances=[" + ",".join(str(int(v)) for v in n) + "]",
        "figures=true",
        "progress=false",
    ]


def plain_renate(A, b, n) -> dict[str, float]:
    """Renate's five metrics after the last task (METRICS.md section 2), as plain loops over the matrix."""
    t = len(A) - 1
    return {
        "average_accuracy": sum(A[t][i] for i in range(t + 1)) / (t + 1),
        "micro_average_accuracy": sum(A[t][i] * n[i] for i in range(t + 1)) / sum(n[: t + 1]),
        "forgetting": sum(max(A[k][i] for k in range(t)) - A[t][i] for i in range(t)) / t,
        "backward_transfer": sum(A[t][i] - A[i][i] for i in range(t)) / t,
        "forward_transfer": sum(A[i - 1][i] - b[i] for i in range(1, t + 1)) / t,
    }


def store_bytes(root: Path) -> int:
    """Bytes of the store the command made in ``root``: ``outputs/mlflow.db`` and ``outputs/mlartifacts``."""
    files = [root / "outputs" / "mlflow.db", *(root / "outputs" / "mlartifacts").rglob("*")]
    return sum(f.stat().st_size for f in files if f.is_file())


# ------------------------------------------------------------------------------------ the whole command
# ------------------------------------------------------------------------------------------------ pieces
@pytest.mark.parametrize(
    "num_tasks, cap, expected",
    [
        (5, 10, [0, 1, 2, 3, 4]),
        (10, 10, list(range(10))),
        (5, None, [0, 1, 2, 3, 4]),
        (11, 10, [0, 1, 2, 3, 4, 6, 7, 8, 9, 10]),
        (1000, 10, [0, 111, 222, 333, 444, 555, 666, 777, 888, 999]),
        (1000, 2, [0, 999]),
        (1000, 1, [0]),
        (1000, 0, []),
    ],
)
def test_the_tasks_with_a_series_are_every_task_or_an_even_spread_from_first_to_last(num_tasks, cap, expected):
    assert task_series_tasks(num_tasks, cap).tolist() == expected


def test_every_cap_below_the_sequence_picks_distinct_tasks_first_and_last_included():
    for num_tasks in (3, 7, 50, 201, 1000):
        for cap in range(2, num_tasks):
            shown = task_series_tasks(num_tasks, cap)
            assert len(np.unique(shown)) == cap and shown[0] == 0 and shown[-1] == num_tasks - 1


def test_the_cap_is_a_setting_checked_like_every_other():
    from owl_eval.errors import ConfigError
    from owl_eval.evaluation.options import parse

    assert parse("continual", {}).max_task_series == MAX_TASK_SERIES == 10
    assert parse("continual", {"max_task_series": None}).max_task_series is None
    assert parse("continual", {"max_task_series": "0"}).max_task_series == 0
    with pytest.raises(ConfigError, match=r"^metrics.max_task_series: expected an integer >= 0, got -1"):
        parse("continual", {"max_task_series": -1})
    with pytest.raises(ConfigError, match=r"^metrics.max_task_series: expected an integer, got 2.5"):
        parse("continual", {"max_task_series": 2.5})


def _record(num_tasks: int, seed: int = 3) -> ContinualRecord:
    A, b, n = sequence(num_tasks, seed)
    return ContinualRecord("class_incremental", A, b, n, tuple(() for _ in range(num_tasks)))


def test_the_cap_changes_which_series_are_logged_and_no_metric_value():
    record = _record(30)
    evaluation = evaluation_for("continual")
    every = score_continual(record)  # no cap: one series per task, as before
    capped = evaluation.evaluate(record, {})
    assert every.values == capped.values and every.na == capped.na
    for name, series in capped.series.items():
        np.testing.assert_array_equal(series.values, every.series[name].values)
    tasks = sorted(int(k.task) for k in capped.series if k.task is not None)
    assert tasks == [0, 3, 6, 10, 13, 16, 19, 23, 26, 29]
    assert sum(k.task is not None for k in every.series) == 30
    options = evaluation.options({})
    from owl_eval.tracking.keys import logged_as

    tag = evaluation.run_tags(record, options, logged_as=logged_as("continual"))[TASK_SERIES_TAG]
    assert tag == (
        "10 of 30 tasks have a series detail/task/<i>/accuracy (metrics.max_task_series=10, an even spread): "
        "0, 3, 6, 10, 13, 16, 19, 23, 26, 29; the whole accuracy matrix: record/continual_record.npz, array "
        "'accuracy' (row j: after learning task j)"
    )
    assert (
        "not logged (tracking.log_record=false)"
        in evaluation.run_tags(record, options, record_logged=False)[TASK_SERIES_TAG]
    )
    assert evaluation.run_tags(_record(10), options) == {}  # nothing left out, no tag
    assert evaluation.run_tags(record, evaluation.options({"max_task_series": None})) == {}


def test_a_partial_record_is_capped_over_all_its_tasks():
    record = _record(30)
    record.accuracy = record.accuracy[:4]  # 4 of 30 tasks completed
    results = evaluation_for("continual").evaluate(record, {})
    assert results["tasks_completed"] == 4
    assert results.series["task/29/accuracy"].values.tolist() == record.accuracy[:, 29].tolist()


@pytest.mark.parametrize("num_tasks, text_copies", [(200, True), (201, False)])
def test_the_text_copies_of_the_matrix_are_written_up_to_200_tasks_the_npz_always(tmp_path, num_tasks, text_copies):
    record = _record(num_tasks)
    record.save(tmp_path)
    assert (tmp_path / RENATE_FILE).exists() is text_copies and (tmp_path / MATRIX_FILE).exists() is text_copies
    np.testing.assert_array_equal(ContinualRecord.load(tmp_path).accuracy, record.accuracy)
    if text_copies:
        assert json.loads((tmp_path / RENATE_FILE).read_text())["accuracy"] == record.accuracy.tolist()
        again = AccuracyMatrixSource(path=str(tmp_path / MATRIX_FILE)).load()
        np.testing.assert_array_equal(again.record.accuracy, record.accuracy)


@pytest.mark.parametrize(
    "layout",
    ["labelled", "header", "bare", "bom_crlf", "blank_lines", "spaces"],
)
def test_the_column_wise_csv_reader_reads_what_the_row_reader_reads(tmp_path, layout):
    A = np.round(sequence(6)[0], 4)
    A[0, 0], A[1, 1] = 1.0, 0.0
    header = ",".join(["after_task"] + [f"task_{i}" for i in range(6)])
    rows = [",".join([str(j)] + [repr(float(v)) for v in row]) for j, row in enumerate(A)]
    bare = [",".join(repr(float(v)) for v in row) for row in A]
    text = {
        "labelled": "\n".join([header, *rows]) + "\n",
        "header": "\n".join([",".join(f"t{i}" for i in range(6)), *bare]),
        "bare": "\n".join(bare) + "\n",
        "bom_crlf": "\ufeff" + "\r\n".join([header, *rows]) + "\r\n",
        "blank_lines": "\n\n".join(bare) + "\n\n",
        "spaces": "\n".join(", ".join(f" {v} " for v in line.split(",")) for line in bare),
    }[layout]
    path = tmp_path / "matrix.csv"
    path.write_text(text, newline="")
    fast = AccuracyMatrixSource(path=str(path)).load().record.accuracy
    slow_source = AccuracyMatrixSource(path=str(path))
    slow_source._fast_csv = lambda *args: None  # the row reader alone
    np.testing.assert_array_equal(fast, slow_source.load().record.accuracy)
    np.testing.assert_array_equal(fast, A)


def test_the_figures_of_a_thousand_tasks_are_bounded():
    from owl_eval.protocols.continual.figures import continual_figures

    record = _record(T)
    scored = evaluation_for("continual").score(record, evaluation_for("continual").options({}))
    assert scored.figure_data["curve_tasks"].tolist() == task_series_tasks(T, CURVE_TASKS).tolist()
    figures = continual_figures(scored.figure_data, scored.results)
    try:
        heatmap = figures["accuracy_matrix"].axes[0]
        assert not heatmap.texts  # no text per cell (a million of them, before)
        assert tuple(figures["accuracy_matrix"].get_size_inches()) == (8.0, 7.0)
        assert len(heatmap.get_xticklabels()) <= 12 and len(heatmap.get_yticklabels()) <= 12
        curves = figures["task_accuracy"].axes[0]
        assert len(curves.get_legend().get_texts()) == CURVE_TASKS
    finally:
        import matplotlib.pyplot as plt

        for fig in figures.values():
            plt.close(fig)
