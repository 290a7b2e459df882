"""Tracking details that every protocol relies on, against a real SQLite store."""

from __future__ import annotations

import json

import numpy as np
import pytest

from owl_eval.metrics.keys import MetricKey
from owl_eval.metrics.results import MetricResults, Series
from owl_eval.tracking.keys import metric_key, mlflow_key
from owl_eval.tracking.runs import TrackedRun, flatten
from owl_eval.tracking.settings import TrackingSettings


def test_long_series_are_binned_and_kept_whole_in_a_csv(experiment, client, tmp_path):
    settings = TrackingSettings(
        uri=experiment["uri"],
        experiment_name=experiment["name"],
        artifact_location=experiment["artifacts"],
        max_series_points=100,
    )
    steps = np.arange(5, 10_005)
    values = np.sin(steps / 50.0)
    values[17] = np.nan
    with TrackedRun.start(settings, run_name="binning") as run:
        run.log_results(
            MetricResults(
                values={"final": 1.0}, series={"reward": Series(steps, values), "short": Series([0, 1], [2.0, 3.0])}
            )
        )
    history = sorted(client.get_metric_history(run.run_id, "reward"), key=lambda m: m.step)
    assert len(history) == 100
    # Plain loop: 10,000 points in 100 bins of exactly 100, NaN left out of its bin's mean.
    for b, point in enumerate(history):
        chunk = [v for v in values[b * 100 : (b + 1) * 100] if v == v]
        assert point.step == steps[b * 100]
        assert point.value == pytest.approx(sum(chunk) / len(chunk), abs=1e-12)
    assert [m.value for m in sorted(client.get_metric_history(run.run_id, "short"), key=lambda m: m.step)] == [2.0, 3.0]
    local = client.download_artifacts(run.run_id, "series/reward.csv", str(tmp_path))
    table = np.genfromtxt(local, delimiter=",", skip_header=1)
    np.testing.assert_array_equal(table[:, 0], steps)
    np.testing.assert_array_equal(np.isnan(table[:, 1]), np.isnan(values))
    assert "downsampled.reward" in client.get_run(run.run_id).data.tags


def test_scalar_and_series_of_one_name_do_not_collide(experiment, client):
    settings = TrackingSettings(
        uri=experiment["uri"], experiment_name=experiment["name"], artifact_location=experiment["artifacts"]
    )
    with TrackedRun.start(settings, run_name="collide") as run:
        run.log_results(MetricResults(values={"acc": 0.5}, series={"acc": Series([0, 1, 2], [0.9, 0.7, 0.5])}))
    assert [m.value for m in client.get_metric_history(run.run_id, "acc")] == [0.5]
    assert sorted(m.value for m in client.get_metric_history(run.run_id, "acc_by_step")) == [0.5, 0.7, 0.9]


def test_na_values_are_tags_with_reasons(experiment, client):
    settings = TrackingSettings(
        uri=experiment["uri"], experiment_name=experiment["name"], artifact_location=experiment["artifacts"]
    )
    with TrackedRun.start(settings, run_name="na") as run:
        results = MetricResults()
        results.set("m1", float("nan"))
        results.set(MetricKey("m2", threshold=0.3), 4.0)
        run.log_results(results)
    data = client.get_run(run.run_id).data
    assert "m1" not in data.metrics and "undefined" in data.tags["na.m1"]
    # a value at a threshold is a row of the threshold table, not a metric key
    assert "m2_at_0.3" not in data.metrics
    with open(client.download_artifacts(run.run_id, "threshold/m2.json")) as f:
        assert json.load(f)["data"] == [[0.3, 4.0, ""]]


