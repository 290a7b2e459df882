"""The config hash that lets a re-run sweep skip finished jobs: stable across job directories, sensitive
to every value that changes a number."""
from __future__ import annotations

import importlib.util

import pytest
from hydra import compose, initialize_config_dir

from runner.app import config_hash
from runner.paths import CONFIG_DIR


def _cfg(overrides):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose("config", overrides=overrides)


def test_hash_ignores_tracking_and_output_paths_but_not_values():
    base = ["+experiment=ond_system_detection"]
    h = config_hash(_cfg(base))
    assert config_hash(_cfg(base + ["tracking.store_dir=/elsewhere", "experiment_name=ond_system_detection"])) == h
    for change in ("seed=1", "agent=ond/closed_world", "protocol.batch_size=20", "metrics.threshold=0.6"):
        assert config_hash(_cfg(base + [change])) != h, change


@pytest.mark.skipif(importlib.util.find_spec("gymnasium") is None, reason="the rl extra (gymnasium) is not installed")
def test_rl_log_dir_inside_the_job_directory_does_not_change_the_hash():
    cfg = _cfg(["+experiment=rl_frozenlake_syllabus"])
    # The l2logger directory is an interpolation of the job's own output directory: hashed as written.
    assert "${hydra:runtime.output_dir}" in str(cfg.protocol._get_node("log_dir")._value())
    assert config_hash(cfg) == config_hash(_cfg(["+experiment=rl_frozenlake_syllabus"]))
