"""Protocols: found through the entry-point group ``owl_eval.protocols``, each a :class:`Protocol`.

The four built-in protocols register themselves in owl-eval's own ``pyproject.toml`` the way a third-party
package does (``[project.entry-points."owl_eval.protocols"]``); nothing else in owl-eval lists them.

Every command reads this registry, so one plugin must not be able to stop them all: a plugin whose entry point
fails to load (its module does not import, or it names something that is not a matching :class:`Protocol`)
is one ``warning:`` line on stderr naming its distribution and the error, and the other protocols work. Two
distributions registering one protocol name are ambiguous (which one a run used would depend on ``sys.path``
order), so that is a :class:`~owl_eval.errors.ConfigError` naming both.
"""

from __future__ import annotations

import functools
import sys
from importlib.metadata import EntryPoint, entry_points

from owl_eval.errors import ConfigError
from owl_eval.protocols.descriptor import Protocol

GROUP = "owl_eval.protocols"

__all__ = ["GROUP", "Protocol", "all_protocols", "get_protocol", "known", "unavailable_protocols"]


def _distribution(entry: EntryPoint) -> str:
    """The name of the distribution (the ``pip install`` name) that declares ``entry``."""
    dist = getattr(entry, "dist", None)
    name = dist.metadata["Name"] if dist is not None else None
    return str(name) if name else entry.value.split(":", 1)[0].split(".", 1)[0]


def _where(entry: EntryPoint) -> str:
    return f"{_distribution(entry)} ({entry.name} = {entry.value})"


def _loaded(entry: EntryPoint) -> Protocol:
    """The protocol ``entry`` names; any failure (the plugin's import included) raises."""
    protocol = entry.load()
    if not isinstance(protocol, Protocol):
        raise TypeError(f"{entry.value} is a {type(protocol).__name__}, not an owl_eval Protocol")
    if protocol.name != entry.name:
        raise TypeError(f"{entry.value} describes protocol {protocol.name!r}, not {entry.name!r}")
    return protocol


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or "(no message)"
    return f"{type(exc).__name__}: {text[:300]}"


def _refuse_duplicates(entries: list[EntryPoint]) -> None:
    """Two distributions registering one protocol name: which one wins would depend on ``sys.path``."""
    by_name: dict[str, list[EntryPoint]] = {}
    for entry in entries:
        by_name.setdefault(entry.name, []).append(entry)
    for name, same in by_name.items():
        if len(same) > 1:
            raise ConfigError(
                f"protocol {name!r} is registered by {len(same)} installed packages: "
                f"{' and '.join(_where(e) for e in same)} ({GROUP} entry points); uninstall one of them"
            )


@functools.cache
def _registry() -> tuple[dict[str, Protocol], dict[str, str]]:
    """The protocols that loaded, by name (the built-in ones first), and the reason for each that did not."""
    entries = sorted(entry_points(group=GROUP), key=lambda e: (not e.value.startswith("owl_eval."), e.name))
    _refuse_duplicates(entries)
    found: dict[str, Protocol] = {}
    broken: dict[str, str] = {}
    for entry in entries:
        try:
            found[entry.name] = _loaded(entry)
        except Exception as exc:  # a plugin's own bug or missing dependency: only its protocol is lost
            broken[entry.name] = f"the plugin {_where(entry)} failed to load: {_one_line(exc)}"
            print(f"warning: {broken[entry.name]}; protocol {entry.name!r} is unavailable", file=sys.stderr)
    return found, broken


def all_protocols() -> dict[str, Protocol]:
    """Every installed protocol that loads, by name, in entry-point order (the built-in ones first)."""
    return _registry()[0]


def unavailable_protocols() -> dict[str, str]:
    """Protocol name -> why its plugin did not load (already reported once as a ``warning:`` line)."""
    return _registry()[1]


def known(name: str) -> bool:
    return name in all_protocols()


def get_protocol(name: str) -> Protocol:
    """The protocol called ``name``; an unknown name is one error listing the installed ones, and the name of a
    plugin that failed to load is one error saying why."""
    protocols = all_protocols()
    if name in unavailable_protocols():
        raise ConfigError(f"protocol {name!r} is unavailable: {unavailable_protocols()[name]}")
    if name not in protocols:
        raise ConfigError(f"protocol {str(name)[:60]!r} is not installed; known protocols: {', '.join(protocols)}")
    return protocols[name]
