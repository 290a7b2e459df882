"""The config hash that lets a re-run sweep skip finished jobs: stable across job directories, sensitive
to every value that changes a number."""

from __future__ import annotations

import importlib.util

import pytest
from hydra import compose, initialize_config_dir

from owl_eval.paths import CONFIG_DIR
from owl_eval.runner.job.config import config_hash


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
def test_rl_log_dir_inside_the_job_directory_does_not_change_the_hash(tmp_path):
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import OmegaConf, open_dict

    resolved_dirs, hashes = [], []
    for job in ("job0", "job1"):
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            full = compose(
                "config", overrides=["+experiment=lifelong_rl_frozenlake_syllabus"], return_hydra_config=True
            )
        with open_dict(full):
            full.hydra.runtime.output_dir = str(tmp_path / job)
            full.hydra.runtime.cwd = str(tmp_path)
        HydraConfig.instance().set_config(full)
        try:
            cfg = full.copy()
            with open_dict(cfg):
                del cfg["hydra"]
            resolved_dirs.append(OmegaConf.to_container(cfg, resolve=True)["protocol"]["log_dir"])
            hashes.append(config_hash(cfg))
        finally:
            HydraConfig.instance().cfg = None
    # The l2logger directory resolves into each job's own directory, yet the two jobs are one config.
    assert resolved_dirs == [f"{tmp_path}/job0/l2log", f"{tmp_path}/job1/l2log"]
    assert hashes[0] == hashes[1]
