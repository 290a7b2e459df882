"""What a run's values are called in MLflow: the key of every reported metric (:func:`mlflow_key`, the one place a
:class:`~owl_eval.metrics.keys.MetricKey` becomes MLflow text) and the tags owl-eval puts on runs.

Each run also gets ``metric_keys.json`` (:mod:`owl_eval.tracking.key_index`), every MLflow key it logged with the
fields of its metric key and its declaration, which is how stored runs are read back.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable

from owl_eval.metrics.keys import MetricKey
from owl_eval.tracking.key_index import LoggedKey

SWEEP_DIR_TAG = "owl_eval.sweep_dir"
CONFIG_HASH_TAG = "owl_eval.config_hash"
RUN_KIND_TAG = "owl_eval.kind"
# MLflow's own tag naming a run's parent (mlflow.utils.mlflow_tags.MLFLOW_PARENT_RUN_ID), spelled here: no import
PARENT_TAG = "mlflow.parentRunId"
SHARED_VIEW_TAG_PREFIX = "mlflow.sharedViewState."  # an experiment tag the MLflow UI reads as a saved runs-table view
REUSED_TAG_PREFIX = "owl_eval.reused."  # on a sweep parent: a finished run a resumed sweep reused (+ its id)
TRUNCATED_PARAMS_TAG = "owl_eval.truncated_params"
DETAIL_PREFIX = "detail/"
THRESHOLD_PREFIX = "threshold/"
SERIES_KEY_SUFFIX = "_by_step"  # a series logged beside a scalar of the same name
_INVALID_KEY_CHARS = re.compile(r"[^0-9A-Za-z_\-. /]")


def metric_key(text: str) -> str:
    """``text`` with only the characters MLflow accepts in keys (letters, digits, ``_ - . / space``): ``@`` becomes
    ``_at_``, anything else ``_``. For text that is already an MLflow key but for its characters (a comparison
    group's statistics); the MLflow key of a reported metric is :func:`mlflow_key`'s."""
    return _INVALID_KEY_CHARS.sub("_", text.replace("@", "_at_"))


def mlflow_key(key: MetricKey, protocol: str | None = None, *, beside_scalar: bool = False) -> str:
    """The MLflow key of a reported metric: the one place a :class:`MetricKey` becomes MLflow text.

    - a point of a threshold sweep (``threshold`` set) and the sweep's series (``axis="threshold"``): the sweep's
      logged table, ``threshold/<name>`` (``threshold/baseline/<name>`` for the baseline agent's);
    - a timing: ``time/<phase>``;
    - with ``protocol`` None or not installed: the reported name;
    - the baseline agent's: ``baseline/<the rest>``;
    - the metric itself when the protocol's descriptor lists it in its headline: the reported name;
    - anything else: ``detail/<reported name>``.

    Characters MLflow refuses are replaced (:func:`metric_key`: ``@`` in a task's name becomes ``_at_``).
    ``beside_scalar``: a series whose scalar of the same name is logged too, under ``<key>_by_step`` (never a
    headline key: MLflow would hold two values at step 0).
    """
    from owl_eval.evaluation.registry import headline_rank
    from owl_eval.protocols import known

    if key.threshold is not None or key.axis == "threshold":
        swept = key.with_fields(agent="", threshold=None, axis=None)
        return THRESHOLD_PREFIX + (f"{key.agent}/" if key.agent else "") + metric_key(swept)
    suffix = SERIES_KEY_SUFFIX if beside_scalar else ""
    if key.timing or protocol is None or not known(protocol):
        return metric_key(key) + suffix
    if key.agent:
        return f"{key.agent}/" + metric_key(key.with_fields(agent="")) + suffix
    if not beside_scalar and headline_rank(protocol, key) is not None:
        return metric_key(key)
    return DETAIL_PREFIX + metric_key(key) + suffix


def logged_as(protocol: str | None) -> Callable[[MetricKey], str]:
    """:func:`mlflow_key` for one protocol's keys (what an evaluation's ``run_tags`` names keys by)."""
    return functools.partial(mlflow_key, protocol=protocol)


def logged_key_entry(key: MetricKey, protocol: str | None, *, series: bool, beside_scalar: bool = False) -> LoggedKey:
    """The ``metric_keys.json`` entry of ``key`` logged under :func:`mlflow_key` (``series``: logged as a series or a
    table)."""
    from owl_eval.evaluation.registry import headline_rank, is_series, spec_for
    from owl_eval.protocols import known

    spec = spec_for(protocol, key) if protocol and known(protocol) else None
    rank = None
    if spec is not None and protocol is not None and not beside_scalar:
        rank = headline_rank(protocol, key)
    return LoggedKey(
        key=key,
        declared=spec is not None,
        direction=spec.direction if spec is not None else "none",
        bounds=spec.bounds if spec is not None else (-float("inf"), float("inf")),
        series=series or (spec is not None and protocol is not None and is_series(protocol, key)),
        headline_rank=rank,
        title=spec.display_name if spec is not None and rank is not None else "",
    )


def shared_view_path(experiment_id: str, key: str) -> str:
    """The MLflow UI's path of a saved runs-table view (:meth:`TrackedRun.share_runs_view`)."""
    return f"#/experiments/{experiment_id}/runs?viewStateShareKey={key}"
