"""Catalogue: bad sail-on-client OND results through ``owl-eval-evaluate +source=sailon``.

Each case copies the hand-written fixture in sail-on-client's layout (tests/fixtures/sailon_client), breaks
one thing, runs the real command line and checks it fails cleanly (harness.assert_clean_failure): one
``error:`` line naming the file and row/column (or the ``source.*`` key), no traceback, no run, nothing
written outside the store.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.reliability.harness import assert_clean_failure, run_cli

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sailon_client"
SESSION = "5c1e0f2a-7d3b-4e96-a8c1-2f4b6d8e0a13"
A, B = "OND.101.000.0001", "OND.102.000.0002"
GT = "data/OND/image_classification"
RES = "mock_results/OND/image_classification"


def gt(test: str) -> str:
    return f"{GT}/{test}_single_df.csv"


def meta(test: str) -> str:
    return f"{GT}/{test}_metadata.json"


def det(test: str) -> str:
    return f"{RES}/{SESSION}.{test}_detection.csv"


def cls(test: str) -> str:
    return f"{RES}/{SESSION}.{test}_classification.csv"


def replace(rel: str, old: str, new: str):
    def change(root: Path) -> None:
        file = root / rel
        text = file.read_text()
        assert old in text, f"{old!r} not in {rel}"
        file.write_text(text.replace(old, new, 1))

    return change


def write(rel: str, content: str | bytes):
    def change(root: Path) -> None:
        (root / rel).write_bytes(content if isinstance(content, bytes) else content.encode())

    return change


def add_column(rel: str):
    def change(root: Path) -> None:
        file = root / rel
        file.write_text("".join(line + ",0.0\n" for line in file.read_text().splitlines()))

    return change


ROW1 = "known_classes/images/val/00001/00012.JPEG"  # first sample of test A
ROW2 = "known_classes/images/val/00002/00007.JPEG"
RED_A = "unknown_classes/images/val/00000/00051.JPEG"

CASES = [
    # -- result files
    ("detection-empty", write(det(A), ""), [], [f"{SESSION}.{A}_detection.csv", "no rows"]),
    (
        "detection-negative",
        replace(det(A), f"{ROW2},0.2", f"{ROW2},-0.1"),
        [],
        [f"{A}_detection.csv, row 2", "'P_world_changed'", "-0.1"],
    ),
    (
        "detection-duplicate-id",
        replace(det(A), f"{ROW2},0.2", f"{ROW1},0.2"),
        [],
        [f"{A}_detection.csv, row 2", "already at row 1"],
    ),
    (
        "classification-ragged",
        replace(cls(A), f"{ROW2},0.3,0.4", f"{ROW2},0.3,0.4,0.0"),
        [],
        [f"{A}_classification.csv, row 2", "expected 5"],
    ),
    (
        "classification-nan",
        replace(cls(A), f"{ROW1},0.1,0.6", f"{ROW1},0.1,nan"),
        [],
        [f"{A}_classification.csv, row 1", "'p_1'", "NaN"],
    ),
    (
        "classification-inf",
        replace(cls(A), f"{ROW1},0.1,0.6,0.2", f"{ROW1},0.1,0.6,inf"),
        [],
        [f"{A}_classification.csv, row 1", "'p_2'", "inf"],
    ),
    (
        "classification-above-one",
        replace(cls(A), f"{ROW1},0.1,0.6", f"{ROW1},0.1,1.5"),
        [],
        [f"{A}_classification.csv, row 1", "'p_1'", "1.5"],
    ),
    (
        "classification-sum",
        replace(cls(A), f"{ROW1},0.1,0.6,0.2,0.1", f"{ROW1},0.1,0.6,0.2,0.3"),
        [],
        [f"{A}_classification.csv, row 1", "sum to 1.2", "source.sum_tolerance"],
    ),
    (
        "classification-missing-id",
        replace(cls(A), ROW2, "known_classes/images/val/00002/99999.JPEG"),
        [],
        [f"{A}_classification.csv", f"no row for sample '{ROW2}'"],
    ),
    (
        "classification-width-per-test",
        add_column(cls(B)),
        [],
        [f"{B}_classification.csv", "5 class-score columns", f"{A}_classification.csv has 4"],
    ),
    (
        "detection-text-value",
        replace(det(A), f"{ROW2},0.2", f"{ROW2},high"),
        [],
        [f"{A}_detection.csv, row 2", "'P_world_changed'", "expected a number", "'high'"],
    ),
    # -- ground truth
    (
        "gt-unclosed-quote",
        replace(gt(A), f"{ROW2},0,2", f"|{ROW2},0,2"),
        [],
        [f"{A}_single_df.csv, row 3", "quoted with |", "not closed"],
    ),
    (
        "gt-class-not-integer",
        replace(gt(A), f"{ROW2},0,2", f"{ROW2},0,2.7"),
        [],
        [f"{A}_single_df.csv, row 3", "'classification'", "'2.7'"],
    ),
    (
        "gt-class-1e19",
        replace(gt(A), f"{ROW1},0,1", f"{ROW1},0,1e19"),
        [],
        [f"{A}_single_df.csv, row 2", "'classification'", "'1e19'"],
    ),
    (
        "gt-class-negative-under-package",
        replace(gt(A), f"{RED_A},1,0", f"{RED_A},1,-1"),
        [],
        [f"{A}_single_df.csv, row 7", "class -1", "zero_based_known"],
    ),
    (
        "gt-duplicate-id",
        replace(gt(A), f"{ROW2},0,2", f"{ROW1},0,2"),
        [],
        [f"{A}_single_df.csv, row 3", "already at row 2"],
    ),
    (
        "gt-detection-not-binary",
        replace(gt(A), f"{ROW2},0,2", f"{ROW2},2,2"),
        [],
        [f"{A}_single_df.csv, row 3", "'detection'", "0 or 1"],
    ),
    (
        "gt-not-utf8",
        write(gt(A), b"id,detection,classification\nk1.JPEG,0,1\nk\xe9.JPEG,0,2\n"),
        [],
        [f"{A}_single_df.csv, line 3", "UTF-8"],
    ),
    (
        "gt-unsafe-test-id",
        write(f"{GT}/bad$id_single_df.csv", "id,detection,classification\n"),
        [],
        ["test id", "'bad$id'"],
    ),
    # -- metadata
    ("metadata-list", write(meta(A), "[1, 2]"), [], [f"{A}_metadata.json", "JSON object", "list"]),
    ("metadata-deep", write(meta(A), "[" * 100_000 + "]" * 100_000), [], [f"{A}_metadata.json", "nested too deeply"]),
    (
        "metadata-round-size-abc",
        replace(meta(B), '"round_size": 3', '"round_size": "abc"'),
        [],
        [f"{B}_metadata.json", "round_size", "'abc'"],
    ),
    (
        "metadata-red-light-unknown-id",
        replace(meta(A), RED_A, "nowhere.JPEG"),
        [],
        [f"{A}_metadata.json", "'nowhere.JPEG'", "not a sample"],
    ),
    (
        "metadata-red-light-not-first-novel",
        replace(meta(A), RED_A, ROW2),
        [],
        [f"{A}_metadata.json", "row 3", "first novel sample"],
    ),
    # -- config keys
    ("session-does-not-exist", None, ["source.session=nobody"], ["source.session", "'nobody'", SESSION]),
    ("session-unsafe", None, ["source.session=../x"], ["source.session", "not a safe name"]),
    ("round-size-float", None, ["source.round_size=2.5"], ["source.round_size", "2.5"]),
    ("quote-char-two-characters", None, ["source.quote_char=ab"], ["source.quote_char", "one character", "'ab'"]),
    ("class-index-unknown", None, ["source.class_index=one_based"], ["source.class_index", "package"]),
    ("sum-tolerance-negative", None, ["source.sum_tolerance=-1"], ["source.sum_tolerance"]),
    ("columns-unknown-role", None, ["+source.columns.clas=2"], ["source.columns.clas"]),
    ("option-unknown", None, ["+source.sesion=S1"], ["source.sesion", "source.session"]),
]


def inputs(workspace) -> Path:
    root = workspace.root / "inputs"
    shutil.copytree(FIXTURE, root)
    return root


def cli_args(root: Path, *extra: str, session: bool = True) -> list[str]:
    session_args = (
        [] if any(a.startswith("source.session=") for a in extra) or not session else [f"source.session={SESSION}"]
    )
    return [
        "+source=sailon",
        f"source.path={root / 'data'}",
        f"source.results_path={root / 'mock_results'}",
        *session_args,
        *extra,
    ]


@pytest.mark.parametrize("change,extra,mentions", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_sailon_results_fail_cleanly(workspace, change, extra, mentions):
    root = inputs(workspace)
    if change is not None:
        change(root)
    assert_clean_failure(run_cli("owl_eval.runner.cli.evaluate", cli_args(root, *extra), workspace), *mentions)


def test_ground_truth_that_is_a_symlink_loop_is_an_error(workspace):
    """A loop used to drop the whole test silently (``is_file()`` is False on a loop)."""
    root = inputs(workspace)
    loop = root / gt(A)
    loop.unlink()
    os.symlink(loop.name, loop)  # points at itself
    assert_clean_failure(
        run_cli("owl_eval.runner.cli.evaluate", cli_args(root), workspace), f"{A}_single_df.csv", "symbolic link"
    )


def test_result_file_linking_outside_the_folder_is_an_error(workspace):
    """A link to a file outside the results folder would be read (and scored) as if it were a result."""
    root = inputs(workspace)
    outside = workspace.root / "elsewhere.csv"
    shutil.copy(root / cls(A), outside)
    (root / cls(A)).unlink()
    os.symlink(outside, root / cls(A))
    assert_clean_failure(
        run_cli("owl_eval.runner.cli.evaluate", cli_args(root), workspace), f"{A}_classification.csv", "symbolic link"
    )


def test_the_unbroken_fixture_runs(workspace):
    """The control: the same command line on the fixture as shipped succeeds and creates one run."""
    root = inputs(workspace)
    result = run_cli("owl_eval.runner.cli.evaluate", cli_args(root), workspace)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.runs_after == result.runs_before + 1
