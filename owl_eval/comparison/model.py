"""What a comparison is: its table rows (:mod:`owl_eval.comparison.table`), its verdict rows
(:mod:`owl_eval.comparison.verdict`) and the per-seed values the verdicts were computed from. Every output is made
from one of these (:mod:`owl_eval.comparison.outputs`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from owl_eval.comparison.table import Row
from owl_eval.comparison.verdict import VerdictRow


@dataclass(frozen=True)
class Comparison:
    """A comparison's table rows, its verdict rows and the per-seed values the verdicts were computed from."""

    rows: Sequence[Row]
    verdicts: Sequence[VerdictRow] = ()
    values: Mapping = field(default_factory=dict)
    title: str = "owl-eval comparison"
    # Jobs of the sweep whose config was running in another launch when it was compared (not counted): one line each
    unfinished: Sequence[str] = ()

    @property
    def headline(self) -> list[Row]:
        return [r for r in self.rows if r.role == "headline"]

    @property
    def details(self) -> list[Row]:
        return [r for r in self.rows if r.role != "headline"]
