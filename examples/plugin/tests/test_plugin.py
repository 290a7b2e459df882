"""The plugin as owl-eval sees it once installed: found through the entry point, run from the command line into a
real SQLite store, re-scored from its saved record, and refused with one ``error:`` line when the agent or the
config is wrong.

Every expected number is recomputed here from the downloaded record with plain loops written from the
definitions (not the package's own functions).
"""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import numpy as np
import pytest

if not any(e.name == "selective" for e in entry_points(group="owl_eval.protocols")):
    pytest.skip(
        "owl-eval-selective is not installed (no 'selective' entry point in owl_eval.protocols); "
        "run `pip install -e examples/plugin` first",
        allow_module_level=True,
    )

from mlflow.tracking import MlflowClient  # noqa: E402

from owl_eval.errors import ConfigError  # noqa: E402
from owl_eval.evaluation.registry import is_headline, spec_for  # noqa: E402
from owl_eval.metrics.keys import MetricKey  # noqa: E402
from owl_eval.metrics.validation import MetricInputError  # noqa: E402
from owl_eval.protocols import all_protocols  # noqa: E402
from owl_eval.protocols.base import AgentOutputError  # noqa: E402
from owl_eval_selective.driver import check_output, stratified_split  # noqa: E402
from owl_eval_selective.options import SelectiveMetricOptions  # noqa: E402
from owl_eval_selective.record import RECORD_FILE, SelectiveRecord  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures"
HEADLINE = ["aurc", "excess_aurc", "risk_at_80_coverage", "risk_at_90_coverage", "risk_at_95_coverage", "accuracy"]
COVERAGES = {"risk_at_80_coverage": 0.8, "risk_at_90_coverage": 0.9, "risk_at_95_coverage": 0.95}


# ------------------------------------------------------------------------------- plain-loop reference


def loop_metrics(y_true, y_pred, confidence, coverages: dict[str, float]) -> dict[str, float]:
    """AURC (step), E-AURC (exact oracle), selective risk at each coverage and accuracy, one threshold at a time."""
    n = len(y_true)
    wrong = [int(y_pred[i] != y_true[i]) for i in range(n)]
    points = []  # (accepted, errors) for each distinct confidence, highest first; tied samples accepted together
    for t in sorted(set(confidence.tolist()), reverse=True):
        accepted = [i for i in range(n) if confidence[i] >= t]
        points.append((len(accepted), sum(wrong[i] for i in accepted)))
    area, previous = 0.0, 0
    for k, e in points:
        area += (k - previous) / n * (e / k)
        previous = k
    m = sum(wrong)
    oracle = sum(max(0, k - (n - m)) / k for k in range(1, n + 1)) / n  # every correct sample above every error
    out = {"aurc": area, "excess_aurc": area - oracle, "accuracy": 1 - m / n}
    for name, c in coverages.items():
        k, e = next((k, e) for k, e in points if k / n >= c)
        out[name] = e / k
    return out


def test_loop_reference_by_hand():
    # confidences 0.9 (right), 0.8 (wrong), 0.8 (right), 0.1 (wrong): points (1, 0), (3, 1), (4, 2)
    # AURC = 1/4 * 0 + 2/4 * 1/3 + 1/4 * 2/4 = 7/24; oracle = (1/4)(0 + 0 + 1/3 + 2/4) = 5/24
    got = loop_metrics(np.array([0, 1, 2, 3]), np.array([0, 0, 2, 0]), np.array([0.9, 0.8, 0.8, 0.1]), {"r": 0.5})
    assert got == pytest.approx({"aurc": 7 / 24, "excess_aurc": 2 / 24, "accuracy": 0.5, "r": 1 / 3}, rel=1e-15)


# ------------------------------------------------------------------------------- the command line


def _env(extra_path: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "HYDRA_FULL_ERROR")}
    env["MLFLOW_DISABLE_TELEMETRY"] = "true"
    if extra_path is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(extra_path), env.get("PYTHONPATH", "")]))
    return env


