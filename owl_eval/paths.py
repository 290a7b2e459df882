"""Where the configs live: ``owl_eval/conf/`` (the primary config and the shared groups) and each installed
protocol's own config folder (its descriptor's ``config``), package data, so a wheel works outside the
checkout; and Hydra's ConfigStore, which holds each protocol's typed ``metrics`` node (:func:`register_configs`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parent
CONFIG_DIR = PACKAGE_DIR / "conf"


def protocol_config_dirs() -> dict[str, Path]:
    """Each installed protocol's config folder, by protocol name (those that have one)."""
    from owl_eval.protocols import all_protocols

    return {name: Path(p.config) for name, p in all_protocols().items() if p.config}


def stored_configs() -> dict[str, list[str]]:
    """The options owl-eval puts in Hydra's ConfigStore, by group: ``metrics`` -> every installed protocol (the
    schema of its descriptor's ``options`` dataclass, ``metrics=<protocol>``)."""
    from owl_eval.protocols import all_protocols

    return {"metrics": list(all_protocols())}


def register_configs() -> None:
    """Put the typed nodes of every installed protocol in Hydra's ConfigStore: group ``metrics``, option
    ``<protocol>``, the ``config_node`` of its descriptor's ``options`` dataclass (``_target_`` the class, then its
    fields with their defaults, written once, in the dataclass). The search-path plugin
    (``hydra_plugins.owl_eval_protocols``) calls it before Hydra composes any owl-eval config (the command lines,
    the Python API, ``compose`` in tests); a second call stores nothing. Imports the descriptors and the small
    ``options`` modules only.

    A protocol whose ``options`` do not import (a plugin built for another owl-eval) gets a node holding its
    ``_target_`` alone: every other protocol works, and a run of that one fails when its parts are loaded, with the
    import error."""
    from hydra.core.config_store import ConfigStore

    from owl_eval.protocols import all_protocols

    store = ConfigStore.instance()
    for group, names in stored_configs().items():
        present = store.repo.get(group, {})
        for name in names:
            if f"{name}.yaml" in present:
                continue
            protocol = all_protocols()[name]
            node: Any
            try:
                node = protocol.options_class().config_node
            except Exception:  # noqa: BLE001 - reported when the protocol is used, not by every command
                node = {"_target_": protocol.options.replace(":", ".")}
            store.store(group=group, name=name, node=node, provider=f"owl_eval.protocols.{name}")


def config_dirs(extra: tuple[Path, ...] = ()) -> list[Path]:
    """Every folder Hydra searches for owl-eval's config groups: ``owl_eval/conf``, the protocols' folders,
    then ``extra`` (a user's ``--config-dir`` or ``hydra.searchpath``)."""
    return [CONFIG_DIR, *protocol_config_dirs().values(), *extra]


def group_options(group: str, config_dir: Path | None = None) -> list[str]:
    """The options of a config group (``agent`` -> ``ond/knn_novelty``, ...): its YAML files in every config
    folder and the nodes owl-eval stores in Hydra's ConfigStore (or the YAML files in ``config_dir`` alone),
    sorted."""
    dirs = [config_dir] if config_dir is not None else config_dirs()
    found: set[str] = set(stored_configs().get(group, [])) if config_dir is None else set()
    for folder in dirs:
        root = folder / group
        if root.is_dir():
            found.update(str(p.relative_to(root).with_suffix("")) for p in root.rglob("*.yaml"))
    return sorted(found)


def config_file(group: str, option: str) -> Path:
    """The YAML file of ``group=option`` (the first folder of :func:`config_dirs` that has it)."""
    for folder in config_dirs():
        path = folder / group / f"{option}.yaml"
        if path.is_file():
            return path
    raise FileNotFoundError(f"no config {group}/{option}.yaml in {[str(d) for d in config_dirs()]}")
