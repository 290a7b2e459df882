"""Config sources that parse each YAML file once per process.

Hydra builds a new config repository for every composition, so every YAML file on the defaults list is read and
parsed again: a command composes twice (Hydra's ``get_mode`` and the run), a sweep twice per job (the sweeper's
check and the launch), and YAML parsing in pure Python is about a third of each composition. These two sources
are Hydra's own ``file://`` and ``pkg://`` sources with the parsed document kept, keyed by the file's path,
modification time and size (an edited file is parsed again); each composition still gets a fresh ``DictConfig``
built from it (``OmegaConf.create`` makes nodes of its own, never holding the document's dicts and lists), so
nothing Hydra does to one composition reaches the next. The search-path plugin
(:mod:`.searchpath`) moves owl-eval's folders, its protocols' and Hydra's own onto them; a user's
``--config-dir`` and ``hydra.searchpath`` stay ``file://``.
"""

from __future__ import annotations

import os
from typing import Any

from hydra._internal.core_plugins.file_config_source import FileConfigSource
from hydra._internal.core_plugins.importlib_resources_config_source import ImportlibResourcesConfigSource
from hydra.plugins.config_source import ConfigLoadError, ConfigResult, ConfigSource
from omegaconf import OmegaConf

# (real path, mtime in ns, size) -> (the "# @key value" header, the document as plain lists and dicts)
_parsed: dict[tuple[str, int, int], tuple[dict[str, str | None], Any]] = {}


def _load(path: str) -> tuple[dict[str, str | None], Any]:
    import yaml
    from omegaconf._utils import get_yaml_loader

    stat = os.stat(path)
    key = (path, stat.st_mtime_ns, stat.st_size)
    if key not in _parsed:
        with open(path, encoding="utf-8") as f:
            header = ConfigSource._get_header_dict(f.read(512))
            f.seek(0)
            document = yaml.load(f, Loader=get_yaml_loader())  # what OmegaConf.load parses with
        if document is not None and not isinstance(document, (list, dict, str)):
            raise OSError(f"Invalid loaded object type: {type(document).__name__}")  # OmegaConf.load's check
        _parsed[key] = (header, document)
    return _parsed[key]


def _result(source: ConfigSource, path: str) -> ConfigResult:
    header, document = _load(path)
    return ConfigResult(
        config=OmegaConf.create() if document is None else OmegaConf.create(document),
        path=f"{source.scheme()}://{source.path}",
        provider=source.provider,
        header=dict(header),
    )


class ParsedOnceFileConfigSource(FileConfigSource):
    """``file://`` with each file parsed once per process."""

    @staticmethod
    def scheme() -> str:
        return "owl-eval-file"

    def load_config(self, config_path: str) -> ConfigResult:
        full_path = os.path.realpath(os.path.join(self.path, self._normalize_file_name(config_path)))
        try:
            return _result(self, full_path)
        except FileNotFoundError:
            raise ConfigLoadError(f"Config not found : {full_path}") from None


class ParsedOnceImportlibResourcesConfigSource(ImportlibResourcesConfigSource):
    """``pkg://`` with each file parsed once per process (a package in a zip file is read as Hydra reads it)."""

    @staticmethod
    def scheme() -> str:
        return "owl-eval-pkg"

    def _read_config(self, res: Any) -> ConfigResult:
        path = os.fspath(res) if isinstance(res, os.PathLike) else None
        if path is None or not os.path.isfile(path):
            return super()._read_config(res)
        return _result(self, path)
