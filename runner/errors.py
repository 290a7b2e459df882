"""The errors a user can cause, each a ``ValueError`` so the CLI turns it into one ``error:`` line.

- :class:`ConfigError`: a config value is wrong; the message starts with the dotted key (``metrics.threshold``).
- ``runner.sources.SourceFormatError``: a file of results is missing or malformed (file, row, column).
- ``runner.protocols.base.AgentOutputError``: an agent returned something the protocol cannot accept.
- :class:`UnsafePathError`: a name or path taken from user data would leave its folder or follow a link.
"""
from __future__ import annotations


class ConfigError(ValueError):
    """A config value is missing, of the wrong type or out of range; the message names the key."""


class UnsafePathError(ValueError):
    """A name from user data is not a safe file name, or a user folder holds a symbolic link."""