# (protocol, key, the MLflow key written by hand): stored runs and resumed sweeps depend on every one of these
MLFLOW_KEYS = [
    ("ond", MetricKey("top1"), "top1"),
    ("ond", MetricKey("m2_cdt_pct"), "m2_cdt_pct"),
    ("ond", MetricKey("top1_pre"), "detail/top1_pre"),
    ("ond", MetricKey("fpr_at_95tpr"), "detail/fpr_at_95tpr"),
    ("ond", MetricKey("m5_opti_top1_n_excluded"), "detail/m5_opti_top1_n_excluded"),
    ("ond", MetricKey("top1", agent="baseline"), "baseline/top1"),
    ("ond", MetricKey("fpr_at_95tpr", agent="baseline"), "baseline/fpr_at_95tpr"),
    ("ond", MetricKey("top1", axis="batch"), "detail/top1_batch"),
    ("ond", MetricKey("top1", agent="baseline", axis="batch"), "baseline/top1_batch"),
    ("ond", MetricKey("m2_cdt_pct", threshold=0.3), "threshold/m2_cdt_pct"),
    ("ond", MetricKey("m2_cdt_pct", axis="threshold"), "threshold/m2_cdt_pct"),
    (
        "ond",
        MetricKey("unknown_score_f1_post", agent="baseline", threshold=0.5),
        "threshold/baseline/unknown_score_f1_post",
    ),
    ("ond", MetricKey("m21_fp_pct", agent="baseline", axis="threshold"), "threshold/baseline/m21_fp_pct"),
    ("ond", MetricKey("total_s", timing=True), "time/total_s"),
    ("continual", MetricKey("forgetting"), "forgetting"),
    ("continual", MetricKey("forgetting_avalanche"), "detail/forgetting_avalanche"),
    ("continual", MetricKey("forgetting", axis="task"), "detail/by_task/forgetting"),
    ("continual", MetricKey("accuracy", task=3), "detail/task/3/accuracy"),
    ("continual", MetricKey("tasks_completed"), "detail/tasks_completed"),
    ("lifelong_rl", MetricKey("perf_recovery"), "perf_recovery"),
    ("lifelong_rl", MetricKey("saturation", task="cartpole_default"), "detail/task/cartpole_default/saturation"),
    ("lifelong_rl", MetricKey("saturation", task="frozen lake@v1"), "detail/task/frozen lake_at_v1/saturation"),
    ("lifelong_rl", MetricKey("ste/reused"), "detail/ste/reused"),
    ("lifelong_rl", MetricKey("syllabus_s", timing=True), "time/syllabus_s"),
    ("lifelong_rl", MetricKey("reward"), "detail/reward"),
    ("trajectory", MetricKey("min_ade_{k}_marginal", k=20), "min_ade_20_marginal"),
    ("trajectory", MetricKey("min_ade_{k}_marginal", k=7), "min_ade_7_marginal"),  # any K of a headline template
    ("trajectory", MetricKey("min_ade_{k}_joint", k=20), "detail/min_ade_20_joint"),
    ("trajectory", MetricKey("displacement_by_step_marginal"), "detail/displacement_by_step_marginal"),
    ("trajectory", MetricKey("num_scenes"), "detail/num_scenes"),
    # no protocol (or one not installed): the reported name, in MLflow's characters
    (None, MetricKey("top1", agent="baseline"), "baseline.top1"),
    (None, MetricKey("acc"), "acc"),
    (None, MetricKey("m2", threshold=0.3), "threshold/m2"),
    ("no_such_protocol", MetricKey("saturation", task="a@b"), "task/a_at_b/saturation"),
]


@pytest.mark.parametrize("protocol, key, expected", MLFLOW_KEYS, ids=[e for _, _, e in MLFLOW_KEYS])
def test_mlflow_key_of_every_form(protocol, key, expected):
    assert mlflow_key(key, protocol) == expected


def test_a_series_beside_its_scalar_is_logged_by_step():
    assert mlflow_key(MetricKey("top1"), "ond", beside_scalar=True) == "detail/top1_by_step"
    assert mlflow_key(MetricKey("forgetting"), "continual", beside_scalar=True) == "detail/forgetting_by_step"
    assert mlflow_key(MetricKey("x", agent="baseline"), "ond", beside_scalar=True) == "baseline/x_by_step"
    assert mlflow_key(MetricKey("acc"), None, beside_scalar=True) == "acc_by_step"


def test_metric_keys_and_flattening():
    assert metric_key("m2_cdt_pct@0.175") == "m2_cdt_pct_at_0.175"
    assert metric_key("task/cartpole_default/saturation") == "task/cartpole_default/saturation"
    assert flatten({"a": {"b": 1, "c": [1, 2]}, "d": None}) == {"a.b": "1", "a.c": "[1, 2]", "d": "null"}
    assert flatten({"long": "x" * 20_000}) == {"long": "x" * 20_000}  # kept whole: log_params deals with the limit


def test_failed_run_keeps_what_was_logged(experiment, client):
    settings = TrackingSettings(
        uri=experiment["uri"], experiment_name=experiment["name"], artifact_location=experiment["artifacts"]
    )
    with pytest.raises(RuntimeError):
        with TrackedRun.start(settings, run_name="fails") as run:
            run.log_metrics({"partial": 3.0})
            raise RuntimeError("agent exploded")
    r = client.get_run(run.run_id)
    assert r.info.status == "FAILED" and r.data.metrics["partial"] == 3.0
    assert "agent exploded" in r.data.tags["error"]


