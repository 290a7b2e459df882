"""Building domain, protocol and agents from config nodes, with errors that name the config key."""

from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from owl_eval.errors import ConfigError


def plain(node) -> Any:
    """A resolved plain-Python copy of a config node (dicts and lists)."""
    if isinstance(node, DictConfig) or OmegaConf.is_config(node):
        return OmegaConf.to_container(node, resolve=True)
    return node


def build_part(cfg: DictConfig, key: str) -> Any:
    """Instantiate ``cfg[key]`` (a node with ``_target_``); a failure names the key and the target."""
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    node = cfg.get(key)
    if node is None:
        raise ValueError(f"config has no '{key}' node; choose one with '{key}=<option>'")
    if "_target_" not in node:
        raise ValueError(f"config node '{key}' has no _target_ (got keys {sorted(node.keys())})")
    try:
        return instantiate(node, _convert_="all")
    except InstantiationException as exc:
        cause = exc.__cause__ or exc
        if isinstance(cause, ConfigError):
            # Already names its key; an agent built as the baseline names it under ``baseline.``.
            text = str(cause)
            if key != "agent" and text.startswith("agent."):
                text = f"{key}.{text[len('agent.') :]}"
            raise ConfigError(text) from None
        raise ValueError(f"could not build '{key}' ({node['_target_']}): {cause}") from None
