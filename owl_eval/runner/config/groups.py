"""The options of each config group, for Hydra's "could not find" errors and a sweep's choices checked before it starts.

Hydra lists the available options only for flat groups; ``agent=ond/nope`` would just say "could not
find". :func:`unknown_option_message` turns Hydra's error into one line that names the group and every valid
option, nested ones included, read from Hydra's own search path.
"""

from __future__ import annotations

from collections.abc import Sequence

from owl_eval.paths import group_options


def hydra_group_options(group: str) -> list[str]:
    """The options of ``group`` on Hydra's own search path (the packaged configs, every installed protocol's
    and a user's ``--config-dir`` / ``hydra.searchpath``), nested ones as ``ond/knn_novelty``; from the config
    folders when Hydra is not initialised."""
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.object_type import ObjectType

    hydra = GlobalHydra.instance()
    if not hydra.is_initialized():
        return group_options(group)
    loader = hydra.config_loader()

    def walk(path: str) -> list[str]:
        found = [f"{path}/{o}" for o in loader.get_group_options(path, results_filter=ObjectType.CONFIG)]
        for sub in loader.list_groups(path):
            found += walk(f"{path}/{sub}")
        return found

    return sorted(option[len(group) + 1 :] for option in walk(group))


def unknown_option_message(missing: str, args: list[str], options: list[str] | None = None) -> str | None:
    """Our one line for Hydra's "could not find" of a group option (``missing``: ``agent/ond/nope``), with
    every valid option of the group, nested ones included (Hydra lists only one level), and the override
    that asked for it; None when ``missing`` is not an option of a known group. ``options``: the group's
    options when the caller knows them (default: Hydra's search path)."""
    group, _, option = missing.partition("/")
    if group == "hydra" and "/" in option:  # Hydra's own groups: hydra/launcher=nope
        sub, _, option = option.partition("/")
        group = f"hydra/{sub}"
    if options is None:
        options = hydra_group_options(group) if option else []
    options = sorted(set(options))
    if not options:
        return None
    asked = next(
        (a for a in args if a.lstrip("+~").split("=", 1)[0] == group and option in a.split("=", 1)[-1].split(",")),
        None,
    )
    where = f" in '{asked}'" if asked else ""
    return f"unknown {group} option {option!r}{where}. Valid options for {group}: " + ", ".join(options)


def unknown_sweep_choice(overrides: list[str], searchpath: Sequence[str] = ()) -> str | None:
    """The first option of a swept group that does not exist (``agent=ond/knn_novelty,ond/nope``), as
    :func:`unknown_option_message` words it, or None. Hydra itself finds it only when it composes the jobs,
    after the sweep's parent run exists; this reads the overrides with Hydra's own parser beforehand.
    ``searchpath``: the composed ``hydra.searchpath`` (folders given on the command line)."""
    from pathlib import Path

    from hydra.core.override_parser.overrides_parser import OverridesParser

    for override in OverridesParser.create().parse_overrides(overrides):
        if override.is_delete() or not override.is_sweep_override():
            continue
        group = override.key_or_group
        options = hydra_group_options(group)
        for entry in searchpath:
            if str(entry).startswith("file://"):
                options += group_options(group, Path(str(entry)[len("file://") :]))
        if not options:
            continue
        try:
            values = list(override.sweep_string_iterator())
        except Exception:  # glob(...) and other sweeps Hydra expands against the options itself
            continue
        missing = next((v for v in values if v not in options and v != "null"), None)
        if missing is not None:
            return unknown_option_message(f"{group}/{missing}", [override.input_line or ""], options)
    return None
