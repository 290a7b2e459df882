"""``--help`` answered from the config folders: Hydra's own help builds a config repository for each of the ~140
group listings (3 s with the protocols' folders on the search path); the same page is a directory listing and
one composition here (well under 2 s). The page has Hydra's layout: header, config groups, config, footer."""

from __future__ import annotations

from pathlib import Path

from owl_eval.paths import config_dirs, stored_configs

HEADER = "{app} is powered by Hydra.\n"
FOOTER = "Powered by Hydra (https://hydra.cc)\nUse --hydra-help to view Hydra specific help\n"


def config_groups(extra: tuple[Path, ...] = ()) -> dict[str, list[str]]:
    """Every config group (nested ones as ``agent/ond``) with the options directly in it, across the config
    folders and the nodes owl-eval stores in Hydra's ConfigStore (``metrics=<protocol>``); Hydra's own groups
    (``hydra/``) left out."""
    groups: dict[str, set[str]] = {group: set(options) for group, options in stored_configs().items()}
    for folder in config_dirs(extra):
        for path in folder.rglob("*.yaml"):
            group = path.parent.relative_to(folder).as_posix()
            if group != "." and group.split("/", 1)[0] != "hydra":
                groups.setdefault(group, set()).add(path.stem)
    return {group: sorted(options) for group, options in sorted(groups.items())}


def help_page(config_name: str, overrides: list[str], *, app: str, extra: tuple[Path, ...] = ()) -> str:
    """The help page: the groups and the config composed with ``overrides``, as Hydra prints it."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from owl_eval.paths import CONFIG_DIR

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        searchpath = [f"hydra.searchpath=[{','.join(f'file://{d}' for d in extra)}]"] if extra else []
        cfg = compose(config_name, overrides=[*overrides, *searchpath])
    lines = [f"{group}: {', '.join(options)}" for group, options in config_groups(extra).items()]
    return (
        HEADER.format(app=app)
        + "\n== Configuration groups ==\nCompose your configuration from those groups (group=option)\n\n"
        + "\n".join(lines)
        + "\n\n\n== Config ==\nOverride anything in the config (foo.bar=value)\n\n"
        + OmegaConf.to_yaml(cfg)
        + "\n"
        + FOOTER
    )
