"""OND (open-world novelty detection) program metrics: SAIL-ON M1-M6, top-k, per-sample detection, open set.

Definitions: shared/METRICS.md section 1 (they override everything else). Reference: sail-on-client
0.30.0, ``sail_on_client.evaluate`` (``metrics.py``: ``m_num_stats``, ``m_acc``, ``m_ndp``;
``image_classification.py``: ``m_is_cdt_and_is_early``, ``m_nrp``; ``utils.py``: ``topk_accuracy``).
Our numbers equal the reference on ordinary inputs except where METRICS.md fixes it:

* a detection on the last sample is a correctly detected trial (the reference requires the 1-based
  detection index to be < the trial length, which refuses it);
* pre-novelty is ``[:red_light]`` and post-novelty ``[red_light:]`` (the reference's ``m_acc`` adds 1 to
  the 0-based red-light index and so counts the first novel sample as pre-novelty);
* top-k ties go to the lower column (the reference's ``np.argsort`` breaks ties arbitrarily);
* our per-sample detection ``unknown_score_*`` thresholds the unknown-class score ``p_class[:, 0] >= threshold``
  (like the trial-level detection); the reference's ``m_ndp`` thresholds P(world changed) with ``>``, and is
  offered as well, exactly, under its own names ``m_ndp_*``, ``m_ndp_pre_*``, ``m_ndp_post_*``;
* a baseline with zero pre-novelty accuracy makes that trial's NRP N/A instead of a division by zero;
* nothing is rounded (the reference rounds accuracies and rates to 5 decimals).

Everything is computed on all trials at once: the trials are concatenated into flat arrays, and
per-trial quantities are segment sums (cumulative sums read at segment bounds) or ``reduceat``.
Every metric is one pure function of the flattened trials, declared where it is computed with ``@OND.metric``
(or ``@OND.family`` for names computed together): name, direction, bounds, description, the inputs it needs and
when it is N/A (:mod:`owl_eval.metrics.declare`); :func:`program_metrics` computes every registered one, and
``SPECS`` lists their declarations for :mod:`owl_eval.evaluation.registry`. Adding a metric is one decorated
function in one of the modules below (see :mod:`~owl_eval.protocols.ond.metrics.declared`).

Modules: :mod:`~owl_eval.protocols.ond.metrics.trial` (the data type), :mod:`~owl_eval.protocols.ond.metrics.flat` (all trials as
flat arrays), :mod:`~owl_eval.protocols.ond.metrics.blocks` (pure per-trial building blocks),
:mod:`~owl_eval.protocols.ond.metrics.declared` (the set of registered metrics and their options), the metrics in the order
they are reported: :mod:`~owl_eval.protocols.ond.metrics.detection` (M1, M2, M2.1, per-sample detection),
:mod:`~owl_eval.protocols.ond.metrics.accuracy` (top-k), :mod:`~owl_eval.protocols.ond.metrics.reaction` (M3-M6, against a
baseline), :mod:`~owl_eval.protocols.ond.metrics.open_set` (open-set recognition); and
:mod:`~owl_eval.protocols.ond.metrics.program` (the program metrics). The public names are imported here.
"""

# importing a metric module registers its metrics
from owl_eval.protocols.ond.metrics import accuracy, detection, open_set, reaction  # noqa: F401
from owl_eval.protocols.ond.metrics.blocks import (
    asymptotic_performance_task_improvement,
    correctly_detected,
    detected_early,
    detection_index,
    novelty_detection_performance,
    novelty_reaction_performance,
    open_set_metrics,
    overall_performance_task_improvement,
    rank_of_true_class,
    top_k_accuracy,
    topk_correct,
)
from owl_eval.protocols.ond.metrics.declared import OND, THRESHOLD_GRID, ProgramOptions
from owl_eval.protocols.ond.metrics.detection import (
    DETECTION_METRIC_NAMES,
    GIVEN_REASON,
    M_NDP_NAMES,
    TRIAL_DETECTION_NAMES,
    UNKNOWN_SCORE_NAMES,
    WORLD_CHANGED_NAMES,
    detection_vs_threshold,
)
from owl_eval.protocols.ond.metrics.open_set import auroc, average_precision, fpr_at_tpr, novelty_score_metrics, oscr
from owl_eval.protocols.ond.metrics.program import SERIES, program_metrics, versus_baseline
from owl_eval.protocols.ond.metrics.trial import (
    CONDITIONS,
    DETECTION_THRESHOLD_GRID,
    NRP_WINDOWS,
    ROW_SUM_TOLERANCE,
    OndTrial,
)

#: every declaration of the registered OND metrics, always current (what owl_eval.evaluation.registry reads)
SPECS = OND.specs

__all__ = [
    "OndTrial",
    "program_metrics",
    "detection_vs_threshold",
    "OND",
    "ProgramOptions",
    "THRESHOLD_GRID",
    "versus_baseline",
    "SPECS",
    "SERIES",
    "DETECTION_THRESHOLD_GRID",
    "CONDITIONS",
    "NRP_WINDOWS",
    "ROW_SUM_TOLERANCE",
    "DETECTION_METRIC_NAMES",
    "TRIAL_DETECTION_NAMES",
    "UNKNOWN_SCORE_NAMES",
    "M_NDP_NAMES",
    "WORLD_CHANGED_NAMES",
    "GIVEN_REASON",
    # per-trial building blocks (owl_eval.protocols.ond.metrics.blocks) and open-set functions (owl_eval.protocols.ond.metrics.open_set)
    "detection_index",
    "correctly_detected",
    "detected_early",
    "rank_of_true_class",
    "topk_correct",
    "top_k_accuracy",
    "novelty_detection_performance",
    "novelty_reaction_performance",
    "overall_performance_task_improvement",
    "asymptotic_performance_task_improvement",
    "open_set_metrics",
    "auroc",
    "average_precision",
    "fpr_at_tpr",
    "oscr",
    "novelty_score_metrics",
]
