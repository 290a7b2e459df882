"""The one description of a protocol that the shared code reads (:class:`Protocol`).

A protocol lives in one folder (``owl_eval/protocols/<name>/`` for the four built in, any package for a
plugin) and says what it is in one object, ``PROTOCOL = Protocol(...)``, registered under the entry-point
group ``owl_eval.protocols`` (:mod:`owl_eval.protocols`). Its parts are named as ``"module:attribute"``
strings and imported on first use, so listing the protocols (``--help``, a config error, a comparison of
stored runs) imports none of their code.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from owl_eval.metrics.keys import QUALIFIERS
from owl_eval.metrics.results import MetricSpec


@dataclass(frozen=True)
class Protocol:
    """What a protocol is, for every part of owl-eval that is not the protocol itself.

    - ``driver``: the class the ``protocol`` config node builds (``_target_``): runs agents over a domain and
      returns a record (:class:`owl_eval.protocols.base.ProtocolDriver`).
    - ``evaluation``: the :class:`owl_eval.evaluation.Evaluation` that scores a record and draws its figures.
    - ``options``: the :class:`owl_eval.evaluation.options.MetricOptions` of its ``metrics`` config node.
    - ``metric_modules``: modules declaring its metrics: a ``SPECS`` sequence of
      :class:`~owl_eval.metrics.results.MetricSpec` (name, direction, bounds, ``series``; a name holding ``{k}``
      declares it for every K), ``SPECS = SET.specs`` of the protocol's :class:`~owl_eval.metrics.declare.MetricSet`
      whose decorators declare each metric on its function.
    - ``headline``: what users of the field look at first, in this order: logged under plain MLflow keys and
      printed at the end of a run; ``{k}`` in a name matches any K.
    - ``reported``: names the driver or the scoring report besides the metric modules (counts, series).
    - ``key_qualifiers``: the qualifiers its reported keys give a declared name
      (:data:`owl_eval.metrics.keys.QUALIFIERS`: ``"baseline"``, ``"task"``, ``"batch"``, ``"vs_threshold"``,
      ``"by_task"``); a ``metrics.names`` list may name a metric so qualified (``baseline.top1``).
    - ``record_files``: file name of a saved record -> ``"module:function"`` reading it,
      ``function(path, *, settings, chunk_size) -> SourceData`` (``owl-eval-evaluate +source=record``).
    - ``record_folder``: a file whose presence in a folder makes the folder a record of this protocol (an
      l2logger log directory's ``data-log.tsv``), read by the ``""`` entry of ``record_files``.
    - ``config``: the package whose folder holds the protocol's config groups (``protocol/``, ``metrics/``,
      ``agent/``, ``experiment/``, ...), added to Hydra's search path (``hydra_plugins.owl_eval_protocols``).
    """

    name: str
    title: str
    driver: str
    evaluation: str
    options: str
    metric_modules: tuple[str, ...]
    headline: tuple[str, ...]
    config: str = ""
    reported: tuple[MetricSpec, ...] = ()
    key_qualifiers: tuple[str, ...] = ()
    record_files: Mapping[str, str] = field(default_factory=dict)
    record_folder: str | None = None

    def __post_init__(self):
        unknown = [q for q in self.key_qualifiers if q not in QUALIFIERS]
        if unknown:
            raise ValueError(f"protocol {self.name!r}: unknown key_qualifiers {unknown}; known: {sorted(QUALIFIERS)}")

    def load(self, reference: str) -> Any:
        """The object a ``"module:attribute"`` reference names (imported now)."""
        module, _, attribute = reference.partition(":")
        obj: Any = importlib.import_module(module)
        for part in attribute.split(".") if attribute else ():
            obj = getattr(obj, part)
        return obj

    def evaluation_class(self) -> Any:
        return self.load(self.evaluation)

    def options_class(self) -> Any:
        return self.load(self.options)
