"""Readers for results produced elsewhere (and for our own saved records): ``python -m runner.evaluate``.

Each source validates everything it reads before anything is logged, and returns the protocol that
scores it with the record to score (:class:`SourceData`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class SourceFormatError(ValueError):
    """A file of a source is missing or malformed; the message names the file, row and column."""


@dataclass
class SourceData:
    protocol: Any  # a runner.protocols.base.Protocol used for evaluate/figures/save_record
    record: Any
    tags: dict[str, str] = field(default_factory=dict)