def _settings(experiment, **extra) -> TrackingSettings:
    return TrackingSettings(
        uri=experiment["uri"], experiment_name=experiment["name"], artifact_location=experiment["artifacts"], **extra
    )


def test_ctrl_c_ends_a_run_killed_and_other_errors_failed(experiment, client, tmp_path):
    with pytest.raises(KeyboardInterrupt):
        with TrackedRun.start(_settings(experiment), run_name="interrupted") as run:
            run.log_metrics({"done_so_far": 2.0})
            raise KeyboardInterrupt
    r = client.get_run(run.run_id)
    assert r.info.status == "KILLED" and r.data.metrics == {"done_so_far": 2.0}
    assert r.data.tags["error"] == "interrupted (KeyboardInterrupt)"
    with open(client.download_artifacts(run.run_id, "error.txt", str(tmp_path))) as handle:
        text = handle.read()
    assert "KeyboardInterrupt" in text and "Traceback" in text
    with pytest.raises(ValueError):
        with TrackedRun.start(_settings(experiment), run_name="bad value") as other:
            raise ValueError("agent.k_class: -1")
    assert client.get_run(other.run_id).info.status == "FAILED"


def test_new_runs_name_their_owner_process(experiment, client):
    import os
    import socket

    with TrackedRun.start(_settings(experiment), run_name="owned") as run:
        pass
    tags = client.get_run(run.run_id).data.tags
    # Field 22 of /proc/self/stat, counted after the parenthesised command name.
    with open("/proc/self/stat") as handle:
        start = handle.read().rsplit(")", 1)[1].split()[19]
    assert (tags["owl_eval.pid"], tags["owl_eval.host"], tags["owl_eval.pid_start"]) == (
        str(os.getpid()),
        socket.gethostname(),
        start,
    )


@pytest.fixture()
def a_file(tmp_path):
    path = tmp_path / "not_a_dir"
    path.write_text("x")
    return path


@pytest.mark.parametrize(
    "field, value, expected",
    [
        ("store_dir", "{file}", "tracking.store_dir: {file} is a file, expected a directory"),
        ("store_dir", "{file}/sub", "tracking.store_dir: {file}/sub cannot be created: {file} is a file"),
        ("experiment_name", "", "tracking.experiment_name: '' is not a usable MLflow experiment name"),
        ("experiment_name", "   ", "tracking.experiment_name: '   ' is not a usable"),
        ("max_series_points", 2.5, "tracking.max_series_points: 2.5 is not a positive integer or null"),
        ("max_series_points", "abc", "tracking.max_series_points: 'abc' is not a positive integer or null"),
        ("max_series_points", 0, "tracking.max_series_points: 0 is not a positive integer or null"),
        ("max_series_points", True, "tracking.max_series_points: True is not a positive integer or null"),
        ("skip_finished", "maybe", "tracking.skip_finished: 'maybe' is not true, false or null"),
        ("log_record", "yes", "tracking.log_record: 'yes' is not true or false"),
        ("uri", "nonsense", "tracking.uri: 'nonsense' is not a tracking URI MLflow accepts"),
        ("uri", "/abs/mlruns", "tracking.uri: '/abs/mlruns' is not a tracking URI MLflow accepts"),
        (
            "uri",
            "sqlite:///{tmp}/missing/mlflow.db",
            "tracking.uri: the directory {tmp}/missing of the SQLite database does not exist",
        ),
    ],
)
def test_bad_tracking_settings_are_one_config_error_naming_the_key(field, value, expected, a_file, tmp_path):
    from owl_eval.errors import ConfigError

    fill = lambda v: v.format(file=a_file, tmp=tmp_path) if isinstance(v, str) else v  # noqa: E731
    never_created = tmp_path / "store_not_yet"
    values = {"store_dir": str(never_created), field: fill(value)}
    with pytest.raises(ConfigError) as caught:
        TrackingSettings(**values)
    assert str(caught.value).startswith(fill(expected)), str(caught.value)
    assert not never_created.exists()  # nothing is created before the settings are known to be good


