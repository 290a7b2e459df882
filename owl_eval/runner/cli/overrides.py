"""The same config key or option given twice, with different values, on one command line is refused.

Hydra applies overrides left to right, so ``seed=1 seed=2`` silently runs seed 2 (and ``--config-dir a
--config-dir b`` silently searches only ``b``). Either is ambiguous: the user meant one of them (the same value said twice is
not, and is accepted). The overrides are
read with Hydra's own parser, so ``+x=1``, ``++x=2``, ``x=3`` and ``~x`` all name the key ``x``, while a sweep
``seed=1,2`` is one override. An override Hydra cannot parse is left for Hydra to report in its own words.
"""

from __future__ import annotations

from collections.abc import Sequence

from owl_eval.tracking.redaction import redacted_override

# Hydra's flags (hydra._internal.utils.get_args_parser) that take the next argument as their value, each
# with its aliases under one name; --info takes the next argument only when it is one of its choices.
VALUE_FLAG_NAMES = {
    "--cfg": "--cfg",
    "-c": "--cfg",
    "--package": "--package",
    "-p": "--package",
    "--config-path": "--config-path",
    "-cp": "--config-path",
    "--config-name": "--config-name",
    "-cn": "--config-name",
    "--config-dir": "--config-dir",
    "-cd": "--config-dir",
    "--experimental-rerun": "--experimental-rerun",
    "--info": "--info",
    "-i": "--info",
}
INFO_CHOICES = ("all", "config", "defaults", "defaults-tree", "plugins", "searchpath")


def split_command_line(args: Sequence[str]) -> tuple[list[tuple[int, str]], list[tuple[int, str, str]]]:
    """``args`` (``sys.argv[1:]``) as Hydra's argument parser reads them: the overrides, each with its 1-based
    position, and the valued flags, each as (position, canonical flag name, the text as given)."""
    overrides: list[tuple[int, str]] = []
    flags: list[tuple[int, str, str]] = []
    i = 0
    while i < len(args):
        arg = args[i]
        flag, inline, _ = arg.partition("=")
        if arg.startswith("-"):
            name = VALUE_FLAG_NAMES.get(flag)
            if name is not None and "=" in arg:
                flags.append((i + 1, name, arg))
            elif name == "--info":
                takes_next = i + 1 < len(args) and args[i + 1] in INFO_CHOICES
                flags.append((i + 1, name, f"{arg} {args[i + 1]}" if takes_next else arg))
                i += takes_next
            elif name is not None:
                flags.append((i + 1, name, f"{arg} {args[i + 1]}" if i + 1 < len(args) else arg))
                i += 1
        else:
            overrides.append((i + 1, arg))
        i += 1
    return overrides, flags


def override_key(text: str, parser=None) -> str | None:
    """The config key or group an override sets (``+x=1``, ``++x=2``, ``~x`` and ``x=3`` all set ``x``;
    ``db@pkg=v`` sets ``db@pkg``), or None when Hydra's parser (``parser``, default a new one) cannot read it."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        (override,) = (parser or OverridesParser.create()).parse_overrides([text])
    except (HydraException, ValueError):
        return None
    return override.key_or_group + (f"@{override.package}" if override.package is not None else "")


def _value(text: str) -> str | None:
    """What an override or a valued flag sets its key to (None for a deletion ``~x``, which sets nothing)."""
    if text.startswith("~"):
        return None
    if text.startswith("-"):
        return text.replace("=", " ", 1).partition(" ")[2]
    return text.partition("=")[2]


def repeated_argument_message(args: Sequence[str]) -> str | None:
    """One line naming the first config key or valued flag that ``args`` gives twice with different values, and
    both places (``seed=1`` as argument 2 and ``seed=2`` as argument 3), or None. The same value said twice
    (``figures=false figures=false``) is not ambiguous and is accepted."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    overrides, flags = split_command_line(args)
    parser = OverridesParser.create() if overrides else None
    seen: dict[str, tuple[int, str]] = {}
    for position, text in overrides:
        key = override_key(text, parser)
        if key is None:
            continue
        if key in seen and _value(seen[key][1]) != _value(text):
            first, earlier = seen[key][0], redacted_override(seen[key][1])  # a URI's password never shown
            text = redacted_override(text)
            return (
                f"config key {key!r} is given twice on the command line: {earlier!r} (argument {first}) and "
                f"{text!r} (argument {position}); give it once"
            )
        seen.setdefault(key, (position, text))
    given: dict[str, tuple[int, str]] = {}
    for position, name, text in flags:
        if name in given and _value(given[name][1]) != _value(text):
            first, earlier = given[name]
            return (
                f"option {name} is given twice on the command line: {earlier!r} (argument {first}) and "
                f"{text!r} (argument {position}); give it once"
            )
        given.setdefault(name, (position, text))
    return None
