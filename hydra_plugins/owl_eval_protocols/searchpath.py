"""The search-path plugin (see the package docstring)."""

from __future__ import annotations

from pathlib import Path

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

from hydra_plugins.owl_eval_protocols.parsed_once import (
    ParsedOnceFileConfigSource,
    ParsedOnceImportlibResourcesConfigSource,
)

FILE = ParsedOnceFileConfigSource.scheme()
PKG = ParsedOnceImportlibResourcesConfigSource.scheme()


class OwlEvalProtocolConfigs(SearchPathPlugin):
    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        try:
            from owl_eval.paths import CONFIG_DIR, protocol_config_dirs, register_configs
        except ImportError:  # an owl_eval older than its protocol folders first on sys.path: nothing to add
            return

        ours = str(CONFIG_DIR)
        if not any(ours in str(element.path) for element in search_path.get_path()):
            return  # another Hydra app in the same environment: leave its search path alone
        register_configs()  # each protocol's typed metrics node, in the ConfigStore before any composition
        present = {str(element.path) for element in search_path.get_path()}
        for name, folder in protocol_config_dirs().items():
            entry = f"{FILE}://{Path(folder)}"
            if entry not in present:
                search_path.append(provider=f"owl_eval.protocols.{name}", path=entry)
        # owl-eval's folders and Hydra's own are parsed once per process (.parsed_once); a user's stay as given
        for element in search_path.get_path():
            if element.provider == "hydra" and str(element.path) == "pkg://hydra.conf":
                element.path = f"{PKG}://hydra.conf"
            elif element.provider == "main" and str(element.path) in (ours, f"file://{ours}"):
                element.path = f"{FILE}://{ours}"
