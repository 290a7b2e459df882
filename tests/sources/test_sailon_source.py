"""SAIL-ON local-harness results, written by hand here, read and scored like a live run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from owl_eval.evaluation import evaluation_for
from owl_eval.protocols.ond.sources.sailon import SailonSource
from owl_eval.runner.api import evaluate
from owl_eval.sources import SourceFormatError

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
# The fixture above writes known classes 0..K-1 and novel classes negative (not the package's convention).
OLD = "zero_based_known"


def write_fixture(
    root: Path, *, gt=GT, detection=DETECTION, classification=CLASSIFICATION, session="S1", metadata=None
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{TEST}_single_df.csv").write_text(gt)
    (root / f"{TEST}_metadata.json").write_text(
        json.dumps(
            metadata or {"round_size": 2, "detection": 3, "red_light": "d.png", "protocol": "OND", "known_classes": 3}
        )
    )
    (root / f"{session}.{TEST}_detection.csv").write_text(detection)
    (root / f"{session}.{TEST}_classification.csv").write_text(classification)
    return root


def test_reads_and_scores_hand_computed_values(tmp_path):
    data = SailonSource(path=str(write_fixture(tmp_path)), class_index=OLD).load()
    trial = data.record.trials[0]
    np.testing.assert_array_equal(trial.gt_class, [1, 2, 3, 0, 1, 0])
    np.testing.assert_array_equal(trial.gt_novel, [0, 0, 0, 1, 0, 1])
    assert trial.red_light == 3 and trial.batch_size == 2
    results = evaluation_for(data.protocol).evaluate(data.record, {"threshold": 0.5})
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
    data = SailonSource(path=str(root), unknown_column="last", class_index=OLD).load()
    results = evaluation_for(data.protocol).evaluate(data.record, {"threshold": 0.5})
    assert results["top1"] == pytest.approx(0.5) and results["m1_mean_fn_cdt"] == 1.0


def test_baseline_session_gives_m3_to_m6(tmp_path):
    root = write_fixture(tmp_path)
    (root / f"B.{TEST}_detection.csv").write_text(DETECTION)
    # Baseline: always class 1 (column 1): right on a and e only; pre-novelty accuracy 1/3.
    (root / f"B.{TEST}_classification.csv").write_text(
        "".join(f"{i},0,1,0,0\n" for i in "abcdef" for i in [f"{i}.png"])
    )
    data = SailonSource(path=str(root), session="S1", baseline_session="B", class_index=OLD).load()
    results = evaluation_for(data.protocol).evaluate(data.record, {"threshold": 0.5})
    # M3 = 100 * P_post,agent / P_pre,baseline = 100 * (1/3) / (1/3) = 100.
    assert results["m3_nrp_top1"] == pytest.approx(100.0)
    # M5 = P_post,agent / (P_post,agent + P_post,baseline) = (1/3) / (1/3 + 1/3) = 0.5.
    assert results["m5_opti_top1"] == pytest.approx(0.5)


@pytest.mark.parametrize(
    "change, words",
    [
        (dict(gt=GT.replace("classification", "label")), ["missing column 'classification'"]),
        (dict(detection=DETECTION.replace("e.png", "z.png")), ["_detection.csv", "e.png"]),
        (dict(detection=DETECTION.replace("c.png,0.3", "c.png,0.3,7")), ["_detection.csv, row 3", "expected 2"]),
        (
            dict(classification=CLASSIFICATION.replace("0.6,0.2", "oops,0.2")),
            ["_classification.csv, row 4", "'p_0'", "'oops'"],
        ),
        (dict(gt=GT.replace("e.png,1,0", "e.png,1,nan")), ["_single_df.csv, row 6", "'classification'", "NaN"]),
        (
            dict(classification=CLASSIFICATION.replace("0.1,0.7,0.1,0.1", "0.1,0.7,0.1,0.3")),
            ["sample 'a.png'", "sum to 1.2"],
        ),
    ],
)
def test_broken_inputs_give_one_clear_error(tmp_path, change, words):
    root = write_fixture(tmp_path, **change)
    with pytest.raises(SourceFormatError) as info:
        SailonSource(path=str(root), class_index=OLD).load()
    for w in words:
        assert w in str(info.value)


def test_missing_result_file_is_named(tmp_path):
    root = write_fixture(tmp_path)
    (root / f"S1.{TEST}_classification.csv").unlink()
    with pytest.raises(SourceFormatError, match=r"S1\.OND\.1\.1\.1234_classification\.csv: file not found"):
        SailonSource(path=str(root), class_index=OLD).load()


def test_evaluate_cli_logs_like_a_live_run(tmp_path, experiment, client):
    root = write_fixture(tmp_path / "results")
    values = evaluate(
        [
            "+source=sailon",
            f"source.path={root}",
            f"source.class_index={OLD}",
            *experiment["overrides"],
            "figures=true",
        ],
        output_dir=tmp_path / "out",
    )
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
        evaluate(
            ["+source=sailon", f"source.path={root}", f"source.class_index={OLD}", *experiment["overrides"]],
            output_dir=tmp_path / "out",
        )
    exp = client.get_experiment_by_name(experiment["name"])
    assert exp is None or not client.search_runs([exp.experiment_id])


# ---------------------------------------------------------------------------------------------------------
# sail-on-client's own layout (tests/fixtures/sailon_client): class = column of the K+1 scores (0 = unknown),
# metadata red_light = a sample id, metadata detection ignored (4000 in test 101: beyond its 8 samples).
# ---------------------------------------------------------------------------------------------------------
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sailon_client"
GT_DIR = FIXTURE / "data" / "OND" / "image_classification"
RESULTS_DIR = FIXTURE / "mock_results" / "OND" / "image_classification"
SESSION = "5c1e0f2a-7d3b-4e96-a8c1-2f4b6d8e0a13"
TESTS = ("OND.101.000.0001", "OND.102.000.0002", "OND.103.000.0003")


def package_fixture(tmp_path: Path) -> tuple[Path, Path]:
    """A private copy of the fixture (so a test may change files)."""
    data, results = tmp_path / "data", tmp_path / "mock_results"
    shutil.copytree(FIXTURE / "data", data)
    shutil.copytree(FIXTURE / "mock_results", results)
    return data / "OND" / "image_classification", results / "OND" / "image_classification"


def test_package_fixture_hand_computed_values():
    data = SailonSource(path=str(FIXTURE / "data"), results_path=str(FIXTURE / "mock_results")).load()
    a, b, c = data.record.trials
    assert [t.trial_id for t in (a, b, c)] == list(TESTS)
    # Classes are used as written (0 = unknown column); red lights are the rows of the metadata's ids.
    np.testing.assert_array_equal(a.gt_class, [1, 2, 3, 1, 2, 0, 3, 0])
    np.testing.assert_array_equal(a.gt_novel, [0, 0, 0, 0, 0, 1, 0, 1])
    assert (a.red_light, b.red_light, c.red_light) == (5, 3, None)
    assert (a.batch_size, b.batch_size, c.batch_size) == (4, 3, 2)
    results = evaluation_for(data.protocol).evaluate(data.record, {"threshold": 0.5})
    # Detection (first P >= 0.5): 101 at row 6 >= red light 5 -> detected, 6 - 5 = 1 late; 102 at row 1 < 3 ->
    # early (false positive); 103 never (no novelty, no false positive).
    assert results["m1_mean_fn_cdt"] == 1.0  # mean over the one detected trial
    assert results["m2_cdt_pct"] == 50.0  # 1 detected of 2 trials with novelty
    assert results["m2_cdt_pct_all"] == pytest.approx(100 / 3)  # 1 of 3 trials
    assert results["m21_fp_pct"] == pytest.approx(100 / 3)  # 102 early, of 3 trials
    # Top-1 per row (argmax column == class): 101: rows 0,2,4,5 right -> all 4/8, pre (rows 0-4) 3/5, post 1/3;
    # 102: rows 0,3,5 -> 3/6, pre 1/3, post 2/3; 103: rows 0,2,3 -> 3/4 (all pre-novelty).
    assert results["top1"] == pytest.approx((4 / 8 + 3 / 6 + 3 / 4) / 3)
    assert results["top1_pre"] == pytest.approx((3 / 5 + 1 / 3 + 3 / 4) / 3)
    assert results["top1_post"] == pytest.approx((1 / 3 + 2 / 3) / 2)  # 103 has no post-novelty segment
    # Top-3 misses: 101 row 1 (class 2 has the lowest score 0.05), 102 row 2 (class 3 has 0.04),
    # 103 row 1 (class 2 has 0.05): 101 7/8, pre 4/5, post 3/3; 102 5/6, 2/3, 3/3; 103 3/4.
    assert results["top3"] == pytest.approx((7 / 8 + 5 / 6 + 3 / 4) / 3)
    assert results["top3_pre"] == pytest.approx((4 / 5 + 2 / 3 + 3 / 4) / 3)
    assert results["top3_post"] == 1.0


def test_package_convention_with_the_unknown_column_last(tmp_path):
    """Activity-recognition layout: unknown score column last, so the unknown class is K (= 3) and known
    class c is column c; the same data must give the same metrics."""
    gt_dir, results_dir = package_fixture(tmp_path)
    for test in TESTS:
        gt = gt_dir / f"{test}_single_df.csv"
        lines = gt.read_text().splitlines()
        rows = [line.split(",") for line in lines[1:]]
        gt.write_text("\n".join([lines[0]] + [",".join([r[0], r[1], str((int(r[2]) - 1) % 4)]) for r in rows]) + "\n")
        scores = results_dir / f"{SESSION}.{test}_classification.csv"
        moved = [line.split(",") for line in scores.read_text().splitlines()]
        scores.write_text("".join(",".join([f[0], *f[2:], f[1]]) + "\n" for f in moved))
    data = SailonSource(
        path=str(tmp_path / "data"), results_path=str(tmp_path / "mock_results"), unknown_column="last"
    ).load()
    np.testing.assert_array_equal(data.record.trials[0].gt_class, [1, 2, 3, 1, 2, 0, 3, 0])
    results = evaluation_for(data.protocol).evaluate(data.record, {"threshold": 0.5})
    assert results["top1"] == pytest.approx((4 / 8 + 3 / 6 + 3 / 4) / 3)
    assert results["top3_pre"] == pytest.approx((4 / 5 + 2 / 3 + 3 / 4) / 3)
    assert results["m1_mean_fn_cdt"] == 1.0 and results["m2_cdt_pct"] == 50.0


def test_sum_tolerance_is_honoured(tmp_path):
    """A row summing to 1.00005 passes source.sum_tolerance=1e-4 (the trial's own check is 1e-6) and changes
    no top-k value; the default tolerance refuses it, naming the file's row."""
    _, results_dir = package_fixture(tmp_path)
    scores = results_dir / f"{SESSION}.{TESTS[0]}_classification.csv"
    scores.write_text(scores.read_text().replace(",0.1,0.6,0.2,0.1\n", ",0.1,0.60005,0.2,0.1\n"))
    paths = {"path": str(tmp_path / "data"), "results_path": str(tmp_path / "mock_results")}
    data = SailonSource(**paths, sum_tolerance=1e-4).load()
    row = data.record.trials[0].p_class[0]
    assert abs(row.sum() - 1) <= 1e-12 and row[1] == pytest.approx(0.60005 / 1.00005)
    results = evaluation_for(data.protocol).evaluate(data.record, {"threshold": 0.5})
    assert results["top1"] == pytest.approx((4 / 8 + 3 / 6 + 3 / 4) / 3)
    with pytest.raises(
        SourceFormatError, match=r"_classification\.csv, row 1 .*sum to 1\.00005.*source\.sum_tolerance=1e-06"
    ):
        SailonSource(**paths).load()


@pytest.mark.parametrize(
    "test, change, words",
    [
        (
            0,
            ('"red_light": "unknown_classes/images/val/00000/00051.JPEG"', '"red_light": "nowhere.JPEG"'),
            ["OND.101.000.0001_metadata.json", "'nowhere.JPEG'", "not a sample"],
        ),
        (
            0,
            (
                '"red_light": "unknown_classes/images/val/00000/00051.JPEG"',
                '"red_light": "known_classes/images/val/00001/00044.JPEG"',
            ),
            ["OND.101.000.0001_metadata.json", "row 5", "row 7", "first novel sample"],
        ),
        (1, ('"round_size": 3', '"round_size": "abc"'), ["OND.102.000.0002_metadata.json", "round_size", "'abc'"]),
        (1, ('"round_size": 3', '"round_size": Infinity'), ["OND.102.000.0002_metadata.json", "round_size", "inf"]),
    ],
)
def test_metadata_errors_name_the_file(tmp_path, test, change, words):
    gt_dir, _ = package_fixture(tmp_path)
    meta = gt_dir / f"{TESTS[test]}_metadata.json"
    assert change[0] in meta.read_text()
    meta.write_text(meta.read_text().replace(*change))
    with pytest.raises(SourceFormatError) as info:
        SailonSource(path=str(tmp_path / "data"), results_path=str(tmp_path / "mock_results")).load()
    for w in words:
        assert w in str(info.value)


@pytest.mark.parametrize(
    "class_index, old, new, words",
    [
        (
            "package",
            "unknown_classes/images/val/00000/00051.JPEG,1,0",
            "unknown_classes/images/val/00000/00051.JPEG,1,-1",
            ["row 7", "'classification'", "class -1", "zero_based_known"],
        ),
        (
            "package",
            "known_classes/images/val/00003/00008.JPEG,1,3",
            "known_classes/images/val/00003/00008.JPEG,1,4",
            ["row 8", "class 4", "0..3"],
        ),
        (
            "package",
            "known_classes/images/val/00002/00007.JPEG,0,2",
            "known_classes/images/val/00002/00007.JPEG,0,2.7",
            ["row 3", "'classification'", "integer", "'2.7'"],
        ),
        (
            "zero_based_known",
            "known_classes/images/val/00003/00031.JPEG,0,3",
            "known_classes/images/val/00003/00031.JPEG,0,3",
            ["row 4", "class 3", "0..2"],
        ),
    ],
)
def test_class_outside_the_convention_is_an_error(tmp_path, class_index, old, new, words):
    gt_dir, _ = package_fixture(tmp_path)
    gt = gt_dir / f"{TESTS[0]}_single_df.csv"
    assert old in gt.read_text()
    gt.write_text(gt.read_text().replace(old, new))
    with pytest.raises(SourceFormatError) as info:
        SailonSource(
            path=str(tmp_path / "data"), results_path=str(tmp_path / "mock_results"), class_index=class_index
        ).load()
    assert "OND.101.000.0001_single_df.csv" in str(info.value)
    for w in words:
        assert w in str(info.value)


def test_package_fixture_through_the_cli(tmp_path, experiment, client):
    values = evaluate(
        [
            "+source=sailon",
            f"source.path={FIXTURE / 'data'}",
            f"source.results_path={FIXTURE / 'mock_results'}",
            *experiment["overrides"],
        ],
        output_dir=tmp_path / "out",
    )
    assert values["m21_fp_pct"] == pytest.approx(100 / 3)
    exp = client.get_experiment_by_name(experiment["name"])
    (run,) = client.search_runs([exp.experiment_id])
    assert run.data.tags["session"] == SESSION and run.data.tags["class_index"] == "package"
    assert run.data.metrics["detail/top3_post"] == 1.0


def test_activity_recognition_layout_with_a_novel_column(tmp_path):
    """Activity recognition: unknown score column last (K = 2, so class 2 is the unknown), novelty from the
    ``novel`` column, no red_light in the metadata: the red light is the first novel sample (row 2)."""
    (tmp_path / "AR.1_single_df.csv").write_text(
        "anonymous_id,novel,detection,ontology_id\nv1,0,0,0\nv2,0,0,1\nv3,1,1,2\nv4,0,1,1\nv5,1,1,2\n"
    )
    (tmp_path / "AR.1_metadata.json").write_text('{"protocol": "OND", "known_classes": 2, "round_size": 5}')
    (tmp_path / "S.AR.1_detection.csv").write_text("v1,0.1\nv2,0.2\nv3,0.3\nv4,0.6\nv5,0.9\n")
    (tmp_path / "S.AR.1_classification.csv").write_text(
        "v1,0.7,0.2,0.1\nv2,0.6,0.3,0.1\nv3,0.1,0.2,0.7\nv4,0.2,0.7,0.1\nv5,0.5,0.1,0.4\n"
    )
    data = SailonSource(
        path=str(tmp_path),
        unknown_column="last",
        columns={"id": "anonymous_id", "novel": "novel", "class": "ontology_id"},
    ).load()
    (trial,) = data.record.trials
    np.testing.assert_array_equal(trial.gt_class, [1, 2, 0, 2, 0])  # c < K -> c + 1, c == K -> 0
    assert trial.red_light == 2
    results = evaluation_for(data.protocol).evaluate(data.record, {"threshold": 0.5})
    # top-1 (argmax column == class as written): v1 yes, v2 no (col 0 vs 1), v3 yes, v4 yes, v5 no (col 0 vs 2).
    assert results["top1"] == pytest.approx(3 / 5)
    assert results["top1_pre"] == pytest.approx(1 / 2) and results["top1_post"] == pytest.approx(2 / 3)
    assert results["m1_mean_fn_cdt"] == 1.0  # first P >= 0.5 at row 3, red light at row 2
    # per-sample detection after the red light: unknown score >= 0.5 on v3 only; novel are v3 and v5.
    assert results["unknown_score_precision_post"] == 1.0 and results["unknown_score_recall_post"] == 0.5


@pytest.mark.parametrize("quote_char", ["|", '"'])
def test_random_layouts_read_as_sail_on_clients_local_harness_reads_them(tmp_path, quote_char):
    """sail-on-client 0.30's ``LocalHarness.evaluate`` reads the three files with ``pd.read_csv(path, sep=",",
    header=None, quotechar="|")`` (the ground truth with ``skiprows=1``) and pairs their rows by position. Random
    layouts written in the same row order, with quoted ids and text holding commas, quotes and CR/LF line breaks,
    a BOM, CRLF line ends, blank trailing lines and one-row files: our trial holds exactly the arrays pandas reads
    (``'"'``: pandas with ``quotechar='"'``, as ``source.quote_char='"'``)."""
    pd = pytest.importorskip("pandas")
    q = quote_char
    rng = np.random.default_rng(17 if q == "|" else 18)
    alphabet = [*"abXY09 .-_", ",", ",", "\n", "\r\n", q, "'", '"' if q == "|" else "|", "é"]

    def field(force=False):
        s = "".join(rng.choice(alphabet) for _ in range(int(rng.integers(1, 7))))
        quoted = force or s != s.strip() or any(c in s for c in (",", "\n", "\r", q))
        return q + s.replace(q, q + q) + q if quoted else s

    for case in range(25):
        root = tmp_path / str(case)
        root.mkdir()
        n = 1 if case % 6 == 0 else int(rng.integers(2, 20))
        ids, seen = [], set()
        while len(ids) < n:
            f = field(rng.random() < 0.2)
            key = (f[1:-1].replace(q + q, q) if f.startswith(q) else f).strip()
            if key and key not in seen:
                seen.add(key)
                ids.append(f)
        detection = np.zeros(n, dtype=int)
        detection[int(rng.integers(0, n)) if case % 3 else n :] = 1  # every third case without novelty
        known = int(rng.integers(1, 5))
        classes = np.where(detection == 1, 0, rng.integers(1, known + 1, n))
        pwc = rng.choice([0.0, 0.5, 1.0, *rng.random(3)], n)
        scores = rng.dirichlet(np.ones(known + 1), n)
        nl = "\r\n" if case % 2 else "\n"
        bom = "\ufeff" if case % 4 == 1 else ""
        tail = nl * int(rng.integers(0, 3))
        text = rng.random() < 0.5
        gt = bom + "id,detection,classification" + (",text" if text else "") + nl
        gt += (
            nl.join(f"{ids[i]},{detection[i]},{classes[i]}" + (f",{field()}" if text else "") for i in range(n)) + tail
        )
        det = bom + nl.join(f"{ids[i]},{float(pwc[i])!r}" for i in range(n)) + tail
        cls = bom + nl.join(ids[i] + "," + ",".join(repr(float(v)) for v in scores[i]) for i in range(n)) + tail
        for name, content in (
            (f"{TEST}_single_df.csv", gt),
            (f"S1.{TEST}_detection.csv", det),
            (f"S1.{TEST}_classification.csv", cls),
        ):
            (root / name).write_bytes(content.encode())
        ref_gt = pd.read_csv(root / f"{TEST}_single_df.csv", sep=",", header=None, skiprows=1, quotechar=q)
        ref_det = pd.read_csv(root / f"S1.{TEST}_detection.csv", sep=",", header=None, quotechar=q)
        ref_cls = pd.read_csv(root / f"S1.{TEST}_classification.csv", sep=",", header=None, quotechar=q)
        trial = (
            SailonSource(path=str(root), round_size=3, columns={"novel": "detection"}, quote_char=q)
            .load()
            .record.trials[0]
        )
        assert len(ref_gt) == len(ref_det) == len(ref_cls) == n, case
        np.testing.assert_array_equal(trial.gt_novel, ref_gt[1].to_numpy())
        np.testing.assert_array_equal(trial.gt_class, ref_gt[2].to_numpy())
        np.testing.assert_array_equal(trial.p_world_changed, ref_det[1].to_numpy(float))
        np.testing.assert_allclose(trial.p_class, ref_cls.iloc[:, 1:].to_numpy(float), rtol=0, atol=1e-15)
