"""Renate results dicts and CSV accuracy matrices, written by hand here, read and scored like a live run."""

from __future__ import annotations

import json

import pytest

from owl_eval.evaluation import evaluation_for
from owl_eval.protocols.continual.sources.accuracy_matrix import AccuracyMatrixSource
from owl_eval.runner.api import evaluate
from owl_eval.sources import SourceFormatError

A = [[0.9, 0.1, 0.2], [0.8, 0.85, 0.3], [0.7, 0.75, 0.95]]
B = [0.1, 0.2, 0.25]
N = [100, 200, 100]
# Renate's definitions at the last update t = 2:
AVERAGE = (0.7 + 0.75 + 0.95) / 3  # = 0.8
MICRO = (100 * 0.7 + 200 * 0.75 + 100 * 0.95) / 400  # = 315 / 400 = 0.7875
FORGETTING = ((0.9 - 0.7) + (0.85 - 0.75)) / 2  # max over earlier rows minus now = 0.15
BACKWARD = ((0.7 - 0.9) + (0.75 - 0.85)) / 2  # = -0.15
FORWARD = ((0.1 - 0.2) + (0.3 - 0.25)) / 2  # A[i-1][i] - b_i = -0.025
CSV = "0.9,0.1,0.2\n0.8,0.85,0.3\n0.7,0.75,0.95\n"
CSV_OWL = "after_task,task_0,task_1,task_2\n0,0.9,0.1,0.2\n1,0.8,0.85,0.3\n2,0.7,0.75,0.95\n"


def write_json(tmp_path, **results):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"accuracy": A, "accuracy_init": [B], "num_instances": N} | results))
    return path


def scores(path, **kw):
    data = AccuracyMatrixSource(path=str(path), **kw).load()
    return data, evaluation_for(data.protocol).evaluate(data.record, {})


def assert_renate_values(results, *, micro=True, forward=True):
    assert results["average_accuracy"] == pytest.approx(AVERAGE)
    assert results["forgetting"] == pytest.approx(FORGETTING)
    assert results["backward_transfer"] == pytest.approx(BACKWARD)
    assert (
        (results["micro_average_accuracy"] == pytest.approx(MICRO))
        if micro
        else "num_instances" in results.na["micro_average_accuracy"]
    )
    assert (
        (results["forward_transfer"] == pytest.approx(FORWARD))
        if forward
        else "init_accuracy" in results.na["forward_transfer"]
    )


def test_renate_json_hand_computed(tmp_path):
    data, results = scores(write_json(tmp_path))
    assert_renate_values(results)
    assert results["tasks_completed"] == 3
    # series over task_id: average accuracy after task 0 = 0.9, after task 1 = (0.8 + 0.85) / 2 = 0.825
    assert results.series["by_task/average_accuracy"].values.tolist() == pytest.approx([0.9, 0.825, 0.8])
    assert data.tags["format"] == "json"


def test_json_sizes_from_config_or_absent(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"accuracy": A, "accuracy_init": [B], "loss": [[1.0]]}))  # other keys are ignored
    assert_renate_values(scores(path, num_instances=N)[1])
    assert_renate_values(scores(path)[1], micro=False)


@pytest.mark.parametrize("text", [CSV, CSV_OWL, "task_0,task_1,task_2\n" + CSV])
def test_csv_layouts_with_config_init_and_sizes(tmp_path, text):
    path = tmp_path / "matrix.csv"
    path.write_text(text)
    assert_renate_values(scores(path, init_accuracy=B, num_instances=N)[1])


def test_csv_without_init_or_sizes_gives_na_with_reason(tmp_path):
    path = tmp_path / "matrix.csv"
    path.write_text(CSV)
    assert_renate_values(scores(path)[1], micro=False, forward=False)


