"""``owl-eval-evaluate +source=accuracy_matrix`` on broken or mistyped Renate results dicts, CSV
matrices and ``source.*`` options: each is one ``error:`` line naming the file and row / column / key (or
the config key), no run, nothing written outside the store. Includes JSON nested 100 000 deep (a
RecursionError in the parser), integers beyond float64 and int64, and files that are not UTF-8."""

from __future__ import annotations

import json

import pytest

from tests.reliability.harness import assert_clean_failure, run_cli

A = [[0.9, 0.1, 0.2], [0.8, 0.85, 0.3], [0.7, 0.75, 0.95]]
RENATE = {"accuracy": A, "accuracy_init": [[0.1, 0.2, 0.25]], "num_instances": [100, 200, 100]}
CSV = "0.9,0.1,0.2\n0.8,0.85,0.3\n0.7,0.75,0.95\n"


def renate(**change) -> str:
    return json.dumps(RENATE | change)


JSON_CASES = [
    # (id, file content, words the error line must contain)
    ("invalid-json", '{"accuracy": [[0.9, 0.1], [0.8', ["results.json", "not valid JSON"]),
    ("empty-file", "", ["results.json", "not valid JSON"]),
    ("list-not-object", json.dumps([A]), ["results.json", "a JSON object", "got a JSON list"]),
    ("nested-too-deeply", "[" * 100_000 + "]" * 100_000, ["results.json", "nested too deeply"]),
    ("missing-accuracy", json.dumps({"acc": A}), ["results.json", "key 'accuracy'", "'acc'"]),
    ("accuracy-an-object", renate(accuracy={"0": [0.9]}), ["results.json", "key 'accuracy'", "list of rows"]),
    (
        "ragged-row",
        renate(accuracy=[[0.9, 0.1, 0.2], [0.8, 0.85], [0.7, 0.75, 0.95]]),
        ["key 'accuracy', row 1", "expected 3", "got 2"],
    ),
    (
        "accuracy-above-one",
        renate(accuracy=[[0.9, 0.1, 0.2], [0.8, 1.5, 0.3], [0.7, 0.75, 0.95]]),
        ["'accuracy' row 1, task 1", "[0, 1]", "1.5"],
    ),
    (
        "accuracy-as-text",
        renate(accuracy=[[0.9, 0.1, 0.2], [0.8, "0.85", 0.3], [0.7, 0.75, 0.95]]),
        ["'accuracy' row 1, task 1", "expected a number", "'0.85'"],
    ),
    (
        "accuracy-nested-list",
        renate(accuracy=[[0.9, 0.1, 0.2], [0.8, [[0.85]], 0.3], [0.7, 0.75, 0.95]]),
        ["'accuracy' row 1, task 1", "a list of 1 item"],
    ),
    ("accuracy-nan", (renate().replace("0.85", "NaN")), ["'accuracy' row 1, task 1", "NaN"]),
    ("init-flat-list", renate(accuracy_init=[0.1, 0.2, 0.25]), ["results.json", "'accuracy_init'", "one row"]),
    ("init-wrong-length", renate(accuracy_init=[[0.1, 0.2]]), ["'accuracy_init' row 0", "expected 3 values", "got 2"]),
    (
        "sizes-1e19",
        (renate().replace("[100, 200, 100]", "[100, 10000000000000000000, 100]")),
        ["'num_instances', task 1", "2**53"],
    ),
    (
        "sizes-400-digits",
        (renate().replace("[100, 200, 100]", "[100, 1" + "0" * 400 + ", 100]")),
        ["'num_instances', task 1", "too large"],
    ),
    ("sizes-1e400", (renate().replace("[100, 200, 100]", "[100, 1e400, 100]")), ["'num_instances', task 1", "inf"]),
    ("sizes-fraction", renate(num_instances=[100, 2.5, 100]), ["'num_instances', task 1", "whole", "2.5"]),
    ("sizes-an-object", renate(num_instances={"a": 1}), ["'num_instances'", "expected 3 values", "JSON object"]),
]

