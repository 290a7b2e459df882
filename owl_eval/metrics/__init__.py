"""owl-eval metrics: pure, vectorised functions of arrays.

One module per protocol (``ond``, ``continual``, ``trajectory``, ``lifelong_rl``). Each module exposes
plain functions in the style of ``sklearn.metrics`` and a ``SPECS`` list of :class:`MetricSpec` that
declares every metric name it reports (better direction, bounds, plot scale). ``owl_eval.evaluation.registry``
collects them.
"""

from owl_eval.metrics.results import NA, MetricResults, MetricSpec, Series
from owl_eval.metrics.validation import MetricInputError

__all__ = ["NA", "MetricResults", "MetricSpec", "Series", "MetricInputError"]
