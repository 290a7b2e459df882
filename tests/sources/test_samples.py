"""The sample results of examples/results/ (one per ``owl-eval-evaluate`` source): each is read by its source
and scored, and a few numbers are checked against values computed here from the sample files with plain
loops (the ``csv`` and ``json`` modules, ``np.load``), not with owl-eval's readers or metrics. The slow test
re-creates the samples with examples/results/make_samples.py and compares them with the shipped files."""

from __future__ import annotations

import csv
import importlib.util
import json
import math
import re
import zipfile
from pathlib import Path

import numpy as np
import pytest

from owl_eval.evaluation import evaluation_for
from owl_eval.formats.checksums import verify
from owl_eval.protocols.continual.sources.accuracy_matrix import AccuracyMatrixSource
from owl_eval.protocols.lifelong_rl.sources.l2logger import L2LoggerSource
from owl_eval.protocols.ond.sources.sailon import SailonSource
from owl_eval.protocols.trajectory.sources.trajectories import TrajectoriesSource
from owl_eval.sources.record import RecordSource

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SAMPLES = PROJECT_ROOT / "examples" / "results"
SAILON_DATA = SAMPLES / "sailon" / "data" / "OND" / "image_classification"
SAILON_RESULTS = SAMPLES / "sailon" / "results" / "OND" / "image_classification"
TRAJECTORIES = SAMPLES / "trajectories" / "crowd_knn_futures.npz"
SESSION, BASELINE = "knn_novelty", "closed_world"


def scored(source, settings: dict | None = None):
    data = source.load()
    return data, evaluation_for(data.protocol).evaluate(data.record, settings or {})


def sailon_source(**kw) -> SailonSource:
    return SailonSource(
        path=str(SAMPLES / "sailon" / "data"),
        results_path=str(SAMPLES / "sailon" / "results"),
        session=SESSION,
        baseline_session=BASELINE,
        **kw,
    )


def mean(values) -> float:
    values = list(values)
    return sum(values) / len(values)


# -- sailon: the sail-on-client CSVs, read with the csv module ----------------------------------------------
def _rows(path: Path) -> list[list[str]]:
    with path.open(newline="") as f:
        return [row for row in csv.reader(f) if row]


def _argmax(scores: list[float]) -> int:
    """The first column with the largest score (ties go to the lower column)."""
    best = 0
    for k, s in enumerate(scores):
        if s > scores[best]:
            best = k
    return best


def _sailon_trials(session: str) -> list[dict]:
    trials = []
    for gt_path in sorted(SAILON_DATA.glob("*_single_df.csv")):
        test_id = gt_path.name[: -len("_single_df.csv")]
        header, *rows = _rows(gt_path)
        assert header == ["id", "detection", "classification"]
        ids = [r[0] for r in rows]
        classes = [int(r[2]) for r in rows]  # the column of the K+1 scores, 0 = unknown
        meta = json.loads((SAILON_DATA / f"{test_id}_metadata.json").read_text())
        red = ids.index(meta["red_light"]) if meta["red_light"] else None
        detection = {r[0]: float(r[1]) for r in _rows(SAILON_RESULTS / f"{session}.{test_id}_detection.csv")}
        scores = {
            r[0]: [float(x) for x in r[1:]] for r in _rows(SAILON_RESULTS / f"{session}.{test_id}_classification.csv")
        }
        correct = [_argmax(scores[i]) == c for i, c in zip(ids, classes)]
        trials.append({"red": red, "correct": correct, "world": [detection[i] for i in ids]})
    return trials