@pytest.mark.parametrize(
    "text, words",
    [
        ("0.9,0.1\n0.8,0.85\n0.7,0.75\n", ["got 2 columns", "missing"]),
        ("0.9,0.1,0.2,0\n0.8,0.85,0.3,0\n0.7,0.75,0.95,0\n", ["got 4 columns", "extra"]),
        ("0.9,0.1,0.2\n0.8,0.85\n0.7,0.75,0.95\n", ["matrix.csv, row 2", "expected 3"]),
        ("0.9,0.1,0.2\n0.8,0.85,nan\n0.7,0.75,0.95\n", ["matrix.csv, row 2", "'task_2'", "NaN"]),
        ("a,b,c\n0.9,0.1,0.2\n0.8,x,0.3\n0.7,0.75,0.95\n", ["matrix.csv, row 3", "'b'", "'x'"]),
        ("0.9,0.1,0.2\n0.8,0.85,0.3\n0.7,75,0.95\n", ["row 3", "'task_1'", "[0, 1]"]),
        (CSV_OWL.replace("\n2,", "\n5,"), ["row 4", "'after_task'", "expected 2"]),
        ("", ["no matrix rows"]),
    ],
)
def test_broken_csv_gives_one_clear_error(tmp_path, text, words):
    assert_load_error(tmp_path / "matrix.csv", text, words)


def assert_load_error(path, text, words):
    """Loading ``text`` from ``path`` is one SourceFormatError that mentions every word."""
    path.write_text(text)
    with pytest.raises(SourceFormatError) as info:
        AccuracyMatrixSource(path=str(path)).load()
    for w in words:
        assert w in str(info.value)


@pytest.mark.parametrize(
    "change, words",
    [
        (
            dict(accuracy=[[0.9, 0.1, 0.2], [0.8, 0.85], [0.7, 0.75, 0.95]]),
            ["key 'accuracy', row 1", "expected 3", "got 2"],
        ),
        (
            dict(accuracy=[[0.9, 0.1, 0.2], [0.8, 0.85, float("nan")], [0.7, 0.75, 0.95]]),
            ["'accuracy' row 1, task 2", "NaN"],
        ),
        (dict(accuracy=[[0.9, 0.1, 0.2], [0.8, None, 0.3], [0.7, 0.75, 0.95]]), ["'accuracy' row 1, task 1", "None"]),
        (dict(accuracy_init=[[0.1, 0.2]]), ["'accuracy_init' row 0", "expected 3 values", "got 2"]),
        (dict(accuracy_init=[0.1, 0.2, 0.3]), ["'accuracy_init'", "one row"]),
        (dict(num_instances=[100, 0, 100]), ["'num_instances', task 1", "positive whole"]),
    ],
)
def test_broken_json_gives_one_clear_error(tmp_path, change, words):
    with pytest.raises(SourceFormatError) as info:
        AccuracyMatrixSource(path=str(write_json(tmp_path, **change))).load()
    for w in words:
        assert w in str(info.value)


def test_json_missing_key_conflicting_sizes_and_missing_file(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps({"acc": A}))
    with pytest.raises(SourceFormatError, match="key 'accuracy'"):
        AccuracyMatrixSource(path=str(path)).load()
    with pytest.raises(SourceFormatError, match="differs from source.num_instances"):
        AccuracyMatrixSource(path=str(write_json(tmp_path)), num_instances=[1, 2, 3]).load()
    with pytest.raises(SourceFormatError, match="nothere.json: file not found"):
        AccuracyMatrixSource(path=str(tmp_path / "nothere.json")).load()


def test_evaluate_cli_logs_like_a_live_run(tmp_path, experiment, client):
    path = tmp_path / "matrix.csv"
    path.write_text(CSV)
    values = evaluate(
        [
            "+source=accuracy_matrix",
            f"source.path={path}",
            f"source.init_accuracy={B}",
            f"source.num_instances={N}",
            *experiment["overrides"],
            "figures=true",
        ],
        output_dir=tmp_path / "out",
    )
    assert values["forward_transfer"] == pytest.approx(FORWARD)
    exp = client.get_experiment_by_name(experiment["name"])
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.status == "FINISHED" and run.data.tags["source"] == "accuracy_matrix"
    assert run.data.metrics["micro_average_accuracy"] == pytest.approx(MICRO)
    history = client.get_metric_history(run.info.run_id, "detail/by_task/average_accuracy")
    assert [m.value for m in sorted(history, key=lambda m: m.step)] == pytest.approx([0.9, 0.825, 0.8])
    paths = {a.path for a in client.list_artifacts(run.info.run_id, "plots")}
    assert "plots/accuracy_matrix.png" in paths


