"""Readers for results produced elsewhere (and for our own saved records): ``owl-eval-evaluate``.

Each source validates everything it reads before anything is logged, and returns the protocol that
scores it, by name, with the record to score (:class:`SourceData`); the evaluation of that protocol
(:func:`owl_eval.evaluation.evaluation_for`) scores it like a live run's record.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from owl_eval.errors import SourceFormatError  # noqa: F401  (re-exported: every source raises it)
from owl_eval.protocols.base import Record


@dataclass
class SourceData:
    protocol: str  # the name of the protocol whose evaluation scores the record ("ond", "continual", ...)
    record: Record  # what is logged as the run's record and scored by the protocol's evaluation
    tags: dict[str, str] = field(default_factory=dict)
