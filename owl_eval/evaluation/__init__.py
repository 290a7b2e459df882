"""Scoring records, apart from running agents: one :class:`~owl_eval.evaluation.base.Evaluation` per
protocol, named by the protocol's descriptor (:func:`evaluation_for`).

``options(settings)`` types the ``metrics`` node (:mod:`owl_eval.evaluation.options`), ``score(record,
options)`` returns the metric results and the figures' values (:class:`~owl_eval.evaluation.base.Scored`),
``figures(scored, options)`` draws them. Live runs and sources are scored alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from owl_eval.evaluation.base import Evaluation, Scored

__all__ = ["Evaluation", "Scored", "evaluation_for"]


def evaluation_for(name: str, context: Mapping[str, Any] | None = None) -> Evaluation:
    """The evaluation of protocol ``name``; ``context`` is what a live protocol knows about its data
    (``ProtocolDriver.evaluation_context()``). An unknown name is one error listing the installed protocols."""
    from owl_eval.protocols import get_protocol

    return get_protocol(name).evaluation_class()(context)