def test_sailon_sample_top1_and_detection_by_hand():
    trials = _sailon_trials(SESSION)
    base = _sailon_trials(BASELINE)
    assert len(trials) == 5 and sum(t["red"] is None for t in trials) == 1
    # top-1: per trial, then the mean over trials (pre/post: over the trials that have the segment)
    top1 = mean(mean(t["correct"]) for t in trials)
    top1_pre = mean(mean(t["correct"][: t["red"]]) for t in trials if t["red"] != 0)
    top1_post = mean(mean(t["correct"][t["red"] :]) for t in trials if t["red"] is not None)
    # detection: the first sample with P(world changed) >= 0.5; correct when at or after the red light
    delays, early = [], 0
    for t in trials:
        first = next((i for i, p in enumerate(t["world"]) if p >= 0.5), None)
        if first is not None and (t["red"] is None or first < t["red"]):
            early += 1
        elif first is not None:
            delays.append(first - t["red"])
    with_novelty = [(t, b) for t, b in zip(trials, base) if t["red"] is not None]
    # M3: 100 x the agent's post-novelty top-1 / the baseline's pre-novelty top-1, mean over trials with novelty
    m3 = mean(100 * mean(t["correct"][t["red"] :]) / mean(b["correct"][: b["red"]]) for t, b in with_novelty)

    data, results = scored(sailon_source())
    assert data.tags["session"] == SESSION and data.tags["tests"] == "5"
    assert results["top1"] == pytest.approx(top1, abs=1e-12)
    assert results["top1_pre"] == pytest.approx(top1_pre, abs=1e-12)
    assert results["top1_post"] == pytest.approx(top1_post, abs=1e-12)
    assert results["baseline.top1"] == pytest.approx(mean(mean(b["correct"]) for b in base), abs=1e-12)
    assert results["m2_cdt_pct"] == pytest.approx(100 * len(delays) / len(with_novelty))
    assert results["m21_fp_pct"] == pytest.approx(100 * early / len(trials))
    assert results["m1_mean_fn_cdt"] == pytest.approx(mean(delays))
    assert results["m3_nrp_top1"] == pytest.approx(m3, rel=1e-12)
    # the values the samples' README quotes
    assert round(results["top1"], 4) == 0.8733 and results["m1_mean_fn_cdt"] == 23.5


def test_sailon_sample_scores_as_the_record_it_was_written_from():
    """sailon/ is the OND run of record/ written in sail-on-client's layout (floats as repr): same numbers."""
    _, from_csv = scored(sailon_source())
    _, from_record = scored(RecordSource(path=str(SAMPLES / "record")))
    assert from_csv.values == from_record.values and from_csv.values
    assert from_csv.na.keys() == from_record.na.keys()


def test_record_sample_rescored_at_another_threshold():
    """M2 at threshold 0.7 counted from the record's arrays (np.load, no owl-eval reader)."""
    with np.load(SAMPLES / "record" / "ond_record.npz", allow_pickle=False) as npz:
        lengths, red = npz["agent/lengths"], npz["agent/red_light"]
        world = npz["agent/p_world_changed"]
    starts = np.concatenate([[0], np.cumsum(lengths)])
    detected = novel = 0
    for k in range(len(lengths)):
        if red[k] < 0:  # no novelty in this trial
            continue
        novel += 1
        trial = world[starts[k] : starts[k + 1]]
        first = next((i for i, p in enumerate(trial) if p >= 0.7), None)
        detected += first is not None and first >= red[k]
    data, results = scored(RecordSource(path=str(SAMPLES / "record"), metrics={"threshold": 0.7}), {"threshold": 0.7})
    assert data.tags["record_kind"] == "ond"
    assert results["m2_cdt_pct"] == pytest.approx(100 * detected / novel)


