"""What every protocol's driver provides to the runner (the descriptor, :mod:`owl_eval.protocols.descriptor`,
names the driver class).

A driver is built from config (``_target_``), then the runner calls, in order:
``check(domain=..., agent=..., baseline=...)`` before any run exists, then ``run(domain=..., agent=...,
baseline=..., rng=...)`` -> a record (plain numpy arrays in a small dataclass with its own ``save(directory)``).
Scoring the record is not the driver's job: the evaluation the protocol's descriptor names does it
(:func:`owl_eval.evaluation.evaluation_for`). If ``run`` raises (a crashing agent), the runner asks
``record_so_far()`` for what was completed and logs its metrics before marking the MLflow run FAILED.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import numpy as np


class AgentOutputError(ValueError):
    """An agent returned something the protocol cannot accept; the message names where and what."""


class ProtocolDriver(ABC):
    #: the protocol's name (its descriptor's ``name``), used in tags and metric declarations
    name: str = ""

    @abstractmethod
    def run(
        self, *, domain: Any, agent: Any, rng: np.random.Generator, baseline: Any = None, progress: bool = True
    ) -> Any:
        """Drive the agent (and the baseline, if the protocol uses one) and return the record."""

    def check(self, *, domain: Any, agent: Any, baseline: Any = None) -> None:  # noqa: B027 (optional hook)
        """Everything that can be checked before a run exists: the agent's (and baseline's) interface, the
        domain's data (paths, sizes) against the protocol's settings. Raises a ``ValueError`` naming the key."""

    def record_so_far(self) -> Any | None:
        """The record of the completed part of an interrupted ``run`` (None if nothing completed)."""
        return None

    def evaluation_context(self) -> dict[str, Any]:
        """What the protocol knows about its data before the run, for checking the metric settings
        (``num_preds``, ``class_names``, ``columns``) and drawing the figures (``plot_scenes``)."""
        return {}

    def tags(self) -> dict[str, str]:
        """Protocol-specific run tags (e.g. the OND condition)."""
        return {}