def test_good_tracking_settings_pass_and_unknown_keys_are_named(tmp_path):
    from owl_eval.errors import ConfigError

    for uri in (
        "http://127.0.0.1:5000",
        "https://mlflow.example.org",
        "databricks",
        "databricks://profile",
        "file:///tmp/mlruns",
        "postgresql+psycopg2://u@h:5432/db",  # psycopg2 is in the team extra (and so in all)
        f"sqlite:///{tmp_path}/m.db",
    ):
        assert TrackingSettings(uri=uri).resolved_uri() == uri
    for points in (None, 1, 5000):
        TrackingSettings(max_series_points=points)
    for flag in (None, True, False):
        TrackingSettings(skip_finished=flag)
    assert TrackingSettings(experiment_name=2024).experiment_name == "2024"  # experiment_name=2024 on the command line
    store = tmp_path / "a" / "b"
    settings = TrackingSettings(store_dir=str(store))
    assert not store.exists()
    assert settings.resolved_uri() == f"sqlite:///{store.resolve()}/mlflow.db" and store.is_dir()
    with pytest.raises(ConfigError, match=r"^tracking.bogus: unknown key; valid keys: uri, store_dir"):
        TrackingSettings.from_config({"uri": None, "bogus": 1, "_target_": "x"})
    with pytest.raises(ConfigError, match=r"^tracking.stor_dir: unknown key \(did you mean tracking.store_dir\?\)"):
        TrackingSettings.from_config({"stor_dir": "x"})