# -- accuracy_matrix: Renate's dict (json) and the CSV (csv) -----------------------------------------------
def test_accuracy_matrix_samples_by_hand():
    renate = json.loads((SAMPLES / "accuracy_matrix" / "renate_results.json").read_text())
    a, b, n = renate["accuracy"], renate["accuracy_init"][0], renate["num_instances"]
    header, *rows = _rows(SAMPLES / "accuracy_matrix" / "accuracy_matrix.csv")
    assert header[0] == "after_task" and [int(r[0]) for r in rows] == list(range(len(a)))
    assert [[float(x) for x in r[1:]] for r in rows] == a  # the CSV holds the same matrix, exactly
    t = len(a) - 1
    average = sum(a[t]) / len(a[t])
    micro = sum(a[t][i] * n[i] for i in range(t + 1)) / sum(n)
    backward = sum(a[t][i] - a[i][i] for i in range(t)) / t
    forgetting = sum(max(a[k][i] for k in range(t)) - a[t][i] for i in range(t)) / t
    forward = sum(a[i - 1][i] - b[i] for i in range(1, t + 1)) / t

    _, from_json = scored(AccuracyMatrixSource(path=str(SAMPLES / "accuracy_matrix" / "renate_results.json")))
    _, from_csv = scored(
        AccuracyMatrixSource(
            path=str(SAMPLES / "accuracy_matrix" / "accuracy_matrix.csv"), init_accuracy=b, num_instances=n
        )
    )
    for results in (from_json, from_csv):
        assert results["tasks_completed"] == 5
        assert results["average_accuracy"] == pytest.approx(average, abs=1e-12)
        assert results["micro_average_accuracy"] == pytest.approx(micro, abs=1e-12)
        assert results["backward_transfer"] == pytest.approx(backward, abs=1e-12)
        assert results["forgetting"] == pytest.approx(forgetting, abs=1e-12)
        assert results["forward_transfer"] == pytest.approx(forward, abs=1e-12)
    assert from_json.values == from_csv.values
    assert round(average, 4) == 0.7853  # quoted in the samples' README


def test_accuracy_matrix_csv_with_the_documented_rounded_init_accuracies():
    """The docs' CSV line gives the init accuracies to 4 decimals: only the forward transfer moves, by < 1e-4."""
    line = _doc_line("accuracy_matrix.csv")
    init = json.loads(re.search(r"source\.init_accuracy=(\[[^\]]*\])", line)[1])
    sizes = json.loads(re.search(r"source\.num_instances=(\[[^\]]*\])", line)[1])
    renate = json.loads((SAMPLES / "accuracy_matrix" / "renate_results.json").read_text())
    assert sizes == renate["num_instances"]
    assert init == pytest.approx(renate["accuracy_init"][0], abs=5e-5)
    _, exact = scored(AccuracyMatrixSource(path=str(SAMPLES / "accuracy_matrix" / "renate_results.json")))
    _, rounded = scored(
        AccuracyMatrixSource(
            path=str(SAMPLES / "accuracy_matrix" / "accuracy_matrix.csv"), init_accuracy=init, num_instances=sizes
        )
    )
    for name, value in exact.values.items():
        assert rounded[name] == pytest.approx(value, abs=1e-4 if "forward" in name else 1e-12), name


# -- trajectories: the General-Framework arrays, with np.load and loops ----------------------------------
def test_trajectories_sample_ade_fde_by_hand():
    with np.load(TRAJECTORIES, allow_pickle=False) as npz:
        true, pred, mask = npz["Path_true"].astype(float), npz["Path_pred"].astype(float), npz["Pred_steps"]
        p_true, p_pred, names = npz["P_true"], npz["P_pred"], npz["Class_names"]
    n_s, n_p, n_a, n_o, _ = pred.shape
    ade, fde = [], []
    for s in range(n_s):
        for a in range(n_a):
            steps = [o for o in range(n_o) if mask[s, a, o]]
            if not steps:
                continue
            # per prediction: the mean distance over the agent's counted steps, and the distance at its last one
            per_pred = [[math.dist(pred[s, p, a, o], true[s, 0, a, o]) for o in steps] for p in range(n_p)]
            ade.append(mean(mean(d) for d in per_pred))
            fde.append(mean(d[-1] for d in per_pred))
    assert p_true.shape == p_pred.shape == (n_s, len(names)) and (p_true.sum(1) == 1).all()

    data, results = scored(TrajectoriesSource(path=str(TRAJECTORIES)))
    assert data.tags["log_probs"] == "kde" and results["num_scenes"] == n_s == 8
    assert results["num_agents"] == len(ade)
    assert results["ade_marginal"] == pytest.approx(mean(ade), rel=1e-9)
    assert results["fde_marginal"] == pytest.approx(mean(fde), rel=1e-9)
    assert not results.na, results.na  # 100 predictions: every metric, the KDE ones and the class ones, has a value


# -- l2logger: the data-log.tsv files, with the csv module --------------------------------------------------
def _episodes(scenario: Path) -> list[dict]:
    rows = []
    for path in scenario.rglob("data-log.tsv"):
        with path.open(newline="") as f:
            rows += list(csv.DictReader(f, delimiter="\t"))
    return rows


