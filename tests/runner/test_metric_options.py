"""Typed metric settings: each protocol's ``metrics`` node is its options dataclass, registered in Hydra's ConfigStore
(defaults written once), built by Hydra's instantiate; every key is checked, each error names the key."""

from __future__ import annotations

import pickle
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from owl_eval.errors import ConfigError
from owl_eval.evaluation import evaluation_for
from owl_eval.evaluation.options import options_class, parse
from owl_eval.paths import CONFIG_DIR, config_dirs
from owl_eval.runner.cli.console import one_line

PROTOCOLS = ("ond", "continual", "trajectory", "lifelong_rl")


def composed(*overrides: str):
    """The packaged config composed with ``overrides`` (the ConfigStore filled by the search-path plugin)."""
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose("config", overrides=list(overrides))


def metrics_node(protocol: str, *overrides: str):
    return composed(f"metrics={protocol}", *overrides).metrics


def node_settings(protocol: str) -> dict:
    """The composed node's settings, without its ``_target_``."""
    node = OmegaConf.to_container(metrics_node(protocol))
    return {k: v for k, v in node.items() if k != "_target_"}


def hook(protocol):
    """The evaluation of a live protocol, with what the protocol knows about its data."""
    return evaluation_for(protocol.name, protocol.evaluation_context())


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_node_is_the_dataclass_with_its_defaults_and_no_yaml_repeats_them(protocol):
    cls = options_class(protocol)
    node = metrics_node(protocol)
    assert OmegaConf.get_type(node) is cls.config_node  # metrics=<protocol> is the ConfigStore's schema
    assert list(node) == ["_target_", *(f for f in cls.__dataclass_fields__)]  # the dataclass's order
    assert parse(protocol, {}).as_dict() == node_settings(protocol)  # nothing given: the node's values, key for key
    assert parse(protocol, node_settings(protocol)).as_dict() == node_settings(protocol)
    assert not [
        d / "metrics" / f"{protocol}.yaml" for d in config_dirs() if (d / "metrics" / f"{protocol}.yaml").exists()
    ]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_nodes_target_is_the_protocols_options_class_and_instantiate_builds_it(protocol):
    from hydra.utils import instantiate

    node = metrics_node(protocol)
    cls = options_class(protocol)
    assert node["_target_"] == f"owl_eval.protocols.{protocol}.options.{cls.__name__}"
    assert parse(protocol, node) == cls()  # the node with its _target_ parses to the defaults
    assert instantiate(node) == cls()  # and Hydra builds the same dataclass from it
    full = OmegaConf.to_container(node)
    other = options_class(next(p for p in PROTOCOLS if p != protocol))
    with pytest.raises(ConfigError, match=rf"^metrics._target_: expected owl_eval.protocols.{protocol}.options."):
        parse(protocol, full | {"_target_": f"{other.__module__}.{other.__name__}"})


def test_overrides_apply_to_the_node_and_keep_the_values_as_given():
    """Not read-only (the dataclass is frozen, its schema is not); values reach the checks as typed on the command
    line, so a check words the error (OmegaConf would have made ``threshold_grid=1`` true silently)."""
    node = metrics_node("ond", "metrics.threshold=0.7", "metrics.threshold_grid=1", "metrics.asymptotic_width=60.0")
    assert (node.threshold, node.threshold_grid, node.asymptotic_width) == (0.7, 1, 60.0)
    with pytest.raises(ConfigError, match=r"^metrics.threshold_grid: expected true or false, got 1 \(int\)$"):
        parse("ond", node)
    built = parse("ond", metrics_node("ond", "metrics.threshold=0.7", "metrics.asymptotic_width=60.0"))
    assert (built.threshold, built.asymptotic_width) == (0.7, 60) and type(built.asymptotic_width) is int
    # the domain-specific nodes extend the stored one (defaults: [/metrics/ond@_here_, _self_])
    assert parse("ond", metrics_node("ond/activity")).asymptotic_width == 60
    # interpolations are resolved by Hydra's instantiate
    assert parse("ond", composed("metrics.threshold=${seed}", "seed=1").metrics).threshold == 1.0


