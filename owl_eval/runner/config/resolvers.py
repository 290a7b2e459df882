"""OmegaConf resolvers the packaged configs use.

``${owl_eval.unique:}``: a short random token (6 hex digits) that makes run and sweep directories unique
(``owl_eval/conf/hydra/default.yaml``): two sweeps started in the same second do not share a directory. It is
registered with ``use_cache=True``, like Hydra's own ``now``: the first resolution is stored in the
config, and Hydra copies that cache into every job's config (``load_sweep_config``), so all jobs of one
sweep resolve the same directory, on every launcher.

``${owl_eval.folder:${experiment_name}}``: the experiment name as part of a folder name under the launch folder;
a name with a ``..`` component (``../../..``) would put Hydra's run folder outside it, and is refused with the
key named before any folder is made (Hydra resolves the run directory before it creates it).

Registered at import of ``owl_eval.runner.sweeps.callbacks`` (the sweep callback every Hydra run instantiates, and that
launchers pickle into their workers along with the Hydra context), and by the entry points.
"""

from __future__ import annotations

import secrets

from omegaconf import OmegaConf

UNIQUE_RESOLVER = "owl_eval.unique"
FOLDER_RESOLVER = "owl_eval.folder"


def unique_token() -> str:
    """Six random hex digits (16.7 million values): a collision needs two launches in the same second."""
    return secrets.token_hex(3)


def folder_part(name) -> str:
    """``name`` (the experiment name) for a run or sweep folder: refused when a ``..`` component would climb out
    of the launch folder. Other slashes only nest folders inside it (MLflow allows ``/`` in experiment names)."""
    from owl_eval.errors import ConfigError

    text = str(name)
    if ".." in text.replace("\\", "/").split("/"):
        raise ConfigError(
            f"experiment_name: {text!r} would put the run folder outside the launch folder (a '..' component); "
            "choose a name without '..'"
        )
    return text


def register_resolvers() -> None:
    """Register the resolvers once per process (a second call is a no-op)."""
    if not OmegaConf.has_resolver(UNIQUE_RESOLVER):
        OmegaConf.register_new_resolver(UNIQUE_RESOLVER, unique_token, use_cache=True)
    if not OmegaConf.has_resolver(FOLDER_RESOLVER):
        OmegaConf.register_new_resolver(FOLDER_RESOLVER, folder_part)