try:  # owl-eval's own harness, when these tests run inside its repository: the console script's entry in-process
    from tests.inprocess import run_module
except ImportError:
    run_module = None


class Launched:
    """A command-line run: a new interpreter started in the background (``new_interpreter``, or where owl-eval's
    in-process harness is not importable), else the console script's entry run in this process at once."""

    def __init__(
        self, module: str, args: list[str], cwd: Path, *, extra_path: Path | None = None, new_interpreter=False
    ):
        self.cwd = cwd
        self._done: subprocess.CompletedProcess | None = None
        if run_module is not None and not new_interpreter:
            env = {"MLFLOW_DISABLE_TELEMETRY": "true"}
            if extra_path is not None:
                env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(extra_path), os.environ.get("PYTHONPATH", "")]))
            self._done = run_module(module, args, cwd=cwd, env=env, unset=("MLFLOW_TRACKING_URI", "HYDRA_FULL_ERROR"))
            return
        self.popen = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=cwd,
            env=_env(extra_path),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )

    def result(self) -> subprocess.CompletedProcess:
        if self._done is None:
            try:
                out, err = self.popen.communicate(timeout=600)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                out, err = self.popen.communicate()
            self._done = subprocess.CompletedProcess(self.popen.args, self.popen.returncode, out, err)
        return self._done


def cli(module: str, args: list[str], cwd: Path, *, extra_path: Path | None = None) -> subprocess.CompletedProcess:
    return Launched(module, args, cwd, extra_path=extra_path).result()


def run_args(tmp: Path, *extra: str) -> list[str]:
    return [
        "+experiment=selective_digits",
        f"tracking.store_dir={tmp}",
        f"hydra.run.dir={tmp}/h",
        "progress=false",
        *extra,
    ]


def store(tmp: Path) -> MlflowClient:
    """The SQLite store ``tracking.store_dir=<tmp>`` resolves to (owl_eval.tracking.settings)."""
    return MlflowClient(tracking_uri=f"sqlite:///{tmp.resolve() / 'mlflow.db'}")


def printed_table(stdout: str, protocol: str = "selective") -> dict[str, str]:
    """The ``  name  value`` rows of the end-of-run block."""
    lines = stdout.splitlines()
    start = lines.index(f"{protocol} FINISHED")
    rows = {}
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        name, value = line.split()
        rows[name] = value
    return rows


@pytest.fixture(scope="module")
def launched(tmp_path_factory):
    """The module's command-line runs: the experiment (a new interpreter, started first, as a user runs it), the NaN
    agent and a bad coverage."""
    folders = {name: tmp_path_factory.mktemp(name) for name in ("digits", "nan_agent", "bad_coverage")}
    runs = {
        "digits": Launched("owl_eval", run_args(folders["digits"]), folders["digits"], new_interpreter=True),
        "nan_agent": Launched(
            "owl_eval",
            run_args(
                folders["nan_agent"],
                f"hydra.searchpath=[file://{FIXTURES / 'conf'}]",
                "agent=selective/nan_confidence",
            ),
            folders["nan_agent"],
            extra_path=FIXTURES,
        ),
        "bad_coverage": Launched(
            "owl_eval", run_args(folders["bad_coverage"], "metrics.coverages=[0.8,0.975]"), folders["bad_coverage"]
        ),
    }
    yield runs
    for run in runs.values():
        run.result()  # none left running


@pytest.fixture(scope="module")
def digits_run(launched):
    """The experiment's run, its record downloaded."""
    tmp = launched["digits"].cwd
    proc = launched["digits"].result()
    client = store(tmp)
    experiment = client.get_experiment_by_name("selective_digits")
    runs = client.search_runs([experiment.experiment_id]) if experiment is not None else []
    record_dir = None
    if len(runs) == 1:
        record_dir = Path(client.download_artifacts(runs[0].info.run_id, "record", str(tmp / "download")))
    return {"tmp": tmp, "proc": proc, "client": client, "runs": runs, "record_dir": record_dir}