def test_l2logger_sample_by_hand():
    (scenario,) = (SAMPLES / "l2logger" / "l2log").iterdir()
    rows = [r for r in _episodes(scenario) if r["exp_status"] == "complete"]
    tasks = sorted({r["task_name"] for r in rows})
    # with no normalisation and no smoothing, a task's average performance is the mean of its blocks' means
    blocks: dict[tuple[str, str], dict[str, list[float]]] = {}
    for r in rows:
        blocks.setdefault((r["task_name"], r["block_type"]), {}).setdefault(r["block_num"], []).append(
            float(r["reward"])
        )
    ste = sorted((SAMPLES / "l2logger" / "ste").iterdir())
    assert [d.name for d in ste] == tasks  # one STE log per task, in a folder named by it
    for d in ste:
        (log,) = d.iterdir()
        assert {r["task_name"] for r in _episodes(log)} == {d.name}

    data, results = scored(
        L2LoggerSource(path=str(SAMPLES / "l2logger" / "l2log"), ste_paths=[str(SAMPLES / "l2logger" / "ste")]),
        {"normalization": "none", "smoothing": "none"},
    )
    assert data.tags["ste_logs"] == ",".join(tasks)
    assert results["episodes"] == len(rows)
    for task in tasks:
        for kind, metric in (("train", "avg_train_perf"), ("test", "avg_eval_perf")):
            hand = mean(mean(v) for v in blocks[(task, kind)].values())
            assert results[f"task/{task}/{metric}"] == pytest.approx(hand, rel=1e-12), (task, metric)
    _, defaults = scored(
        L2LoggerSource(path=str(SAMPLES / "l2logger" / "l2log"), ste_paths=[str(SAMPLES / "l2logger" / "ste")])
    )
    # 3 cycles: each variant is trained in 3 blocks, so performance recovery has its 2 recovery times
    assert "perf_recovery" in defaults.values and "ste_rel_perf" in defaults.values


# -- the samples, their README and the docs -------------------------------------------------------------
def _doc_line(containing: str) -> str:
    from tests.runner.test_readme import bash_lines

    return next(
        line
        for line in bash_lines((PROJECT_ROOT / "docs" / "BRING_YOUR_OWN_RESULTS.md",))
        if "examples/results/" in line and containing in line
    )


def test_samples_are_small_and_every_one_is_documented():
    from tests.runner.test_readme import bash_lines

    sizes = {
        d.name: sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
        for d in SAMPLES.iterdir()
        if d.is_dir() and d.name != "__pycache__"  # make_samples.py's bytecode, when Python writes it
    }
    assert set(sizes) == {"sailon", "l2logger", "accuracy_matrix", "trajectories", "record"}
    assert max(sizes.values()) < 400_000 and sum(sizes.values()) < 2_000_000, sizes
    docs = bash_lines((PROJECT_ROOT / "docs" / "BRING_YOUR_OWN_RESULTS.md",))
    readme = bash_lines((SAMPLES / "README.md",))
    for kind in sizes:
        assert any(f"+source={kind} " in line and "examples/results/" in line for line in docs), kind
    # the samples' README shows the docs' lines (test_docs.py runs those), and no other command
    assert readme and all(line in docs for line in readme if "owl-eval-evaluate" in line)


