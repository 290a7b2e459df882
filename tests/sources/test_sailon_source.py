"""SAIL-ON local-harness results, written by hand here, read and scored like a live run."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from runner.evaluate import evaluate
from runner.sources import SourceFormatError
from runner.sources.sailon import SailonSource

GT = """id,detection,classification
a.png,0,0
b.png,0,1
c.png,0,2
d.png,1,-1
e.png,1,0
f.png,1,-1
"""
DETECTION = "a.png,0.1\nb.png,0.2\nc.png,0.3\nd.png,0.4\ne.png,0.8\nf.png,0.9\n"
# K = 3 known classes, unknown column first.
CLASSIFICATION = """a.png,0.1,0.7,0.1,0.1
b.png,0.1,0.1,0.2,0.6
c.png,0.1,0.1,0.1,0.7
d.png,0.6,0.2,0.1,0.1
e.png,0.5,0.3,0.1,0.1
f.png,0.2,0.2,0.3,0.3
"""
TEST = "OND.1.1.1234"


def write_fixture(root: Path, *, gt=GT, detection=DETECTION, classification=CLASSIFICATION, session="S1",
                  metadata=None) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{TEST}_single_df.csv").write_text(gt)
    (root / f"{TEST}_metadata.json").write_text(json.dumps(metadata or {"round_size": 2, "detection": 3, "red_light": "d.png",
                                                                         "protocol": "OND", "known_classes": 3}))
    (root / f"{session}.{TEST}_detection.csv").write_text(detection)
    (root / f"{session}.{TEST}_classification.csv").write_text(classification)
    return root


def test_reads_and_scores_hand_computed_values(tmp_path):
    data = SailonSource(path=str(write_fixture(tmp_path))).load()
    trial = data.record.trials[0]
    np.testing.assert_array_equal(trial.gt_class, [1, 2, 3, 0, 1, 0])
    np.testing.assert_array_equal(trial.gt_novel, [0, 0, 0, 1, 0, 1])
    assert trial.red_light == 3 and trial.batch_size == 2
    results = data.protocol.evaluate(data.record, {"threshold": 0.5})
    # Detection: first P >= 0.5 at index 4 >= red light 3: correctly detected, M1 = 4 - 3 = 1.
    assert results["m1_mean_fn_cdt"] == 1.0 and results["m2_cdt_pct"] == 100.0 and results["m21_fp_pct"] == 0.0
    # Top-1: a right, b wrong (col 3 vs label 2), c right, d right (unknown), e wrong (unknown vs 1),
    # f wrong (tie of columns 2 and 3 goes to the lower column, 2, but the sample is novel): 3/6.
    assert results["top1"] == pytest.approx(0.5)
    assert results["top1_pre"] == pytest.approx(2 / 3) and results["top1_post"] == pytest.approx(1 / 3)


def test_result_rows_in_another_order_and_unknown_last(tmp_path):
    lines = CLASSIFICATION.strip().splitlines()
    moved = [",".join([f[0], *f[2:], f[1]]) for f in (l.split(",") for l in lines)]  # unknown column last
    shuffled = "\n".join(moved[::-1]) + "\n"
    detection = "\n".join(DETECTION.strip().splitlines()[::-1]) + "\n"
    root = write_fixture(tmp_path, classification=shuffled, detection=detection)
    data = SailonSource(path=str(root), unknown_column="last").load()
    results = data.protocol.evaluate(data.record, {"threshold": 0.5})
    assert results["top1"] == pytest.approx(0.5) and results["m1_mean_fn_cdt"] == 1.0


def test_baseline_session_gives_m3_to_m6(tmp_path):
    root = write_fixture(tmp_path)
    (root / f"B.{TEST}_detection.csv").write_text(DETECTION)
    # Baseline: always class 1 (column 1): right on a and e only; pre-novelty accuracy 1/3.
    (root / f"B.{TEST}_classification.csv").write_text("".join(f"{i},0,1,0,0\n" for i in "abcdef" for i in [f"{i}.png"]))
    data = SailonSource(path=str(root), session="S1", baseline_session="B").load()
    results = data.protocol.evaluate(data.record, {"threshold": 0.5})
    # M3 = 100 * P_post,agent / P_pre,baseline = 100 * (1/3) / (1/3) = 100.
    assert results["m3_nrp_top1"] == pytest.approx(100.0)
    # M5 = P_post,agent / (P_post,agent + P_post,baseline) = (1/3) / (1/3 + 1/3) = 0.5.
    assert results["m5_opti_top1"] == pytest.approx(0.5)


@pytest.mark.parametrize("change, words", [
    (dict(gt=GT.replace("classification", "label")), ["missing column 'classification'"]),
    (dict(detection=DETECTION.replace("e.png", "z.png")), ["_detection.csv", "e.png"]),
    (dict(detection=DETECTION.replace("c.png,0.3", "c.png,0.3,7")), ["_detection.csv, row 3", "expected 2"]),
    (dict(classification=CLASSIFICATION.replace("0.6,0.2", "oops,0.2")), ["_classification.csv, row 4", "'p_0'", "'oops'"]),
    (dict(gt=GT.replace("e.png,1,0", "e.png,1,nan")), ["_single_df.csv, row 6", "'classification'", "NaN"]),
    (dict(classification=CLASSIFICATION.replace("0.1,0.7,0.1,0.1", "0.1,0.7,0.1,0.3")), ["sample 'a.png'", "sum to 1.2"]),
])
def test_broken_inputs_give_one_clear_error(tmp_path, change, words):
    root = write_fixture(tmp_path, **change)
    with pytest.raises(SourceFormatError) as info:
        SailonSource(path=str(root)).load()
    for w in words:
        assert w in str(info.value)


def test_missing_result_file_is_named(tmp_path):
    root = write_fixture(tmp_path)
    (root / f"S1.{TEST}_classification.csv").unlink()
    with pytest.raises(SourceFormatError, match=r"S1\.OND\.1\.1\.1234_classification\.csv: file not found"):
        SailonSource(path=str(root)).load()


def test_evaluate_cli_logs_like_a_live_run(tmp_path, experiment, client):
    root = write_fixture(tmp_path / "results")
    values = evaluate(["+source=sailon", f"source.path={root}", *experiment["overrides"]], output_dir=tmp_path / "out")
    assert values["top1"] == pytest.approx(0.5)
    exp = client.get_experiment_by_name(experiment["name"])
    (run,) = client.search_runs([exp.experiment_id])
    assert run.info.status == "FINISHED"
    assert run.data.tags["source"] == "sailon" and run.data.tags["session"] == "S1"
    assert run.data.metrics["m2_cdt_pct"] == 100.0
    assert run.data.params["source.unknown_column"] == "first"
    paths = {a.path for a in client.list_artifacts(run.info.run_id, "plots")}
    assert "plots/detection_timeline.png" in paths


def test_broken_source_creates_no_run(tmp_path, experiment, client):
    root = write_fixture(tmp_path / "results", detection=DETECTION.replace("e.png", "z.png"))
    with pytest.raises(SourceFormatError):
        evaluate(["+source=sailon", f"source.path={root}", *experiment["overrides"]], output_dir=tmp_path / "out")
    exp = client.get_experiment_by_name(experiment["name"])
    assert exp is None or not client.search_runs([exp.experiment_id])
