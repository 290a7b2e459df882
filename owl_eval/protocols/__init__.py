"""Protocols: found through the entry-point group ``owl_eval.protocols``, each a :class:`Protocol`.

The four built-in protocols register themselves in owl-eval's own ``pyproject.toml`` the way a third-party
package does (``[project.entry-points."owl_eval.protocols"]``); nothing else in owl-eval lists them.
"""

from __future__ import annotations

import functools
from importlib.metadata import entry_points

from owl_eval.errors import ConfigError
from owl_eval.protocols.descriptor import Protocol

GROUP = "owl_eval.protocols"

__all__ = ["GROUP", "Protocol", "all_protocols", "get_protocol", "known"]


@functools.cache
def all_protocols() -> dict[str, Protocol]:
    """Every installed protocol by name, in entry-point order (the built-in ones first)."""
    found: dict[str, Protocol] = {}
    for entry in sorted(entry_points(group=GROUP), key=lambda e: (not e.value.startswith("owl_eval."), e.name)):
        protocol = entry.load()
        if not isinstance(protocol, Protocol):
            raise TypeError(f"entry point {entry.name} = {entry.value} ({GROUP}) is not an owl_eval Protocol")
        if protocol.name != entry.name:
            raise TypeError(f"entry point {entry.name} = {entry.value} ({GROUP}) describes {protocol.name!r}")
        found.setdefault(protocol.name, protocol)
    return found


def known(name: str) -> bool:
    return name in all_protocols()


def get_protocol(name: str) -> Protocol:
    """The protocol called ``name``; an unknown name is one error listing the installed ones."""
    protocols = all_protocols()
    if name not in protocols:
        raise ConfigError(f"protocol {str(name)[:60]!r} is not installed; known protocols: {', '.join(protocols)}")
    return protocols[name]
