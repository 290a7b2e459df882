"""The registered OND metrics (:data:`OND`) and what their functions receive (:class:`ProgramOptions`).

An OND metric is a pure function of ``flat`` (the agent's trials as :class:`~owl_eval.protocols.ond.metrics.flat.FlatTrials`),
``baseline`` (the baseline agent's, None without one) and ``options``, whichever it ``needs``, returning a number
or ``NA(reason)``; :func:`~owl_eval.protocols.ond.metrics.program.program_metrics` computes every registered one::

    from owl_eval.protocols.ond.metrics import OND

    @OND.metric("mean_unknown_score", higher_is_better=None, bounds=(0.0, 1.0), needs=("flat",),
                description="mean of p_class[:, 0] over every sample of every trial")
    def _mean_unknown_score(flat):
        return float(flat.p_class[:, 0].mean())

A metric tagged :data:`THRESHOLD_GRID` depends on ``options.threshold``: with ``threshold_grid`` it is also
reported at every threshold of :data:`DETECTION_THRESHOLD_GRID` (``name@t``, declared here by :func:`_per_threshold`)
and as the series ``name_vs_threshold``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from owl_eval.metrics.declare import Declared, MetricSet
from owl_eval.metrics.keys import MetricKey
from owl_eval.metrics.results import MetricSpec
from owl_eval.protocols.ond.metrics.trial import DETECTION_THRESHOLD_GRID

THRESHOLD_GRID = "threshold_grid"
_MODULES = ("detection", "accuracy", "reaction", "open_set")  # the order names are reported in (program_metrics)


@dataclass(frozen=True)
class ProgramOptions:
    """The settings of :func:`~owl_eval.protocols.ond.metrics.program.program_metrics`, checked there."""

    threshold: float = 0.5
    asymptotic_width: int = 100
    nrp_window: str = "post"
    condition: str = "system"
    threshold_grid: bool = False

    @property
    def nrp_prefix(self) -> str:
        """NRP is M3 when the agent must detect novelty, M4 when the red light is given."""
        return "m3" if self.condition == "system" else "m4"

    def at(self, threshold: float) -> ProgramOptions:
        return dataclasses.replace(self, threshold=threshold)


def _per_threshold(entries: Iterable[Declared]) -> list[MetricSpec]:
    """``name@t`` for every threshold-grid metric and every threshold t of the grid."""
    grid = [entry for entry in entries if THRESHOLD_GRID in entry.tags]
    return [
        dataclasses.replace(
            spec,
            name=MetricKey(spec.name, threshold=float(t)),
            description=f"{spec.description}; at threshold {t:g}",
            title=f"{spec.title} @ threshold {t:g}" if spec.title else "",
        )
        for t in DETECTION_THRESHOLD_GRID
        for entry in grid
        for spec in entry.specs
    ]


OND = MetricSet(
    "ond",
    missing={"baseline": "needs a baseline agent's trials (baseline=None)"},
    order=tuple(f"owl_eval.protocols.ond.metrics.{module}" for module in _MODULES),
    derived=_per_threshold,
)
