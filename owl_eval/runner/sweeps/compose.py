"""A sweep batch's job configs, composed as Hydra's sweeper composes them to validate the batch, at a fraction of
the cost when jobs differ only in plain values; what is kept of each is its task config (the config a job
receives: everything but the ``hydra`` node), as plain dicts and lists with its interpolations unresolved.

Hydra composes a job's config in two steps: the defaults list (config files and group options, set by the group
overrides) merged into one config, then the value overrides (``seed=3``, ``protocol.num_trials=2``) applied to it
(``ConfigLoaderImpl._load_configuration_impl``). Jobs whose overrides choose the same groups and set the same keys
share the first step: the first of them is composed whole (``load_sweep_config``), and each of the others gets its
own values applied to that config by the function Hydra applies them with, so a value Hydra refuses (a missing
key, a wrong type in a typed node) is refused here with Hydra's words. The values are scalars set on the same keys,
so each job's values replace the previous job's whole (a dict or list value, which Hydra would merge into the
composed node, is composed whole). These configs are for looking at; a launcher composes each job whole again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from omegaconf import DictConfig


def compose_batch(loader: Any, master_config: DictConfig, batch: Sequence[Sequence[str]]) -> list[dict[str, Any]]:
    """The task configs of ``batch`` (each job's overrides), in order; Hydra's error for the first job that does not
    compose."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create(config_loader=loader)
    shapes: dict[tuple[Any, ...], DictConfig] = {}
    composed = []
    for overrides in batch:
        parsed = parser.parse_overrides(list(overrides))
        values = [o for o in parsed if _plain_value(o, loader)]
        shape = _shape(parsed, values)
        cfg = shapes.get(shape) if shape is not None else None
        if cfg is None:
            cfg = loader.load_sweep_config(master_config=master_config, sweep_overrides=list(overrides))
            if shape is not None:
                shapes[shape] = cfg
        else:
            _apply_values(cfg, values)
        composed.append(task_container(cfg))
    return composed


def task_container(cfg: DictConfig) -> dict[str, Any]:
    """A composed job config's task part as plain dicts and lists, interpolations unresolved."""
    from omegaconf import OmegaConf

    task: dict[str, Any] = {}
    for key in cfg:
        if key == "hydra":
            continue
        node: Any = cfg._get_node(key)  # the node, not its value: an interpolation stays as written
        task[str(key)] = OmegaConf.to_container(node, resolve=False) if OmegaConf.is_config(node) else node._value()
    return task


def _plain_value(override: Any, loader: Any) -> bool:
    """``key=value`` on a key of the config, not a group, a package, Hydra's node, an addition or a deletion."""
    from hydra.core.override_parser.types import OverrideType

    if override.type != OverrideType.CHANGE or override.package is not None or override.is_hydra_override():
        return False
    if override.is_sweep_override() or isinstance(override.value(), (dict, list)):
        return False
    return not loader.repository.group_exists(override.key_or_group)


def _shape(parsed: list[Any], values: list[Any]) -> tuple[Any, ...] | None:
    """What the first composition step depends on: the other overrides whole, and which keys get values; None when
    the job has to be composed whole (a key given twice)."""
    keys = tuple(o.key_or_group for o in values)
    if len(set(keys)) != len(keys):
        return None
    taken = {id(o) for o in values}
    structural = tuple(o.input_line for o in parsed if id(o) not in taken)
    return structural, tuple(sorted(keys))


def _apply_values(cfg: DictConfig, values: list[Any]) -> None:
    from hydra._internal.config_loader_impl import ConfigLoaderImpl

    ConfigLoaderImpl._apply_overrides_to_config(values, cfg)
