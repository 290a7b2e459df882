"""Scoring a record, apart from running: what every protocol's evaluation provides to the runner.

A protocol drives agents and returns a record; the evaluation of that protocol (its descriptor's ``evaluation``,
:func:`owl_eval.evaluation.evaluation_for`) turns the ``metrics`` config node into typed options
(:meth:`Evaluation.options`, before any run exists), scores a record (:meth:`Evaluation.score`: the metric
results and the values the figures draw) and draws the figures from those values alone
(:meth:`Evaluation.figures`). A source (results produced elsewhere) is scored by the same evaluation.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from owl_eval.evaluation.options import MetricOptions, build, parse
from owl_eval.metrics.keys import MetricKey
from owl_eval.metrics.results import MetricResults

#: the protocol's typed ``metrics`` node (its descriptor's ``options``), e.g. ``OndMetricOptions``
OptionsT = TypeVar("OptionsT", bound=MetricOptions)


@dataclass
class Scored:
    """What :meth:`Evaluation.score` computed: the metric results and the figures' values (arrays, numbers)."""

    results: MetricResults
    figure_data: dict[str, Any] = field(default_factory=dict)


class Evaluation(ABC, Generic[OptionsT]):
    """The scoring of one protocol, ``OptionsT`` its typed ``metrics`` node. ``context`` is what a live protocol knows about the data before the run
    (``num_preds``, ``class_names``, ``columns``, and presentation settings such as ``plot_scenes``);
    a source's record tells it instead (``options(..., record=record)``)."""

    #: the name of the protocol it scores (its descriptor's ``name``)
    name: str = ""

    def __init__(self, context: Mapping[str, Any] | None = None):
        self.context = dict(context or {})

    def options(self, settings: Mapping[str, Any] | None, *, record: Any = None) -> OptionsT:
        """The ``metrics`` node typed and checked (unknown keys, wrong types and ranges are one
        :class:`~owl_eval.errors.ConfigError` naming ``metrics.<key>``), against the data when known."""
        checks = {k: v for k, v in self.context.items() if k in ("num_preds", "class_names", "columns")}
        options = build(self.name, settings, record=record, **({} if record is not None else checks))
        return cast(OptionsT, options)  # build() makes the options class registered under self.name

    @abstractmethod
    def score(self, record: Any, options: OptionsT, *, figures: bool = True) -> Scored:
        """Every metric of the record; with ``figures`` also the values the figures draw."""

    def figures(self, scored: Scored, options: OptionsT) -> dict[str, Any]:
        """``{name: matplotlib Figure}`` drawn from ``scored`` alone."""
        return {}

    def run_tags(
        self,
        record: Any,
        options: OptionsT,
        *,
        record_logged: bool = True,
        logged_as: Callable[[MetricKey], str] = str,
    ) -> dict[str, str]:
        """Tags the run gets for what the scoring of ``record`` left out of its metrics (and where it is
        instead); ``record_logged``: whether the record is logged (``tracking.log_record``); ``logged_as``: the
        key a metric is logged under (the runner's ``tracking.mlflow_key``; default: its reported name)."""
        return {}

    def evaluate(self, record: Any, settings: Mapping[str, Any] | None = None) -> MetricResults:
        """The results alone, for tests and scripts: ``settings`` typed (the defaults for keys not given) but not
        checked against the data, so a setting the data cannot meet scores as the metric functions do (N/A)."""
        options = settings if isinstance(settings, MetricOptions) else parse(self.name, settings)
        return self.score(record, cast(OptionsT, options), figures=False).results
