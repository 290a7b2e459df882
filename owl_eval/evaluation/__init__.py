"""Scoring records, apart from running agents: one :class:`~owl_eval.evaluation.base.Evaluation` per
protocol, looked up by the protocol's name (:func:`evaluation_for`).

``options(settings)`` types the ``metrics`` node (:mod:`owl_eval.evaluation.options`), ``score(record,
options)`` returns the metric results and the figures' values (:class:`~owl_eval.evaluation.base.Scored`),
``figures(scored, options)`` draws them (:mod:`owl_eval.plots`). Live runs and sources are scored alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from owl_eval.errors import ConfigError
from owl_eval.evaluation.base import Evaluation, Scored

PROTOCOLS = ("ond", "continual", "trajectory", "lifelong_rl")

__all__ = ["Evaluation", "Scored", "PROTOCOLS", "evaluation_for"]


def evaluation_for(name: str, context: Mapping[str, Any] | None = None) -> Evaluation:
    """The evaluation of protocol ``name``; ``context`` is what a live protocol knows about its data
    (``Protocol.evaluation_context()``)."""
    if name == "ond":
        from owl_eval.evaluation.ond import OndEvaluation as cls
    elif name == "continual":
        from owl_eval.evaluation.continual import ContinualEvaluation as cls
    elif name == "trajectory":
        from owl_eval.evaluation.trajectory import TrajectoryEvaluation as cls
    elif name == "lifelong_rl":
        from owl_eval.evaluation.lifelong_rl import LifelongRLEvaluation as cls
    else:
        raise ConfigError(f"protocol {str(name)[:60]!r} has no evaluation; known protocols: {', '.join(PROTOCOLS)}")
    return cls(context)
