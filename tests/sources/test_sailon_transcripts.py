"""sail-on-client's transcripts layout with quoted fields (tests/fixtures/sailon_client_transcripts), read and
scored by hand: at the reader level, through ``SailonSource`` and through the ``owl-eval-evaluate`` command
line into a real SQLite MLflow store.

The ground truth is ``file,text,novel,representation,detection,writer_id,...`` with the ``text`` of four
samples quoted with ``|`` (sail-on-client 0.30 reads these files with ``quotechar="|"``): commas inside,
a line break inside t3's text (so t3 spans lines 4-5 and every later sample sits one line lower), a ``"``
inside t4's and a doubled ``||`` (one ``|``) inside t5's. Two known writers (0, 1); writer 2 is the unknown,
its score column last (``unknown_column=last``, the package's class convention: class K = 2 is the unknown).
The result files quote one id (``|t3.png|``) and end with blank lines.

Samples (row: id, writer, novel, P_world_changed, scores as written p_w0, p_w1, p_unknown):

    0 t1 0 0  0.1  0.7 0.2 0.1   argmax col 0 = writer 0: right
    1 t2 1 0  0.2  0.6 0.3 0.1   col 0, writer 1: wrong
    2 t3 0 0  0.3  0.2 0.2 0.6   col 2 (unknown), writer 0: wrong
    3 t4 2 1  0.7  0.1 0.3 0.6   col 2, unknown: right      <- red light (metadata red_light "t4.png")
    4 t5 1 0  0.8  0.2 0.7 0.1   col 1, writer 1: right
    5 t6 2 1  0.9  0.5 0.1 0.4   col 0, unknown: wrong
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from owl_eval.evaluation import evaluation_for
from owl_eval.formats.csv_table import read_rows
from owl_eval.metrics.results import NA
from owl_eval.protocols.ond.sources.sailon import SailonSource
from owl_eval.sources import SourceFormatError

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "sailon_client_transcripts"
TEST = "OND.0.90001.0001"
SESSION = "a7b3c9d1-2e4f-4a6b-8c0d-1e2f3a4b5c6d"
GT = f"data/OND/transcripts/{TEST}_single_df.csv"
DET = f"mock_results/OND/transcripts/{SESSION}.{TEST}_detection.csv"
CLS = f"mock_results/OND/transcripts/{SESSION}.{TEST}_classification.csv"
COLUMNS = {"id": "file", "class": "writer_id", "novel": "novel"}
OPTIONS = [
    "source.columns.id=file",
    "source.columns.class=writer_id",
    "source.columns.novel=novel",
    "source.unknown_column=last",
]

# Every value below is worked out by hand from the table in the module docstring.
EXPECTED = {
    # top-1: right on t1, t4, t5 -> 3/6; before the red light (t1-t3) 1/3; from it (t4-t6) 2/3.
    "top1": 3 / 6,
    "top1_pre": 1 / 3,
    "top1_post": 2 / 3,
    "top3": 1.0,  # three score columns: every class is in the top 3
    # first P_world_changed >= 0.5 at row 3 = the red light: detected, 0 samples late, no false alarm.
    "m1_mean_fn_cdt": 0.0,
    "m2_cdt_pct": 100.0,
    "m21_fp_pct": 0.0,
    # unknown score >= 0.5: [0,0,1,1,0,0] against novel [0,0,0,1,0,1]
    #   from the red light: [1,0,0] vs [1,0,1]: TP 1, FP 0, FN 1, TN 1
    "unknown_score_precision_post": 1.0,
    "unknown_score_recall_post": 0.5,
    "unknown_score_f1_post": 2 * 1.0 * 0.5 / 1.5,
    "unknown_score_accuracy_post": 2 / 3,
    #   before it: [0,0,1] vs [0,0,0]: FP 1, TN 2
    "unknown_score_accuracy_pre": 2 / 3,
    # sail-on-client's m_ndp: P_world_changed > 0.5: [0,0,0,1,1,1] against novel [0,0,0,1,0,1]
    #   whole test: TP 2, FP 1 (t5), TN 3, FN 0
    "m_ndp_accuracy": 5 / 6,
    "m_ndp_precision": 2 / 3,
    "m_ndp_recall": 1.0,
    "m_ndp_f1_score": 2 * (2 / 3) * 1.0 / (2 / 3 + 1.0),
    #   from the first novel sample: [1,1,1] vs [1,0,1]: TP 2, FP 1
    "m_ndp_post_accuracy": 2 / 3,
    "m_ndp_post_precision": 2 / 3,
    "m_ndp_post_recall": 1.0,
    #   before it: [0,0,0] vs [0,0,0]: TN 3
    "m_ndp_pre_accuracy": 1.0,
    # AUROC of the unknown score, novel {0.6, 0.4} against known {0.1, 0.1, 0.6, 0.1}: 0.6 beats three and
    # ties one (1/2), 0.4 beats three and loses one: (3.5 + 3) / 8
    "auroc_novel": 6.5 / 8,
}


def source(root: Path = FIXTURE, **options) -> SailonSource:
    return SailonSource(
        path=str(root / "data"),
        results_path=str(root / "mock_results"),
        columns=COLUMNS,
        unknown_column="last",
        **options,
    )


def copy_fixture(tmp_path: Path) -> Path:
    root = tmp_path / "inputs"
    shutil.copytree(FIXTURE, root)
    return root


def check_trial(trial) -> None:
    # writer ids as written [0,1,0,2,1,2]; unknown column last, so class 2 (= K) is the unknown, c < K is c + 1
    np.testing.assert_array_equal(trial.gt_class, [1, 2, 1, 0, 2, 0])
    np.testing.assert_array_equal(trial.gt_novel, [0, 0, 0, 1, 0, 1])
    assert trial.red_light == 3 and trial.batch_size == 3 and trial.trial_id == TEST
    np.testing.assert_array_equal(trial.p_world_changed, [0.1, 0.2, 0.3, 0.7, 0.8, 0.9])
    # the unknown score moved to column 0
    np.testing.assert_array_equal(trial.p_class[:, 0], [0.1, 0.1, 0.6, 0.6, 0.1, 0.4])
    np.testing.assert_array_equal(trial.p_class[2], [0.6, 0.2, 0.2])


def check_values(values) -> None:
    for name, expected in EXPECTED.items():
        assert values[name] == pytest.approx(expected, abs=1e-12), name


def test_the_ground_truth_parses_as_csv_with_pipe_quotes():
    table = read_rows(FIXTURE / GT, skip_header=True, quote_char="|")
    assert table.header[:6] == ["file", "text", "novel", "representation", "detection", "writer_id"]
    assert table.fields.shape == (6, 11)
    text = dict(zip(table.fields[:, 0], table.fields[:, 1]))
    assert text["t1.png"] == "Marshal , I  added . His  face  was  fixed , "
    assert text["t3.png"] == "many  others , we  conducted\nour  fight  by  putting"
    assert text["t4.png"] == 'had  bought  "their"  release , free  labourers'
    assert text["t5.png"] == "a | b , c"
    # physical lines: the header is line 1 and t3 spans lines 4 and 5
    np.testing.assert_array_equal(table.line_numbers, [2, 3, 4, 6, 7, 8])


def test_reads_and_scores_by_hand():
    data = source().load()
    (trial,) = data.record.trials
    check_trial(trial)
    results = evaluation_for(data.protocol).evaluate(data.record, {"threshold": 0.5})
    check_values(results)
    # no novel sample before the red light: precision, recall and F1 there are 0 by construction, so N/A
    for name in ("unknown_score_precision_pre", "m_ndp_pre_precision", "m_ndp_pre_f1_score"):
        assert isinstance(results[name], NA) and "by construction" in results[name].reason, name


def test_bom_crlf_and_blank_lines_read_the_same(tmp_path):
    root = copy_fixture(tmp_path)
    for rel in (GT, DET, CLS):
        file = root / rel
        text = file.read_text()
        file.write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode() + b"\r\n\r\n")
    data = source(root).load()
    check_trial(data.record.trials[0])
    check_values(evaluation_for(data.protocol).evaluate(data.record, {"threshold": 0.5}))


def test_standard_double_quotes_with_source_quote_char(tmp_path):
    """The same ground truth quoted the standard way ('"', a quote inside written twice)."""
    root = copy_fixture(tmp_path)
    gt = root / GT
    lines = gt.read_text().split("\n")
    standard = (
        "\n".join(lines[:2]).replace("|", '"')
        + "\n"
        + "\n".join(lines[2:]).replace('"', '""').replace("||", "\0").replace("|", '"').replace("\0", "|")
    )
    gt.write_text(standard)
    for rel in (DET, CLS):
        (root / rel).write_text((root / rel).read_text().replace("|t3.png|", '"t3.png"'))
    assert '"had  bought  ""their""  release' in standard and '"a | b , c"' in standard
    data = source(root, quote_char='"').load()
    check_trial(data.record.trials[0])
    # with the default '|' the '"'-quoted commas split fields: one error naming the line
    with pytest.raises(SourceFormatError) as info:
        source(root).load()
    assert "_single_df.csv, row 2: expected 11 comma-separated fields (as the header), got 13" in str(info.value)
    assert "set source.quote_char='\"'" in str(info.value)


@pytest.mark.parametrize(
    "rel, old, new, words",
    [
        # t4 is on line 6 of the ground truth: t3's text spans lines 4 and 5
        (GT, ",lines_fixed,1,2,3,1,3,3,", ",lines_fixed,1,2.7,3,1,3,3,", ["row 6", "'writer_id'", "'2.7'"]),
        (GT, "t5.png,|a || b , c|,0", "t5.png,|a || b , c|,0,extra", ["row 7", "expected 11", "got 12"]),
        (GT, "t6.png,|different", "t6.png,|different|x", ["row 8", "closing |"]),
        (GT, "|different  classes , of  laymen|", "|different  classes , of  laymen", ["row 8", "not closed"]),
        # result files: blank trailing lines are fine; a bad value names its line and column
        (CLS, "t6.png,0.5,0.1,0.4", "t6.png,0.5,0.1,oops", ["_classification.csv, row 6", "'p_2'", "'oops'"]),
        (CLS, "t5.png,0.2,0.7,0.1", "t5.png,0.2,1.7,0.1", ["_classification.csv, row 5", "'p_1'", "1.7"]),
        (CLS, "t2.png,0.6,0.3,0.1\n", "t2.png,0.6,0.3,0.1\n\n\n", None),
        (CLS, "t2.png,0.6,0.3,0.1\n|t3.png|,0.2,0.2,0.6", "t2.png,0.6,0.3,0.1\n\n|t3.png|,0.2,0.2,0.9", ["row 4"]),
        (DET, "t4.png,0.7", "t4.png,0.7,0.1", ["_detection.csv, row 4", "expected 2"]),
        (DET, "|t3.png|,0.3", "|t3.png|,nan", ["_detection.csv, row 3", "'P_world_changed'", "NaN"]),
        (DET, "t6.png,0.9", "t1.png,0.9", ["_detection.csv, row 6", "'t1.png' already at row 1"]),
    ],
)
def test_errors_name_the_physical_line(tmp_path, rel, old, new, words):
    root = copy_fixture(tmp_path)
    file = root / rel
    assert old in file.read_text()
    file.write_text(file.read_text().replace(old, new, 1))
    if words is None:  # a control: the change keeps the file valid
        check_trial(source(root).load().record.trials[0])
        return
    with pytest.raises(SourceFormatError) as info:
        source(root).load()
    message = str(info.value)
    assert "\n" not in message
    assert Path(rel).name in message
    for w in words:
        assert w in message, message


def test_owl_eval_evaluate_cli_logs_the_hand_values(tmp_path, experiment, client):
    """The command line (``owl-eval-evaluate``'s entry, in this process: tests/inprocess.py) on the fixture, into the
    session's SQLite store; the values read back with MlflowClient."""
    from tests.inprocess import run_module

    proc = run_module(
        "owl_eval.runner.cli.evaluate",
        [
            "+source=sailon",
            f"source.path={FIXTURE / 'data'}",
            f"source.results_path={FIXTURE / 'mock_results'}",
            *OPTIONS,
            *experiment["overrides"],
        ],
        cwd=tmp_path,
        env={"MLFLOW_DISABLE_TELEMETRY": "true"},
        unset=("MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID"),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    exp = client.get_experiment_by_name(experiment["name"])
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.status == "FINISHED"
    assert run.data.tags["source"] == "sailon" and run.data.tags["session"] == SESSION
    assert run.data.params["source.quote_char"] == "|"
    metrics = run.data.metrics
    for name, expected in EXPECTED.items():
        key = name if name in metrics else f"detail/{name}"
        assert metrics[key] == pytest.approx(expected, abs=1e-12), name
    assert "detail/m_ndp_pre_precision" not in metrics  # 0 by construction: N/A, not logged as a number