CSV_CASES = [
    ("csv-ragged-row", "0.9,0.1,0.2\n0.8,0.85\n0.7,0.75,0.95\n", ["matrix.csv, row 2", "expected 3 comma-separated"]),
    ("csv-not-a-number", "a,b,c\n0.9,0.1,0.2\n0.8,x,0.3\n0.7,0.75,0.95\n", ["matrix.csv, row 3", "'b'", "'x'"]),
    ("csv-above-one", "0.9,0.1,0.2\n0.8,0.85,0.3\n0.7,75,0.95\n", ["matrix.csv, row 3", "'task_1'", "[0, 1]"]),
    ("csv-negative", "0.9,0.1,0.2\n0.8,-0.1,0.3\n0.7,0.75,0.95\n", ["matrix.csv, row 2", "'task_1'", "[0, 1]"]),
    ("csv-inf", "0.9,0.1,0.2\n0.8,0.85,inf\n0.7,0.75,0.95\n", ["matrix.csv, row 2", "'task_2'", "[0, 1]"]),
    ("csv-not-square", "0.9,0.1\n0.8,0.85\n0.7,0.75\n", ["matrix.csv", "got 2 columns"]),
    ("csv-blank-lines-row-number", "0.9,0.1,0.2\n\n0.8,0.85,0.3\n\n0.7,x,0.95\n", ["matrix.csv, row 5", "'x'"]),
    (
        "csv-labels-out-of-order",
        "after_task,t0,t1\n1,0.9,0.1\n0,0.8,0.85\n",
        ["matrix.csv, row 2", "'after_task'", "expected 0"],
    ),
]


CONTENT_CASES = [("results.json", *c) for c in JSON_CASES] + [("matrix.csv", *c) for c in CSV_CASES]


@pytest.mark.parametrize(
    "name, content, mentions", [(c[0], *c[2:]) for c in CONTENT_CASES], ids=[c[1] for c in CONTENT_CASES]
)
def test_matrix_file_error_is_one_line(workspace, name, content, mentions):
    path = workspace.root / "inputs" / name
    path.parent.mkdir()
    path.write_text(content)
    assert_clean_failure(
        run_cli("owl_eval.runner.cli.evaluate", ["+source=accuracy_matrix", f"source.path={path}"], workspace),
        *mentions,
    )


FILE_CASES = [
    # (id, file name, bytes, extra args, words)
    (
        "json-not-utf8",
        "results.json",
        renate().replace('"accuracy"', '"accuracy\xe9"', 1).encode("latin-1"),
        [],
        ["results.json", "line 1", "not UTF-8"],
    ),
    (
        "csv-not-utf8",
        "matrix.csv",
        ("task_\xe9,b,c\n" + CSV).encode("latin-1"),
        [],
        ["matrix.csv", "line 1", "not UTF-8"],
    ),
    ("unknown-suffix", "matrix.txt", CSV.encode(), [], ["matrix.txt", "source.format"]),
    (
        "init-wrong-length",
        "matrix.csv",
        CSV.encode(),
        ["source.init_accuracy=[0.1,0.2]"],
        ["source.init_accuracy", "expected 3 values"],
    ),
    (
        "init-not-a-number",
        "matrix.csv",
        CSV.encode(),
        ["source.init_accuracy=[0.1,abc,0.3]"],
        ["source.init_accuracy[1]", "expected a number"],
    ),
    (
        "init-above-one",
        "matrix.csv",
        CSV.encode(),
        ["source.init_accuracy=[0.1,1.2,0.3]"],
        ["source.init_accuracy[1]", "[0, 1]"],
    ),
    (
        "init-a-scalar",
        "matrix.csv",
        CSV.encode(),
        ["source.init_accuracy=0.5"],
        ["source.init_accuracy", "expected a list"],
    ),
    (
        "sizes-fraction",
        "matrix.csv",
        CSV.encode(),
        ["source.num_instances=[10,2.5,10]"],
        ["source.num_instances[1]", "whole"],
    ),
    (
        "sizes-1e19",
        "matrix.csv",
        CSV.encode(),
        ["source.num_instances=[10,10000000000000000000,10]"],
        ["source.num_instances[1]", "2**53"],
    ),
    (
        "sizes-disagree-with-file",
        "results.json",
        renate().encode(),
        ["source.num_instances=[1,2,3]"],
        ["results.json", "differs from source.num_instances"],
    ),
    ("format-unknown", "matrix.csv", CSV.encode(), ["source.format=xml"], ["source.format", "'xml'"]),
    (
        "scenario-unknown",
        "matrix.csv",
        CSV.encode(),
        ["source.scenario=domain_incremental"],
        ["source.scenario", "class_incremental"],
    ),
]


@pytest.mark.parametrize("name, data, args, mentions", [c[1:] for c in FILE_CASES], ids=[c[0] for c in FILE_CASES])
def test_file_and_option_error_is_one_line(workspace, name, data, args, mentions):
    path = workspace.root / "inputs" / name
    path.parent.mkdir()
    path.write_bytes(data)
    result = run_cli(
        "owl_eval.runner.cli.evaluate", ["+source=accuracy_matrix", f"source.path={path}", *args], workspace
    )
    assert_clean_failure(result, *mentions)


def test_missing_file_is_one_line(workspace):
    path = workspace.root / "inputs" / "nothere.json"
    assert_clean_failure(
        run_cli("owl_eval.runner.cli.evaluate", ["+source=accuracy_matrix", f"source.path={path}"], workspace),
        "nothere.json",
        "file not found",
    )
