"""What every protocol's metrics share: the declaration (:class:`MetricSpec`) and the decorator that makes it
(:mod:`owl_eval.metrics.declare`), N/A values, series, the results of a scoring, and input validation.

The metrics themselves live in each protocol's folder (``owl_eval/protocols/<name>/``): plain functions of arrays
in the style of ``sklearn.metrics``, each reported one declared by a decorator of the protocol's
:class:`MetricSet` (better direction, bounds, series, ``{k}`` templates, the inputs it needs, when it is N/A);
the scoring computes every registered metric, and ``owl_eval.evaluation.registry`` reads their ``SPECS`` from
the modules the protocol's descriptor names.
"""

from owl_eval.metrics.declare import MetricSet, NAIf
from owl_eval.metrics.results import NA, MetricResults, MetricSpec, Series
from owl_eval.metrics.validation import MetricInputError

__all__ = ["NA", "MetricResults", "MetricSpec", "MetricSet", "NAIf", "Series", "MetricInputError"]