@pytest.mark.parametrize(
    "override, message",
    [
        (
            "metrics.treshold=0.7",
            "metrics.treshold: unknown key (did you mean metrics.threshold?); valid keys: "
            "threshold, asymptotic_width, nrp_window, threshold_grid, names",
        ),
        ("metrics={bogus: 1}", "metrics.bogus: unknown key; valid keys: threshold, asymptotic_width"),
        (
            "~metrics.threshold",
            "metrics.threshold: cannot be deleted (~metrics.threshold), the keys of metrics are fixed",
        ),
    ],
)
def test_what_omegaconf_refuses_in_the_node_is_worded_as_our_checks_word_it(override, message):
    with pytest.raises(Exception) as err:
        composed("+experiment=ond_given_detection", override)
    assert one_line(err.value).startswith(message)


def test_an_unknown_key_in_a_users_yaml_is_worded_as_the_check_words_it(tmp_path):
    (tmp_path / "experiment").mkdir()
    (tmp_path / "experiment" / "mine.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /metrics: trajectory\nmetrics:\n  chunksize: 64\n"
    )
    with pytest.raises(Exception) as err:
        composed("+experiment=mine", f"hydra.searchpath=[file://{tmp_path}]")
    assert one_line(err.value).startswith("metrics.chunksize: unknown key (did you mean metrics.chunk_size?)")


def test_an_unknown_key_added_with_plus_is_refused_by_the_check():
    node = metrics_node("ond", "+metrics.treshold=0.7")
    with pytest.raises(ConfigError, match=r"^metrics.treshold: unknown key \(did you mean metrics.threshold\?\)"):
        parse("ond", node)


def test_the_class_checks_its_fields_however_it_is_built():
    cls = options_class("ond")
    assert cls(threshold="0.3").threshold == 0.3
    with pytest.raises(ConfigError, match=r"^metrics.threshold: expected a number <= 1, got 2$"):
        cls(threshold=2)
    with pytest.raises(ConfigError, match=r"^settings.threshold: expected a number, got 'x'$"):
        parse("ond", {"threshold": "x"}, where="settings")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_config_holding_the_node_pickles(protocol):
    """Launchers send configs (and Hydra's ConfigStore) to other processes: the schema is found by name."""
    node = metrics_node(protocol)
    again = pickle.loads(pickle.dumps(node))
    assert OmegaConf.get_type(again) is options_class(protocol).config_node
    assert OmegaConf.to_container(again) == OmegaConf.to_container(node)


def test_a_protocol_whose_options_do_not_import_leaves_the_others_working(monkeypatch):
    """A plugin built for another owl-eval: its node holds its _target_ alone (using it fails on loading its parts,
    as before the nodes were stored); every other node is stored."""
    import dataclasses

    from hydra.core.config_store import ConfigStore

    import owl_eval.protocols as protocols
    from owl_eval.paths import register_configs

    register_configs()
    installed = protocols.all_protocols()
    broken = dataclasses.replace(installed["ond"], name="broken", options="no_such_module:Options")
    monkeypatch.setattr(protocols, "all_protocols", lambda: {**installed, "broken": broken})
    stored = ConfigStore.instance().repo["metrics"]
    try:
        register_configs()
        assert OmegaConf.to_container(stored["broken.yaml"].node) == {"_target_": "no_such_module.Options"}
        assert OmegaConf.get_type(stored["ond.yaml"].node) is options_class("ond").config_node
    finally:
        stored.pop("broken.yaml", None)