def test_broken_source_creates_no_run(tmp_path, experiment, client):
    path = tmp_path / "matrix.csv"
    path.write_text("0.9,0.1\n0.8,0.85\n0.7,0.75\n")
    with pytest.raises(SourceFormatError):
        evaluate(
            ["+source=accuracy_matrix", f"source.path={path}", *experiment["overrides"]], output_dir=tmp_path / "out"
        )
    exp = client.get_experiment_by_name(experiment["name"])
    assert exp is None or not client.search_runs([exp.experiment_id])


def test_saved_record_without_init_reads_back(tmp_path):
    from owl_eval.sources.record import RecordSource

    path = tmp_path / "matrix.csv"
    path.write_text(CSV)
    data = AccuracyMatrixSource(path=str(path), num_instances=N).load()
    data.record.save(tmp_path / "record")
    saved = json.loads((tmp_path / "record" / "renate_results.json").read_text())
    assert "accuracy_init" not in saved and saved["num_instances"] == N  # no NaN placeholders in Renate's dict
    again = AccuracyMatrixSource(path=str(tmp_path / "record" / "renate_results.json")).load()
    assert_renate_values(evaluation_for(again.protocol).evaluate(again.record, {}), forward=False)
    rescored = RecordSource(path=str(tmp_path / "record")).load()
    assert_renate_values(evaluation_for(rescored.protocol).evaluate(rescored.record, {}), forward=False)


@pytest.mark.parametrize(
    "text, words",
    [
        ("[" * 100_000 + "]" * 100_000, ["results.json", "nested too deeply"]),
        (json.dumps([A]), ["results.json", "got a JSON list"]),
        (json.dumps({"accuracy": A, "num_instances": [1, 10**19, 1]}), ["'num_instances', task 1", "2**53"]),
        (json.dumps({"accuracy": A}).replace("0.85", "1" + "0" * 400), ["'accuracy' row 1, task 1", "too large"]),
        (
            json.dumps({"accuracy": A, "num_instances": [1, 1, 1]}).replace("[1, 1, 1]", "[1, 1e400, 1]"),
            ["task 1", "inf"],
        ),
    ],
)
def test_hostile_json_gives_one_clear_error(tmp_path, text, words):
    assert_load_error(tmp_path / "results.json", text, words)


def test_non_utf8_file_names_file_and_line(tmp_path):
    path = tmp_path / "matrix.csv"
    path.write_bytes(b"0.9,0.1\n0.8,\xe90.85\n")
    with pytest.raises(ValueError, match=r"matrix.csv, line 2: not UTF-8"):
        AccuracyMatrixSource(path=str(path)).load()


@pytest.mark.parametrize(
    "options, words",
    [
        ({"init_accuracy": 0.5}, "source.init_accuracy: expected a list"),
        ({"init_accuracy": "0.1,0.2,0.25"}, "source.init_accuracy: expected a list"),
        ({"init_accuracy": [0.1, "x", 0.25]}, "source.init_accuracy[1]: expected a number"),
        ({"num_instances": [100, 200]}, "source.num_instances: expected 3 values"),
        ({"num_instances": [100, 2.5, 100]}, "source.num_instances[1]: expected a positive whole test size"),
        ({"format": "xml"}, "source.format: expected one of"),
        ({"scenario": "domain_incremental"}, "source.scenario: expected one of"),
    ],
)
def test_config_values_are_typed(tmp_path, options, words):
    from owl_eval.errors import ConfigError

    path = tmp_path / "matrix.csv"
    path.write_text(CSV)
    with pytest.raises(ConfigError) as info:
        AccuracyMatrixSource(path=str(path), **options).load()
    assert str(info.value).startswith(words)
