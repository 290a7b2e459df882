"""Readers for results produced elsewhere (and for our own saved records): ``python -m owl_eval.runner.evaluate``.

Each source validates everything it reads before anything is logged, and returns the protocol that
scores it with the record to score (:class:`SourceData`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from owl_eval.errors import SourceFormatError  # noqa: F401  (re-exported: every source raises it)


@dataclass
class SourceData:
    protocol: Any  # a owl_eval.protocols.base.Protocol used for evaluate/figures/save_record
    record: Any
    tags: dict[str, str] = field(default_factory=dict)