def test_installed_protocol_is_found_with_its_parts():
    protocols = all_protocols()
    assert "selective" in protocols
    p = protocols["selective"]
    assert p.evaluation_class().name == p.load(p.driver).name == "selective"
    assert p.options_class()().coverages == [0.8, 0.9, 0.95]
    assert (Path(p.config) / "experiment" / "selective_digits.yaml").is_file()
    # every headline name is declared and logged under its plain key; the curve is a detail series
    from owl_eval.tracking.keys import mlflow_key
    from owl_eval_selective.specs import coverage_name

    keys = [MetricKey("aurc"), MetricKey("excess_aurc"), *map(coverage_name, (0.8, 0.9, 0.95)), MetricKey("accuracy")]
    assert keys == HEADLINE
    for key in [*keys, coverage_name(0.99)]:
        assert spec_for("selective", key) is not None and is_headline("selective", key), key
        assert mlflow_key(key, "selective") == key
    assert coverage_name(0.99).fields() == MetricKey("risk_at_{k}_coverage", k=99).fields()
    assert mlflow_key(MetricKey("risk_coverage"), "selective") == "detail/risk_coverage"
    assert spec_for("selective", MetricKey("risk_at_coverage")) is None


def test_run_finishes_prints_the_headline_and_logs_the_loop_values(digits_run):
    proc, client, runs = digits_run["proc"], digits_run["client"], digits_run["runs"]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(runs) == 1
    run = runs[0]
    assert run.info.status == "FINISHED"
    assert run.data.tags["protocol"] == "selective" and run.data.tags["agent"] == "selective/softmax"
    # the printed table: every headline metric, in the descriptor's order, the logged value to 3 digits
    table = printed_table(proc.stdout)
    assert list(table) == HEADLINE
    for name, shown in table.items():
        assert float(shown) == pytest.approx(float(f"{run.data.metrics[name]:.3g}"), rel=1e-12, abs=1e-15), name
    # the logged values are the definitions applied to the saved record
    with np.load(digits_run["record_dir"] / RECORD_FILE, allow_pickle=False) as saved:
        y_true, y_pred, confidence = saved["y_true"], saved["y_pred"], saved["confidence"]
        assert saved["class_names"].tolist() == [str(d) for d in range(10)]
    assert y_true.shape == y_pred.shape == confidence.shape == (539,)  # 30 % of each digit class
    expected = loop_metrics(y_true, y_pred, confidence, COVERAGES)
    for name in HEADLINE:
        assert run.data.metrics[name] == pytest.approx(expected[name], rel=1e-12, abs=1e-15), name
    assert run.data.metrics["detail/num_test"] == 539
    assert 0.9 < run.data.metrics["accuracy"] < 1.0 and run.data.metrics["excess_aurc"] > 0
    # the curve: one point per distinct confidence, step = accepted samples, the last at full coverage
    history = sorted(client.get_metric_history(run.info.run_id, "detail/risk_coverage"), key=lambda m: m.step)
    assert len(history) == len(set(confidence.tolist()))
    assert history[-1].step == 539 and history[-1].value == pytest.approx(1 - expected["accuracy"], rel=1e-12)
    artifacts = [a.path for a in client.list_artifacts(run.info.run_id, "plots")]
    assert artifacts == ["plots/risk_coverage.png"]
    png = Path(client.download_artifacts(run.info.run_id, "plots/risk_coverage.png", str(digits_run["tmp"] / "png")))
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_saved_record_rescores_to_the_same_numbers_and_other_coverages(digits_run):
    assert digits_run["record_dir"] is not None, digits_run["proc"].stderr[-3000:]
    tmp = digits_run["tmp"] / "evaluate"
    tmp.mkdir()
    proc = cli(
        "owl_eval.runner.cli.evaluate",
        [
            "+source=record",
            f"source.path={digits_run['record_dir']}",
            "+metrics.coverages=[0.5,0.9,1.0]",
            f"tracking.store_dir={tmp}",
            f"hydra.run.dir={tmp}/h",
            "figures=false",
        ],
        tmp,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = store(tmp)
    (run,) = client.search_runs([client.get_experiment_by_name("evaluate").experiment_id])
    assert run.info.status == "FINISHED" and run.data.tags["record_kind"] == "selective"
    live = digits_run["runs"][0].data.metrics
    for name in ("aurc", "excess_aurc", "accuracy", "risk_at_90_coverage"):
        assert run.data.metrics[name] == live[name], name
    with np.load(digits_run["record_dir"] / RECORD_FILE, allow_pickle=False) as saved:
        coverages = {"risk_at_50_coverage": 0.5, "risk_at_100_coverage": 1.0}
        expected = loop_metrics(saved["y_true"], saved["y_pred"], saved["confidence"], coverages)
    for name in coverages:
        assert run.data.metrics[name] == pytest.approx(expected[name], rel=1e-12, abs=1e-15), name
    assert "risk_at_80_coverage" not in run.data.metrics
    assert list(printed_table(proc.stdout)) == [
        "aurc",
        "excess_aurc",
        "risk_at_50_coverage",
        "risk_at_90_coverage",
        "risk_at_100_coverage",
        "accuracy",
    ]


def test_nan_confidence_is_one_error_line_and_no_finished_run(launched):
    proc, tmp = launched["nan_agent"].result(), launched["nan_agent"].cwd
    assert proc.returncode == 1, proc.stdout[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    line = errors[0]
    assert line.startswith("error: agent output of predict(features) on the 539 test samples: confidence")
    assert "shape (539,)" in line and "2 non-finite value(s) (first: nan at index 3)" in line
    client = store(tmp)
    (run,) = client.search_runs([client.get_experiment_by_name("selective_digits").experiment_id])
    assert run.info.status == "FAILED"
    assert "confidence must be finite floats" in run.data.tags["error"]
    assert "aurc" not in run.data.metrics


def test_config_error_is_one_line_before_any_run(launched):
    proc, tmp = launched["bad_coverage"].result(), launched["bad_coverage"].cwd
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors == [proc.stderr.strip().splitlines()[-1]]
    assert errors[0].startswith("error: metrics.coverages[1]: expected a whole percentage in (0, 1]")
    assert errors[0].endswith("got 0.975")
    experiment = store(tmp).get_experiment_by_name("selective_digits")
    assert experiment is None or not store(tmp).search_runs([experiment.experiment_id])


# ------------------------------------------------------------------------------- the parts, in process


def test_split_is_stratified_disjoint_and_seeded():
    labels = np.repeat(np.arange(4), [10, 7, 2, 1])
    split = stratified_split(labels, 4, 0.3, np.random.default_rng(5))
    again = stratified_split(labels, 4, 0.3, np.random.default_rng(5))
    assert np.array_equal(split.test_rows, again.test_rows)
    assert not set(split.test_rows.tolist()) & set(split.train_rows.tolist())
    assert sorted(split.test_rows.tolist() + split.train_rows.tolist()) == list(range(len(labels)))
    # round(0.3 n_c), at least one on each side for a class of two or more; a class of one trains
    assert np.bincount(labels[split.test_rows], minlength=4).tolist() == [3, 2, 1, 0]
    other = stratified_split(labels, 4, 0.3, np.random.default_rng(6))
    assert not np.array_equal(split.test_rows, other.test_rows)


KNOWN = np.array([0, 1, 2])


@pytest.mark.parametrize(
    ("out", "message"),
    [
        (np.zeros(4), "expected a pair (predictions, confidence), got a ndarray"),
        ((np.zeros(4),), "expected a pair (predictions, confidence), got a tuple of 1 items"),
        ((np.zeros((4, 1)), np.ones(4)), "predictions has shape (4, 1), expected (4,)"),
        ((np.zeros(4), np.ones(3)), "confidence has shape (3,), expected (4,)"),
        ((np.array(["a"] * 4), np.ones(4)), "predictions has dtype <U1, expected class labels"),
        ((np.array([0, 1, 3, 1]), np.ones(4)), "class labels seen in training ([0, 1, 2]), got 3 at index 2"),
        ((np.array([0, 1, 1.5, 1]), np.ones(4)), "got 1.5 at index 2"),
        ((np.zeros(4), np.array([0.5, np.inf, 0.2, 0.1])), "1 non-finite value(s) (first: inf at index 1)"),
        ((np.zeros(4), np.array([True] * 4)), "confidence has dtype bool, expected finite floats"),
    ],
)
def test_bad_agent_output_is_one_agent_output_error(out, message):
    with pytest.raises(AgentOutputError) as info:
        check_output(out, 4, KNOWN)
    assert str(info.value).startswith("agent output of predict(features) on the 4 test samples: ")
    assert message in str(info.value)


def test_good_agent_output_is_typed():
    predictions, confidence = check_output(([2, 0, 1, 0], np.array([1, 2, 3, 4], np.int32)), 4, KNOWN)
    assert predictions.dtype == np.int64 and confidence.dtype == np.float64
    assert predictions.tolist() == [2, 0, 1, 0] and confidence.tolist() == [1.0, 2.0, 3.0, 4.0]


def test_record_round_trip_and_damaged_records(tmp_path):
    record = SelectiveRecord(np.array([0, 1, 1]), np.array([0, 0, 1]), np.array([0.9, 0.2, 0.6]), ("a", "b"), "toy")
    path = record.save(tmp_path)
    back = SelectiveRecord.load(tmp_path)
    assert back.y_true.tolist() == [0, 1, 1] and back.y_pred.tolist() == [0, 0, 1]
    assert back.confidence.tolist() == [0.9, 0.2, 0.6] and back.class_names == ("a", "b") and back.domain == "toy"
    bad = SelectiveRecord(np.array([0, 1, 2]), np.array([0, 0, 1]), np.array([0.9, np.nan, 0.6]), ("a", "b"))
    bad.save(tmp_path / "bad")
    with pytest.raises(MetricInputError, match=r"array 'y_true' \[2\] is 2, expected a class label in 0..1"):
        SelectiveRecord.load(tmp_path / "bad")
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(MetricInputError, match="selective_record.npz"):
        SelectiveRecord.load(path)


def test_metric_options_are_checked():
    assert SelectiveMetricOptions.parse({"coverages": [0.5, 1]}).coverages == [0.5, 1.0]
    for settings, message in [
        ({"coverages": [0.0]}, "metrics.coverages[0]: expected a number > 0"),
        ({"coverages": [1.2]}, "metrics.coverages[0]: expected a number <= 1"),
        ({"coverages": []}, "metrics.coverages: expected at least one coverage"),
        ({"coverages": [0.9, 0.90]}, "metrics.coverages: 0.9 is listed twice"),
        ({"coverages": 0.9}, "metrics.coverages: expected a list"),
        ({"ties": "random"}, "metrics.ties: expected one of ['group', 'order']"),
        ({"names": ["aurc", "top1"]}, "metrics.names: unknown metric(s) ['top1']"),
        ({"names": ["risk_at_99_coverage"]}, "metrics.names: risk_at_99_coverage is not reported"),
        ({"coverage": [0.9]}, "metrics.coverage: unknown key (did you mean metrics.coverages?)"),
    ]:
        with pytest.raises(ConfigError) as info:
            SelectiveMetricOptions.parse(settings)
        assert str(info.value).startswith(message), str(info.value)
