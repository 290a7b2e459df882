"""What a user sees at the end of a run and what lands in MLflow: the CLI (in-process, through the function the
console scripts call) against a real SQLite store, the printed table and command checked against what MlflowClient
reads back."""

from __future__ import annotations

import json
import math
import re
import shlex
import subprocess
from pathlib import Path

import numpy as np
import pytest
from mlflow.tracking import MlflowClient

from owl_eval.evaluation import registry
from owl_eval.metrics.keys import MetricKey
from owl_eval.metrics.results import MetricResults, Series
from owl_eval.protocols import get_protocol
from owl_eval.tracking.key_index import download_index
from tests.fixtures.searchpath import TEST_AGENTS

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _cli(module: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    """``python -m <module> <args>``, in the test process through the function the console scripts call
    (tests/inprocess.py; ``OWL_EVAL_TEST_SUBPROCESS=1``: a real subprocess)."""
    from tests.inprocess import run_module

    return run_module(
        module,
        [*args, f"hydra.run.dir={cwd}/hydra"],
        cwd=cwd,
        env={"PYTHONPATH": str(PROJECT_ROOT), "MLFLOW_DISABLE_TELEMETRY": "true"},
        unset=("MLFLOW_TRACKING_URI", "HYDRA_FULL_ERROR"),
        timeout=300,
    )


def _rounded(value: float) -> float:
    return float(f"{value:.3g}")


def _printed_table(stdout: str) -> dict[str, str]:
    """``  name  value`` lines of the summary block."""
    rows = {}
    for line in stdout.splitlines():
        if line.startswith("  ") and not line.startswith("   "):
            name, _, value = line.strip().partition("  ")
            rows[name] = value.strip()
    return rows


def _only_run(client, name):
    exp = client.get_experiment_by_name(name)
    (run,) = client.search_runs([exp.experiment_id])
    return run


# the system condition's run: test_ond_end_to_end.py
@pytest.mark.parametrize("condition", [pytest.param("system", marks=pytest.mark.slow), "given"])
def test_cli_prints_headline_table_and_the_command_that_opens_the_run(condition, experiment, client, tmp_path):
    proc = _cli(
        "owl_eval",
        [f"+experiment=ond_{condition}_detection", *experiment["overrides"], "protocol.num_trials=6", "figures=false"],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = _only_run(client, experiment["name"])
    lines = proc.stdout.strip().splitlines()
    block = lines[lines.index("ond FINISHED") :]
    assert len(block) <= 15
    # every printed value is the logged value to 3 significant digits; every logged headline metric is printed
    table = _printed_table(proc.stdout)
    index = download_index(client, run.info.run_id)
    logged = {k: v for k, v in run.data.metrics.items() if index[k].headline_rank is not None}
    assert set(table) == set(logged) and len(table) >= 5
    assert logged == {k: v for k, v in run.data.metrics.items() if k in get_protocol("ond").headline}
    for name, shown in table.items():
        assert float(shown) == pytest.approx(_rounded(logged[name]), rel=1e-12), name
    order = [get_protocol("ond").headline.index(name) for name in table]
    assert order == sorted(order)
    if condition == "given":  # detection is not measured when the red light is given: neither logged nor shown
        assert not {"m1_mean_fn_cdt", "m2_cdt_pct", "m21_fp_pct"} & set(table) and "m4_nrp_top1" in table
    else:
        assert {"m1_mean_fn_cdt", "m2_cdt_pct", "m21_fp_pct", "m3_nrp_top1"} <= set(table)
    assert f"run: {experiment['name']}/{run.info.run_name} ({run.info.run_id})" in lines
    command = shlex.split(lines[-1])
    assert command[:3] == ["mlflow", "ui", "--backend-store-uri"]
    assert MlflowClient(command[3]).get_run(run.info.run_id).info.status == "FINISHED"


def test_logged_keys_resolve_and_thresholds_are_tables_not_steps(experiment, client, tmp_path, monkeypatch):
    from owl_eval.runner.api import run

    monkeypatch.setenv("MLFLOW_TRACKING_URI", experiment["uri"])  # MlflowClient.load_table searches the global store

    run(
        ["+experiment=ond_system_detection", *experiment["overrides"], "protocol.num_trials=6", "figures=false"],
        output_dir=tmp_path,
    )
    r = _only_run(client, experiment["name"])
    keys = set(r.data.metrics)
    index = download_index(client, r.info.run_id)
    assert keys <= set(index) and all(index[k].declared for k in index)
    for key in keys:
        plain = not key.startswith(("detail/", "baseline/", "time/"))
        assert plain == (index[key].headline_rank is not None) == registry.is_headline("ond", index[key].key), key
        series = {"detail/top1_batch", "detail/top3_batch", "baseline/top1_batch", "baseline/top3_batch"}
        assert index[key].series == (key in series), key
        assert not re.search(r"_at_0\.\d", key) and "vs_threshold" not in key, key
        steps = {m.step for m in client.get_metric_history(r.info.run_id, key)}
        # only the per-batch accuracies are series; a threshold is never a step
        assert steps == {0} or key in {
            "detail/top1_batch",
            "detail/top3_batch",
            "baseline/top1_batch",
            "baseline/top3_batch",
        }, key
    assert len(keys) < 70  # 145+ before: headline plain, the rest detail/ and baseline/, no threshold points
    # a threshold sweep is one logged table, its values equal to the ones at the run's threshold (0.5)
    table = client.load_table(r.info.experiment_id, "threshold/m2_cdt_pct.json", run_ids=[r.info.run_id])
    assert list(table["threshold"]) == sorted(table["threshold"]) and 0.5 in list(table["threshold"])
    at_half = table[table["threshold"] == 0.5]["value"].iloc[0]
    assert at_half == pytest.approx(r.data.metrics["m2_cdt_pct"], abs=1e-12)
    assert index["threshold/m2_cdt_pct"].key.fields() == MetricKey("m2_cdt_pct", axis="threshold").fields()
    assert index["threshold/m2_cdt_pct"].series and index["threshold/m2_cdt_pct"].direction == "maximize"
    # values fixed by construction (ndp precision/recall/F1 before the red light) are not logged, even as N/A tags
    assert not [t for t in r.data.tags if "unknown_score_precision_pre" in t]
    na = json.loads(Path(client.download_artifacts(r.info.run_id, "metrics_na.json", str(tmp_path))).read_text())
    assert "by construction" in na["unknown_score_precision_pre"]


def test_failed_run_prints_what_it_logged_and_its_status(experiment, client, tmp_path):
    proc = _cli(
        "owl_eval",
        [
            "+experiment=ond_system_detection",
            *experiment["overrides"],
            "agent=ond/crashing",
            TEST_AGENTS,
            "agent.crash_at_trial=3",
            "protocol.num_trials=6",
            "figures=false",
        ],
        tmp_path,
    )
    assert proc.returncode == 1 and proc.stderr.strip().splitlines()[-1].startswith("error:")
    run = _only_run(client, experiment["name"])
    assert run.info.status == "FAILED"
    assert any(line.startswith("ond FAILED: ") and "deliberate crash" in line for line in proc.stdout.splitlines())
    table = _printed_table(proc.stdout)
    assert float(table["top1"]) == pytest.approx(_rounded(run.data.metrics["top1"]), rel=1e-12)
    assert "Traceback" not in proc.stdout + proc.stderr


def test_python_api_prints_nothing(experiment, tmp_path, capsys):
    from owl_eval.runner.api import run

    run(
        ["+experiment=ond_given_detection", *experiment["overrides"], "protocol.num_trials=3", "figures=false"],
        output_dir=tmp_path,
    )
    assert "mlflow ui" not in capsys.readouterr().out


# -- keys and names, without a run -----------------------------------------------------------------------
def test_each_kind_of_key_has_an_index_entry_with_its_declaration():
    from owl_eval.tracking.key_index import LoggedKey, index_json, read_index
    from owl_eval.tracking.keys import logged_key_entry, mlflow_key

    cases = [  # (protocol, key, MLflow key, headline rank, series)
        ("ond", MetricKey("top1"), "top1", 0, False),
        ("ond", MetricKey("oscr"), "oscr", 10, False),
        ("ond", MetricKey("top1_pre"), "detail/top1_pre", None, False),
        ("ond", MetricKey("top1", agent="baseline"), "baseline/top1", None, False),
        ("ond", MetricKey("top1", axis="batch"), "detail/top1_batch", None, True),
        ("ond", MetricKey("total_s", timing=True), "time/total_s", None, False),
        ("trajectory", MetricKey("min_ade_{k}_marginal", k=20), "min_ade_20_marginal", 2, False),
        ("continual", MetricKey("accuracy", task=3), "detail/task/3/accuracy", None, True),
        ("lifelong_rl", MetricKey("saturation", task="a"), "detail/task/a/saturation", None, False),
    ]
    entries: dict[str, LoggedKey] = {}
    for protocol, key, logged, rank, series in cases:
        entry = logged_key_entry(key, protocol, series=key.axis is not None)
        spec = registry.spec_for(protocol, key)
        assert mlflow_key(key, protocol) == logged
        assert (entry.declared, entry.direction, entry.bounds) == (True, spec.direction, spec.bounds), key
        assert (entry.headline_rank, entry.series) == (rank, series), key
        entries[logged] = entry
    again = read_index(json.loads(json.dumps(index_json("ond", entries))))
    assert again == entries and all(again[k].key.fields() == e.key.fields() for k, e in entries.items())
    undeclared = logged_key_entry(MetricKey("nonsense"), "ond", series=False)
    assert (undeclared.declared, undeclared.direction, undeclared.headline_rank) == (False, "none", None)


@pytest.mark.parametrize("protocol", ["continual", "lifelong_rl", "ond", "trajectory"])
def test_headline_is_five_to_ten_declared_metrics(protocol):
    names = get_protocol(protocol).headline
    assert 5 <= len(names) <= 11  # OND lists m3 and m4; a run reports one of them
    for name in names:
        key = MetricKey(name, k=20) if "{k}" in name else MetricKey(name)
        assert registry.spec_for(protocol, key) is not None and registry.headline_rank(protocol, key) is not None, name


def test_threshold_points_and_series_become_one_table(mlflow_store, tmp_path, monkeypatch):
    from owl_eval.tracking.runs import TrackedRun

    monkeypatch.setenv("MLFLOW_TRACKING_URI", mlflow_store["uri"])  # MlflowClient.load_table searches the global store
    client = MlflowClient(mlflow_store["uri"])
    exp = client.create_experiment(f"tables-{tmp_path.name}")
    run = TrackedRun(client, client.create_run(exp).info.run_id, protocol="ond")
    results = MetricResults()
    results.set(MetricKey("m2_cdt_pct", threshold=0.3), 40.0)
    results.set(MetricKey("m2_cdt_pct", threshold=0.5), 20.0)
    results.na[MetricKey("m1_mean_fn_cdt", threshold=0.5)] = "no trial is correctly detected"
    series = Series(np.array([300, 500, 900]), np.array([40.0, 20.0, np.nan]))
    results.series[MetricKey("m2_cdt_pct", axis="threshold")] = series
    results.set("top1", 0.5)
    run.log_results(results)
    got = client.get_run(run.run_id).data
    assert set(got.metrics) == {"top1"} and not [t for t in got.tags if t.startswith("na.")]
    table = client.load_table(exp, "threshold/m2_cdt_pct.json", run_ids=[run.run_id])
    assert list(table["threshold"]) == pytest.approx([0.3, 0.5, 0.9], abs=1e-15)  # pandas parses floats loosely
    assert list(table["value"][:2]) == [40.0, 20.0] and (table["value"][2] is None or math.isnan(table["value"][2]))
    m1 = client.load_table(exp, "threshold/m1_mean_fn_cdt.json", run_ids=[run.run_id])
    assert list(m1["na_reason"]) == ["no trial is correctly detected"]


def test_run_name_carries_the_swept_values():
    from owl_eval.runner.job.naming import job_run_name

    overrides = [
        "domain=handwriting",
        "protocol.condition=system",
        "agent=ond/knn_novelty",
        "seed=1",
        "tracking.store_dir=/tmp/x",
    ]
    name = job_run_name(
        agent="ond/knn_novelty",
        seed=1,
        condition="system",
        job_num=3,
        task_overrides=overrides,
        swept=["agent", "domain", "protocol.condition"],
    )
    assert name == "3-handwriting-system-knn_novelty-seed1"
    assert job_run_name(agent="ond/knn_novelty", seed=0, condition="given") == "given-knn_novelty-seed0"
    odd = job_run_name(agent="a", seed=0, job_num=0, task_overrides=["source.path=/x y/'z"], swept=["source.path"])
    assert odd == "0-_z-a-seed0"


def test_open_command_for_each_kind_of_store():
    from owl_eval.runner.cli.summary import open_command

    assert (
        open_command("sqlite:////tmp/a b/mlflow.db") == "mlflow ui --backend-store-uri 'sqlite:////tmp/a b/mlflow.db'"
    )
    assert open_command("http://host:5000/", "1", "abc") == "open http://host:5000/#/experiments/1/runs/abc"


def test_evaluate_cli_prints_the_summary_of_the_run_it_logged(experiment, client, tmp_path):
    fixture = PROJECT_ROOT / "tests" / "fixtures" / "sailon_client"
    proc = _cli(
        "owl_eval.runner.cli.evaluate",
        [
            "+source=sailon",
            f"source.path={fixture / 'data'}",
            f"source.results_path={fixture / 'mock_results'}",
            *experiment["overrides"],
        ],
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = _only_run(client, experiment["name"])
    table = _printed_table(proc.stdout)
    assert "m21_fp_pct" in table
    for name, shown in table.items():
        if not shown.startswith("N/A"):
            assert float(shown) == pytest.approx(_rounded(run.data.metrics[name]), rel=1e-12), name
    assert f"({run.info.run_id})" in proc.stdout.splitlines()[-2]
    assert MlflowClient(shlex.split(proc.stdout.splitlines()[-1])[3]).get_run(run.info.run_id)


def _stub_client(protocol: str, metrics: dict, tags: dict, tmp_path: Path):
    """A client of one run whose metric_keys.json is what tracking writes for ``metrics`` and the N/A ``tags``."""
    from types import SimpleNamespace as NS

    from owl_eval.tracking.key_index import index_json
    from owl_eval.tracking.keys import logged_key_entry

    run = NS(
        info=NS(experiment_id="7", status="FINISHED", run_name="q-seed0"),
        data=NS(metrics=metrics, tags={"protocol": protocol, **tags}),
    )
    names = [*metrics, *(t[len("na.") :] for t in tags)]
    index = index_json(protocol, {n: logged_key_entry(MetricKey(n), protocol, series=False) for n in names})
    (tmp_path / "metric_keys.json").write_text(json.dumps(index))

    def download_artifacts(run_id, path, dst):
        return str(tmp_path / path)

    return NS(
        get_run=lambda run_id: run, get_experiment=lambda eid: NS(name="rl"), download_artifacts=download_artifacts
    )


@pytest.mark.parametrize("columns", [60, 100, 160])
def test_a_long_na_reason_is_wrapped_whole_under_the_value_column(columns, tmp_path):
    from owl_eval.runner.cli.summary import run_summary

    reason = (
        "task cartpole_long_pole is trained in fewer than 3 blocks: performance recovery needs at least 2 "
        "recovery times (3 training blocks of the task), got 1; see /very/long/path/to/the/record/of/this/"
        "run/l2log/worker-default/12-train/data-log.tsv"
    )
    text = run_summary(
        _stub_client("lifelong_rl", {"ste_rel_perf": 1.8549}, {"na.perf_recovery": reason}, tmp_path),
        "abc",
        "sqlite:////s/mlflow.db",
        columns=columns,
    )
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("  perf_recovery "))
    value_at = lines[first].index("N/A (")
    cont = []
    for line in lines[first + 1 :]:
        if not line.startswith(" " * value_at) or line[value_at] == " ":
            break
        cont.append(line[value_at:])
    shown = " ".join([lines[first][value_at:], *cont])
    assert shown == f"N/A ({reason})"  # nothing cut, nothing added
    longest_word = max(len(w) for w in shown.split())
    assert all(len(line) <= max(columns, value_at + longest_word) for line in lines[first : first + 1 + len(cont)])
    assert (len(cont) > 0) == (len(f"N/A ({reason})") > columns - value_at)
    assert "\n  ste_rel_perf   1.85\n" in text  # the next row keeps its own line (3 significant digits)
    assert _printed_table(text)["perf_recovery"] == lines[first][value_at:]  # continuation lines are not rows