def _load_generator():
    spec = importlib.util.spec_from_file_location("make_samples", SAMPLES / "make_samples.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


STAMP = re.compile(r"-\d+-\d+(?=/|$)")  # l2logger's <name>-<time stamp> folders


def _tree(root: Path) -> dict[str, Path]:
    return {STAMP.sub("-STAMP", str(p.relative_to(root))): p for p in sorted(root.rglob("*")) if p.is_file()}


# -- a re-created sample against the shipped one: numbers within a stated tolerance, everything else exact ------
# The samples are generated on one machine and re-created on any other, where a different CPU (SIMD width,
# fused multiply-add) or BLAS build rounds some float operations differently: the last bit or two of a value
# may change (one ulp is 2.2e-16 of it in float64), so a float is never compared byte for byte. The tolerance
# is far above that rounding, even amplified by a model's fit over many iterations, and far below what a real
# change to the generator or to owl-eval's record gives (another seed, sample, size or formula moves values by
# 1e-3 or more). A float32 array holds float64 values rounded once more: a value that moved by an ulp may
# round to the neighbouring float32 (1.2e-7 of it), hence its wider tolerance. atol covers values that are 0
# on one machine and a rounding residue (1e-17) on another.
TOLERANCE = {
    np.dtype(np.float64): {"rtol": 1e-8, "atol": 1e-12},
    np.dtype(np.float32): {"rtol": 1e-6, "atol": 1e-6},
}
# A float literal in a text file (a ``repr``, a JSON number, a TSV cell): digits with a fraction or an exponent,
# or nan/inf, not part of a longer token (the ids ``OND.101.000.0001`` and file names keep their digits).
# Integers are not matched: counts, classes and labels stay in the text, compared exactly.
FLOAT_LITERAL = re.compile(
    r"(?<![\w.+-])-?(?:\d+(?:\.\d+(?:[eE][-+]?\d+)?|[eE][-+]?\d+)|nan|inf|NaN|Infinity)(?![\w.])"
)


def _floats_masked(text: str) -> tuple[str, np.ndarray]:
    """The text with each float literal replaced by ``<float>``, and those floats in order."""
    numbers: list[float] = []

    def mask(match: re.Match) -> str:
        numbers.append(float(match[0]))
        return "<float>"

    return FLOAT_LITERAL.sub(mask, text), np.asarray(numbers, dtype=np.float64)


def assert_same_text(shipped: str, made: str, name: str) -> None:
    """CSV, TSV and JSON samples: their text is the format the readers parse (delimiters, quoting, headers,
    ids, integers, line ends), so it must be identical once the floats are masked; the floats themselves
    agree within the float64 tolerance."""
    old_text, old = _floats_masked(shipped)
    new_text, new = _floats_masked(made)
    assert new_text == old_text, f"{name}: the text besides the floats differs"
    np.testing.assert_allclose(new, old, equal_nan=True, err_msg=name, **TOLERANCE[np.dtype(np.float64)])


def assert_same_npz(shipped: Path, made: Path, name: str) -> None:
    """An .npz sample: the same members in the same order, each stored the same way (compressed or not) with
    the same dtype and shape; float members within their dtype's tolerance, integer, boolean and label arrays
    exactly, text members (the record's ``meta_json``) as text."""
    with zipfile.ZipFile(shipped) as a, zipfile.ZipFile(made) as b:
        layout = [[(i.filename, i.compress_type) for i in z.infolist()] for z in (a, b)]
    assert layout[1] == layout[0], f"{name}: members or their storage differ"
    with np.load(shipped, allow_pickle=False) as a, np.load(made, allow_pickle=False) as b:
        for key in a.files:
            old, new = a[key], b[key]
            where = f"{name}: {key}"
            assert (new.dtype, new.shape) == (old.dtype, old.shape), where
            if old.dtype.kind == "f":
                np.testing.assert_allclose(new, old, equal_nan=True, err_msg=where, **TOLERANCE[old.dtype])
            elif old.dtype.kind == "U":
                for o, n in zip(old.ravel().tolist(), new.ravel().tolist()):
                    assert_same_text(o, n, where)
            else:
                np.testing.assert_array_equal(new, old, err_msg=where)


def _tsv_without_timestamps(path: Path) -> str:
    """An l2logger data-log.tsv without its wall-clock ``timestamp`` column (the rest of its text as is)."""
    lines = path.read_text().split("\n")
    column = lines[0].split("\t").index("timestamp")
    return "\n".join("\t".join(c for k, c in enumerate(line.split("\t")) if k != column) for line in lines)


def assert_same_sample(shipped: Path, made: Path, name: str) -> None:
    """One re-created sample file against the shipped one, by the comparison its format calls for."""
    if name.endswith("record_checksums.json"):  # SHA-256s of bytes that differ (zip times, rounding): each
        for path in (shipped, made):  # must vouch for its own folder, whose files are compared one by one here
            assert verify(path.parent).checked, name
    elif name.endswith("data-log.tsv"):
        assert_same_text(_tsv_without_timestamps(shipped), _tsv_without_timestamps(made), name)
    elif name.endswith((".csv", ".tsv", ".json")):
        assert_same_text(shipped.read_text(), made.read_text(), name)
    elif name.endswith(".npz"):
        assert_same_npz(shipped, made, name)
    else:  # no other kind ships today; an unknown format has no stated tolerance, so its bytes are the contract
        assert made.read_bytes() == shipped.read_bytes(), name


def _one_ulp_up(value: float) -> float:
    return float(np.nextafter(value, np.inf))


def test_a_sample_recreated_on_another_cpu_is_the_same_sample(tmp_path):
    """What another CPU's rounding gives (one float one ulp away, in the record's .npz, in a CSV and in the
    JSON) is the same sample, though not the same bytes; a changed integer, label, text or a float moved by
    more than the tolerance is not."""
    record = SAMPLES / "record" / "ond_record.npz"
    with np.load(record, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}

    def npz_with(path: Path, **changed: np.ndarray) -> Path:
        with zipfile.ZipFile(record) as z:
            compressed = z.infolist()[0].compress_type == zipfile.ZIP_DEFLATED
        (np.savez_compressed if compressed else np.savez)(path, **{**arrays, **changed})
        return path

    world = arrays["agent/p_world_changed"].copy()
    world[7] = _one_ulp_up(world[7])
    ulp = npz_with(tmp_path / "ulp.npz", **{"agent/p_world_changed": world})
    assert ulp.read_bytes() != record.read_bytes()  # what the byte-for-byte comparison refused
    assert_same_npz(record, ulp, "ond_record.npz")

    moved = arrays["agent/p_class"].copy()
    moved[3, 2] += 1e-4
    gt = arrays["agent/gt_class"].copy()
    gt[0] = (gt[0] + 1) % 7
    names = arrays["agent/trial_id"].copy()
    names[0] = "renamed"
    for changed in ({"agent/p_class": moved}, {"agent/gt_class": gt}, {"agent/trial_id": names}):
        with pytest.raises(AssertionError):
            assert_same_npz(record, npz_with(tmp_path / "changed.npz", **changed), "ond_record.npz")

    csv_path = SAMPLES / "accuracy_matrix" / "accuracy_matrix.csv"
    text = csv_path.read_text()
    first = FLOAT_LITERAL.search(text.splitlines()[1])
    assert first is not None
    line_start = text.index("\n") + 1
    at = slice(line_start + first.start(), line_start + first.end())
    ulp_text = text[: at.start] + repr(_one_ulp_up(float(first[0]))) + text[at.stop :]
    assert ulp_text != text
    assert_same_text(text, ulp_text, csv_path.name)
    for wrong in (text.replace(",", ";", 1), text.replace("0.0", "0.001", 1), text + "5,1.0\n"):
        with pytest.raises(AssertionError):
            assert_same_text(text, wrong, csv_path.name)

    renate = (SAMPLES / "accuracy_matrix" / "renate_results.json").read_text()
    data = json.loads(renate)
    data["accuracy"][4][0] = _one_ulp_up(data["accuracy"][4][0])
    assert_same_text(renate, json.dumps(data), "renate_results.json")
    data["num_instances"][0] += 1  # an integer: exact
    with pytest.raises(AssertionError):
        assert_same_text(renate, json.dumps(data), "renate_results.json")


@pytest.mark.slow
def test_make_samples_recreates_the_shipped_files(tmp_path):
    """Four small runs (about 20 s): every file the same sample as the shipped one (assert_same_sample: floats
    within TOLERANCE, the rest exactly), except what l2logger stamps with the clock (its folder names and the
    ``timestamp`` column), which is left out."""
    _load_generator().make_samples(tmp_path)
    shipped, made = _tree(SAMPLES), _tree(tmp_path)
    shipped = {k: v for k, v in shipped.items() if not k.endswith((".py", ".md")) and "__pycache__" not in k}
    assert sorted(made) == sorted(shipped)
    for name, path in shipped.items():
        assert_same_sample(path, made[name], name)
