"""The config sources that parse each YAML file once per process give what Hydra's own sources give."""

from __future__ import annotations

import os
from pathlib import Path

from hydra._internal.core_plugins.file_config_source import FileConfigSource
from hydra._internal.core_plugins.importlib_resources_config_source import ImportlibResourcesConfigSource
from omegaconf import OmegaConf

from hydra_plugins.owl_eval_protocols.parsed_once import (
    ParsedOnceFileConfigSource,
    ParsedOnceImportlibResourcesConfigSource,
)
from owl_eval.paths import CONFIG_DIR, protocol_config_dirs


def _configs(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder).with_suffix("")) for p in folder.rglob("*.yaml"))


def test_every_shipped_config_loads_as_hydras_file_source_loads_it():
    folders = [Path(CONFIG_DIR), *map(Path, protocol_config_dirs().values())]
    checked = 0
    for folder in folders:
        ours, hydras = ParsedOnceFileConfigSource("t", f"owl-eval-file://{folder}"), FileConfigSource("t", str(folder))
        for name in _configs(folder):
            for _ in range(2):  # parsed, then from the cache
                mine, theirs = ours.load_config(name), hydras.load_config(name)
                assert OmegaConf.to_container(mine.config) == OmegaConf.to_container(theirs.config), name
                assert mine.header == theirs.header, name
            checked += 1
    assert checked > 50


def test_hydras_own_configs_load_as_its_package_source_loads_them():
    ours = ParsedOnceImportlibResourcesConfigSource("hydra", "owl-eval-pkg://hydra.conf")
    hydras = ImportlibResourcesConfigSource("hydra", "pkg://hydra.conf")
    import hydra

    names = _configs(Path(hydra.__file__).parent / "conf")
    assert "hydra/job_logging/default" in names
    for name in names * 2:
        mine, theirs = ours.load_config(name), hydras.load_config(name)
        assert OmegaConf.to_container(mine.config) == OmegaConf.to_container(theirs.config), name
        assert mine.header == theirs.header


def test_each_load_is_a_fresh_config_and_an_edited_file_is_read_again(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("# @package _global_\nx: 1\nnested: {y: [1, 2]}\n")
    source = ParsedOnceFileConfigSource("t", f"owl-eval-file://{tmp_path}")
    first = source.load_config("a")
    first.config.nested.y.append(3)  # what one composition does to its copy
    first.header["package"] = "changed"
    second = source.load_config("a")
    assert OmegaConf.to_container(second.config) == {"x": 1, "nested": {"y": [1, 2]}}
    assert second.header["package"] == "_global_"
    path.write_text("x: 22\n")
    os.utime(path, ns=(1, 1))  # a different modification time even where the clock is coarse
    assert OmegaConf.to_container(source.load_config("a").config) == {"x": 22}
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing\n")
    assert OmegaConf.to_container(source.load_config("empty").config) == {}