def test_a_param_over_mlflows_limit_is_cut_with_a_marker_and_kept_whole_in_an_artifact(
    experiment, client, tmp_path, caplog
):
    import logging

    from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH

    assert MAX_PARAM_VAL_LENGTH == 6000  # MLflow 3.x; the test below reads the constant either way
    # Distinct characters all along (a run of one letter would hide an off-by-one), a non-ASCII one among them.
    long_value = "".join(f"{i:05d}é" for i in range(4000))[:20_000]
    assert len(long_value) == 20_000
    key = "agent.prompt/with spaces"
    with caplog.at_level(logging.WARNING, logger="owl_eval.tracking.runs"):
        with TrackedRun.start(_settings(experiment), run_name="long param") as run:
            run.log_params({key: long_value, "agent.k": "3"})
    data = client.get_run(run.run_id).data

    marker = "... [truncated: 20000 characters; full value in params/agent.prompt_with_spaces.txt]"
    assert data.params[key] == long_value[: MAX_PARAM_VAL_LENGTH - len(marker)] + marker
    assert len(data.params[key]) <= MAX_PARAM_VAL_LENGTH
    assert data.params["agent.k"] == "3"
    local = client.download_artifacts(run.run_id, "params/agent.prompt_with_spaces.txt", str(tmp_path))
    with open(local, encoding="utf-8", newline="") as handle:
        assert handle.read() == long_value
    assert data.tags["owl_eval.truncated_params"] == key
    warnings = [r for r in caplog.records if r.name == "owl_eval.tracking.runs" and r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert key in warnings[0].getMessage() and "20000 characters" in warnings[0].getMessage()


def test_params_within_the_limit_are_logged_as_they_are(experiment, client):
    from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH

    exact = "y" * MAX_PARAM_VAL_LENGTH
    with TrackedRun.start(_settings(experiment), run_name="short params") as run:
        run.log_params({"a": exact, "b": "null"})
    data = client.get_run(run.run_id).data
    assert data.params == {"a": exact, "b": "null"}
    assert "owl_eval.truncated_params" not in data.tags
    assert not client.list_artifacts(run.run_id, "params")


# -- the tracking server must answer before the first client ----------------------------------------------


def test_no_server_at_an_http_uri_is_one_config_error_within_15_s(free_port):
    import time

    from owl_eval.errors import ConfigError
    from owl_eval.tracking.store import make_client

    uri = f"http://127.0.0.1:{free_port}"
    start = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        make_client(uri)
    assert time.monotonic() - start < 15
    assert str(caught.value) == (
        f"tracking.uri: no MLflow server answers at {uri} (connection refused); start one "
        f"(mlflow server --host 127.0.0.1 --port {free_port}) or point MLFLOW_TRACKING_URI / tracking.uri at a running one"
    )


# -- a database store: its driver installed, the database reached, the password never shown ----------------------


def test_a_database_uri_whose_driver_is_missing_is_one_config_error_naming_the_package():
    import importlib.util

    from owl_eval.errors import ConfigError

    for module, uri, expected in (
        (
            "MySQLdb",
            "mysql://u@h/db",
            "mysql:// needs the database driver MySQLdb, which is not installed: pip install mysqlclient",
        ),
        (
            "pg8000",
            "postgresql+pg8000://u@h/db",
            "postgresql+pg8000:// needs the database driver pg8000, which is not installed: pip install pg8000",
        ),
    ):
        if importlib.util.find_spec(module) is not None:
            continue  # installed here: nothing to report
        with pytest.raises(ConfigError) as caught:
            TrackingSettings(uri=uri)
        assert str(caught.value) == f"tracking.uri: {expected}"


def test_redacted_shows_every_part_of_a_uri_but_its_password():
    from owl_eval.tracking.settings import redacted

    assert redacted("postgresql://u:p%40ss@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert (
        redacted("postgresql+psycopg2://u:@h/db?sslmode=require") == "postgresql+psycopg2://u:***@h/db?sslmode=require"
    )
    assert redacted("http://u:p@mlflow.lab:5000") == "http://u:***@mlflow.lab:5000"
    for uri in (
        "postgresql://u@h/db",
        "postgresql:///db",
        "sqlite:////tmp/a b/m.db",
        "http://127.0.0.1:5000",
        "databricks",
    ):
        assert redacted(uri) == uri


def test_no_database_at_a_postgresql_uri_is_one_config_error_at_once(free_port):
    import time

    from owl_eval.errors import ConfigError
    from owl_eval.tracking.store import make_client

    pytest.importorskip("psycopg", reason="the team extra is not installed: pip install -e '.[team]'")
    start = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        make_client(f"postgresql://u:secret@127.0.0.1:{free_port}/db")
    assert time.monotonic() - start < 15  # MLflow alone: 10 tries over ~100 s
    message = str(caught.value)
    assert message.startswith(f"tracking.uri: cannot connect to postgresql://u:***@127.0.0.1:{free_port}/db: ")
    assert "Connection refused" in message and "secret" not in message and "\n" not in message


def test_a_server_that_accepts_but_never_answers_is_a_time_out(monkeypatch):
    import socket

    from owl_eval.errors import ConfigError
    from owl_eval.tracking import store as tracking

    monkeypatch.setattr(tracking, "SERVER_CHECK_TIMEOUT", 0.3)
    monkeypatch.setattr(tracking, "SERVER_CHECK_PAUSE", 0.1)
    with socket.socket() as silent:  # listening: the kernel completes the connection, nobody ever reads it
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        uri = f"http://127.0.0.1:{silent.getsockname()[1]}"
        with pytest.raises(ConfigError, match=r"no MLflow server answers at .* \(timed out after 0.3 s\); start one"):
            tracking.make_client(uri)


def test_any_http_answer_counts_and_is_checked_once_per_process():
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from mlflow.tracking import MlflowClient

    from owl_eval.tracking.store import make_client

    paths: list[str] = []

    class NotFound(BaseHTTPRequestHandler):
        def do_GET(self):
            paths.append(self.path)
            self.send_error(404)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        uri = f"http://127.0.0.1:{server.server_address[1]}"
        assert isinstance(make_client(uri), MlflowClient)
        assert isinstance(make_client(uri), MlflowClient)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    assert paths == ["/"]


@pytest.mark.slow
def test_the_command_line_with_no_server_at_its_uri_exits_with_one_error_line(free_port, tmp_path):
    import os
    import sys
    import time

    from tests import forked

    uri = f"http://127.0.0.1:{free_port}"
    start = time.monotonic()
    done = forked.run(
        [
            sys.executable,
            "-m",
            "owl_eval",
            "+experiment=ond_given_detection",
            "protocol.num_trials=2",
            "figures=false",
            "progress=false",
            f"tracking.uri={uri}",
        ],
        cwd=tmp_path,
        env=os.environ | {"MLFLOW_DISABLE_TELEMETRY": "true"},
        timeout=120,
    )
    elapsed = time.monotonic() - start
    assert done.returncode == 1, done.stderr
    assert elapsed < 60, elapsed
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    assert uri in errors[0] and "no MLflow server answers" in errors[0], errors[0]
    assert "Traceback" not in done.stderr + done.stdout


def test_the_parent_tag_is_mlflows_own():
    """tracking.keys spells MLflow's parent-run tag to stay free of MLflow's import: the two must agree."""
    from mlflow.utils.mlflow_tags import MLFLOW_PARENT_RUN_ID

    from owl_eval.tracking.keys import PARENT_TAG

    assert PARENT_TAG == MLFLOW_PARENT_RUN_ID