def test_registering_the_nodes_imports_no_heavy_module():
    code = (
        "import sys; from owl_eval.paths import register_configs; register_configs(); "
        "from hydra.core.config_store import ConfigStore; "
        "print(sorted(ConfigStore.instance().list('metrics'))); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mlflow', 'matplotlib', 'sklearn', 'scipy') "
        "or (m.startswith('owl_eval.protocols.') and m.endswith(('.metrics', '.evaluation', '.driver')))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert all(f"{p}.yaml" in out[0] for p in PROTOCOLS)
    assert out[1] == "[]"


def test_values_are_typed_as_a_careful_user_means_them():
    ond = parse("ond", {"threshold": "0.7", "asymptotic_width": 60.0, "threshold_grid": "false"})
    assert (ond.threshold, ond.asymptotic_width, ond.threshold_grid) == (0.7, 60, False)
    assert type(ond.asymptotic_width) is int
    traj = parse("trajectory", {"k_values": 5, "chunk_size": "64"})
    assert traj.k_values == [5] and traj.chunk_size == 64
    rl = parse("lifelong_rl", {"window_length": "10", "data_range": {"cartpole_default": {"min": 0, "max": 200}}})
    assert rl.window_length == 10 and rl.data_range == {"cartpole_default": {"min": 0.0, "max": 200.0}}
    assert parse("ond", {"names": ["top1", "m1_mean_fn_cdt"]}).names == ["top1", "m1_mean_fn_cdt"]


@pytest.mark.parametrize(
    "protocol, settings, message",
    [
        # unknown keys: the closest valid key is suggested
        (
            "ond",
            {"treshold": 0.7},
            "metrics.treshold: unknown key (did you mean metrics.threshold?); valid keys: "
            "threshold, asymptotic_width, nrp_window, threshold_grid, names",
        ),
        ("continual", {"threshold": 0.5}, "metrics.threshold: unknown key; valid keys: max_task_series, names"),
        ("ond", [0.5], "metrics: expected a mapping of metric settings"),
        # OND
        ("ond", {"threshold": "high"}, "metrics.threshold: expected a number, got 'high'"),
        ("ond", {"threshold": 1.5}, "metrics.threshold: expected a number <= 1, got 1.5"),
        ("ond", {"threshold": -0.1}, "metrics.threshold: expected a number >= 0, got -0.1"),
        ("ond", {"threshold": "nan"}, "metrics.threshold: expected a finite number, got 'nan'"),
        ("ond", {"threshold": None}, "metrics.threshold: expected a number, got None"),
        ("ond", {"threshold": True}, "metrics.threshold: expected a number, got True (bool)"),
        ("ond", {"asymptotic_width": 0}, "metrics.asymptotic_width: expected an integer >= 1, got 0"),
        ("ond", {"asymptotic_width": 2.5}, "metrics.asymptotic_width: expected an integer, got 2.5 (float)"),
        ("ond", {"nrp_window": "Post"}, "metrics.nrp_window: expected one of ['post', 'asymptotic'], got 'Post'"),
        ("ond", {"threshold_grid": "maybe"}, "metrics.threshold_grid: expected true or false, got 'maybe'"),
        ("ond", {"names": ["top1", "top1"]}, "metrics.names: 'top1' is listed twice"),
        ("ond", {"names": []}, "metrics.names: the list is empty"),
        ("ond", {"names": ["top_1"]}, "metrics.names: unknown metric(s) ['top_1'] for protocol 'ond'"),
        ("continual", {"names": "forgetting"}, "metrics.names: expected a list of metric names or null"),
        # trajectory
        ("trajectory", {"k_values": [0]}, "metrics.k_values[0]: expected an integer >= 1, got 0"),
        ("trajectory", {"k_values": [5, 2.5]}, "metrics.k_values[1]: expected an integer, got 2.5 (float)"),
        ("trajectory", {"k_values": [5, 1, 5]}, "metrics.k_values: 5 is listed twice"),
        ("trajectory", {"k_values": []}, "metrics.k_values: expected a non-empty list of integers, got []"),
        ("trajectory", {"miss_threshold": -1}, "metrics.miss_threshold: expected a number >= 0, got -1"),
        ("trajectory", {"collision_radius": "inf"}, "metrics.collision_radius: expected a finite number, got 'inf'"),
        (
            "trajectory",
            {"step_count": "agents"},
            "metrics.step_count: expected one of ['agent', 'sample'], got 'agents'",
        ),
        ("trajectory", {"kde": "maybe"}, "metrics.kde: expected true or false, got 'maybe'"),
        ("trajectory", {"chunk_size": 0}, "metrics.chunk_size: expected an integer >= 1, got 0"),
        ("trajectory", {"chunk_size": None}, "metrics.chunk_size: expected an integer, got None"),
        ("trajectory", {"class_ece_bins": 2.5}, "metrics.class_ece_bins: expected an integer, got 2.5 (float)"),
        (
            "trajectory",
            {"auc_score": "gf"},
            "metrics.auc_score: expected one of ['raw', 'general_framework'], got 'gf'",
        ),
        ("trajectory", {"tnr_pr_positive": 3}, "metrics.tnr_pr_positive: expected a non-empty string, got 3 (int)"),
        # lifelong RL
        ("lifelong_rl", {"window_length": -1}, "metrics.window_length: expected an integer >= 1, got -1"),
        ("lifelong_rl", {"window_length": 0}, "metrics.window_length: expected an integer >= 1, got 0"),
        ("lifelong_rl", {"window_length": 2.5}, "metrics.window_length: expected an integer, got 2.5 (float)"),
        (
            "lifelong_rl",
            {"smoothing": "gauss"},
            "metrics.smoothing: expected one of ['flat', 'hanning', 'hamming', "
            "'bartlett', 'blackman', 'none'], got 'gauss'",
        ),
        ("lifelong_rl", {"smoothing_fraction": 1.5}, "metrics.smoothing_fraction: expected a number <= 1, got 1.5"),
        ("lifelong_rl", {"max_window": 0}, "metrics.max_window: expected an integer >= 1, got 0"),
        ("lifelong_rl", {"smooth_eval": "perhaps"}, "metrics.smooth_eval: expected true or false, got 'perhaps'"),
        ("lifelong_rl", {"normalization": "global"}, "metrics.normalization: expected one of ['task', 'run', 'none']"),
        ("lifelong_rl", {"data_range": [0, 1]}, "metrics.data_range: expected null or a mapping"),
        (
            "lifelong_rl",
            {"data_range": {"t": {"min": 1, "max": 1}}},
            "metrics.data_range.t: expected min < max, got min=1, max=1",
        ),
        ("lifelong_rl", {"data_range": {"t": {"min": 0}}}, "metrics.data_range.t: expected both min and max"),
        ("lifelong_rl", {"data_range": {"t": {"min": 0, "maks": 1}}}, "metrics.data_range.t.maks: unknown key"),
        ("lifelong_rl", {"clamp_outliers": 1}, "metrics.clamp_outliers: expected true or false, got 1 (int)"),
        ("lifelong_rl", {"aggregation": "max"}, "metrics.aggregation: expected one of ['mean', 'median'], got 'max'"),
        ("lifelong_rl", {"learn_threshold": 0}, "metrics.learn_threshold: expected a number > 0, got 0"),
        ("lifelong_rl", {"learn_threshold": 1.5}, "metrics.learn_threshold: expected a number <= 1, got 1.5"),
        ("lifelong_rl", {"variant_mode": "aware "}, "metrics.variant_mode: expected one of ['aware', 'agnostic']"),
        ("lifelong_rl", {"preset": "l2m"}, "metrics.preset: expected one of ['l2metrics'], got 'l2m'"),
        ("lifelong_rl", {"perf_measure": ""}, "metrics.perf_measure: expected a non-empty string, got ''"),
    ],
)
def test_each_bad_setting_is_one_error_naming_its_key(protocol, settings, message):
    with pytest.raises(ConfigError) as err:
        parse(protocol, settings)
    assert str(err.value).startswith(message)


def test_every_field_has_a_check():
    import dataclasses

    for cls in map(options_class, PROTOCOLS):
        assert all(callable(f.metadata.get("check")) for f in dataclasses.fields(cls)), cls


# ------------------------------------------------------------------------- through the protocols' hook


def test_trajectory_k_values_must_fit_the_predictions_of_the_run_or_the_record():
    from owl_eval.protocols.trajectory.driver import TrajectoryDriver

    protocol = TrajectoryDriver(num_preds=20)
    assert hook(protocol).options({"k_values": [1, 20]}).k_values == [1, 20]
    with pytest.raises(ConfigError) as err:
        hook(protocol).options({"k_values": [1000]})
    assert str(err.value) == (
        "metrics.k_values: K=1000 exceeds the 20 predictions per agent (protocol.num_preds); "
        "expected values in 1..20, e.g. metrics.k_values=[20]"
    )
    # a source: the number of predictions comes from the record (General-Framework arrays, N_P = 6)
    record = SimpleNamespace(path_pred=np.zeros((2, 6, 3, 12, 2)))
    with pytest.raises(ConfigError) as err:
        hook(protocol).options({}, record=record)
    assert str(err.value) == (
        "metrics.k_values: K=20 exceeds the 6 predictions per agent (in the data); "
        "expected values in 1..6, e.g. metrics.k_values=[6]"
    )
    assert hook(protocol).options({"k_values": [6]}, record=record).k_values == [6]
    file_like = SimpleNamespace(num_preds=3)  # owl_eval.protocols.trajectory.sources.trajectories.TrajectoryFile
    with pytest.raises(ConfigError, match="K=20 exceeds the 3 predictions"):
        hook(protocol).options({}, record=file_like)


def test_trajectory_positive_class_must_be_a_behaviour_class_of_a_live_run():
    from owl_eval.protocols.trajectory.driver import TrajectoryDriver

    with pytest.raises(ConfigError) as err:
        hook(TrajectoryDriver()).options({"tnr_pr_positive": "forward"})
    assert str(err.value) == (
        "metrics.tnr_pr_positive: expected one of the classes ['straight', 'left', 'right', 'stop'], got 'forward'"
    )


def test_lifelong_rl_perf_measure_must_be_a_column_of_the_log():
    pytest.importorskip("gymnasium")
    from owl_eval.protocols.lifelong_rl.driver import RLSyllabusDriver

    protocol = RLSyllabusDriver({"kind": "CL", "generate": {"task_variants": ["cartpole/default"], "cycles": 1}})
    assert hook(protocol).options({"perf_measure": "episode_step_count"}).perf_measure == "episode_step_count"
    with pytest.raises(
        ConfigError,
        match=r"metrics.perf_measure: expected a performance column of the log "
        r"\['episode_step_count', 'reward'\], got 'score'",
    ):
        hook(protocol).options({"perf_measure": "score"})
    record = SimpleNamespace(log=SimpleNamespace(columns={"reward": None, "score": None}))
    assert hook(protocol).options({"perf_measure": "score"}, record=record).perf_measure == "score"


@pytest.mark.parametrize("protocol_name", PROTOCOLS)
def test_every_protocol_hook_returns_the_typed_node_with_names(protocol_name):
    from owl_eval.protocols.continual.driver import ContinualDriver
    from owl_eval.protocols.ond.driver import OndDriver
    from owl_eval.protocols.trajectory.driver import TrajectoryDriver

    if protocol_name == "lifelong_rl":
        pytest.importorskip("gymnasium")
        from owl_eval.protocols.lifelong_rl.driver import RLSyllabusDriver

        protocol = RLSyllabusDriver({"kind": "CL", "generate": {"task_variants": ["cartpole/default"], "cycles": 1}})
    else:
        protocol = {"ond": OndDriver, "continual": ContinualDriver, "trajectory": TrajectoryDriver}[protocol_name]()
    node = node_settings(protocol_name)
    assert hook(protocol).options(node).as_dict() == node
    assert (
        hook(protocol).options(metrics_node(protocol_name)).as_dict() == node
        and "names" in hook(protocol).options({}).as_dict()
    )
    with pytest.raises(ConfigError, match=r"^metrics.bogus: unknown key"):
        hook(protocol).options({"bogus": 1})


def test_typed_options_give_the_numbers_of_the_raw_node():
    """The same OND record scored with the node's values as given and with their typed form: identical values."""
    from owl_eval.datasets.classification import DigitsDomain
    from owl_eval.protocols.ond.driver import OndDriver
    from tests.runner.test_ond_protocol import SpyAgent

    protocol = OndDriver(
        known_classes=6, num_trials=3, trials_without_novelty=1, pre_novelty=20, post_novelty=30, batch_size=10
    )
    record = protocol.run(domain=DigitsDomain(), agent=SpyAgent(), rng=np.random.default_rng(0), progress=False)
    raw = node_settings("ond") | {"threshold": 0.4}
    typed = hook(protocol).options({"threshold": "0.4"})
    assert hook(protocol).evaluate(record, typed).values == hook(protocol).evaluate(record, raw).values
