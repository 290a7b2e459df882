"""What every protocol provides to the runner.

A protocol is built from config (``_target_``), then the runner calls, in order:
``run(domain=..., agent=..., baseline=..., rng=...)`` -> a record (plain numpy arrays in a small
dataclass, saveable), ``evaluate(record, settings)`` -> :class:`metrics.MetricResults`, and
``figures(record, results, settings)`` -> ``{name: matplotlib Figure}``. If ``run`` raises (a crashing agent),
the runner asks ``record_so_far()`` for what was completed and logs its metrics before marking the
MLflow run FAILED.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from owl_eval.metrics.results import MetricResults


class AgentOutputError(ValueError):
    """An agent returned something the protocol cannot accept; the message names where and what."""


class Protocol(ABC):
    #: short name used in tags and metric declarations ("ond", "continual", "trajectory", "lifelong_rl")
    name: str = ""

    @abstractmethod
    def run(self, *, domain: Any, agent: Any, rng: np.random.Generator, baseline: Any = None,
            progress: bool = True) -> Any:
        """Drive the agent (and the baseline, if the protocol uses one) and return the record."""

    def check(self, *, domain: Any, agent: Any, baseline: Any = None) -> None:
        """Everything that can be checked before a run exists: the agent's (and baseline's) interface, the
        domain's data (paths, sizes) against the protocol's settings. Raises a ``ValueError`` naming the key."""

    def metric_options(self, settings: Mapping[str, Any], *, record: Any = None) -> dict[str, Any]:
        """The ``metrics`` config node, validated and typed (unknown keys, wrong types and ranges are a
        ``owl_eval.errors.ConfigError`` naming ``metrics.<key>``); ``record`` when the data are already known
        (a source), so settings that depend on them are checked too. Called before any run exists.
        The default types the node of the protocol's ``name`` (:mod:`owl_eval.protocols.metric_options`)."""
        from owl_eval.protocols.metric_options import metric_options

        return metric_options(self.name, settings, record=record)

    def record_so_far(self) -> Any | None:
        """The record of the completed part of an interrupted ``run`` (None if nothing completed)."""
        return None

    @abstractmethod
    def evaluate(self, record: Any, settings: Mapping[str, Any]) -> MetricResults:
        """Compute every metric of the protocol from the record."""

    def figures(self, record: Any, results: MetricResults, settings: Mapping[str, Any]) -> dict[str, Any]:
        return {}

    def tags(self) -> dict[str, str]:
        """Protocol-specific run tags (e.g. the OND condition)."""
        return {}

    def save_record(self, record: Any, directory: Path) -> None:
        """Write the record into ``directory`` (npz / TSV / CSV / JSON, never pickle)."""
        record.save(directory)
