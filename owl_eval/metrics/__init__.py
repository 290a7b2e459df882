"""What every protocol's metrics share: the declaration (:class:`MetricSpec`), N/A values, series, the results
of a scoring, and input validation.

The metrics themselves live in each protocol's folder (``owl_eval/protocols/<name>/``): plain functions of arrays
in the style of ``sklearn.metrics`` and a ``SPECS`` list of :class:`MetricSpec` declaring every name they report
(better direction, bounds, series, ``{k}`` templates), in the modules the protocol's descriptor names;
``owl_eval.evaluation.registry`` collects them.
"""

from owl_eval.metrics.results import NA, MetricResults, MetricSpec, Series
from owl_eval.metrics.validation import MetricInputError

__all__ = ["NA", "MetricResults", "MetricSpec", "Series", "MetricInputError"]
