"""Lifelong-RL metrics (seed 004), compatible with l2metrics 3.1 on l2logger 1.1 logs.

Public entry points:

- :func:`evaluate_log` — every block, task and lifetime metric of one log (an ``EpisodeLog``, read by
  :mod:`owl_eval.formats.l2logger`: metrics read no files), with optional single-task-expert (STE) logs;
- :func:`evaluate_log_results` — the same flattened into :class:`MetricResults`;
- pure array functions: :func:`smooth`, :func:`saturation`, :func:`time_to_saturation`,
  :func:`terminal_performance`, :func:`recovery_time`, :func:`performance_recovery`,
  :func:`performance_maintenance`, :func:`transfer_values`, :func:`ste_relative_performance`,
  :func:`sample_efficiency`, :func:`time_to_learn`;
- :data:`LIFELONG_RL` — the registered metrics, each a function of one task declared where it is computed
  (:mod:`~owl_eval.protocols.lifelong_rl.metrics.task_metrics`; the set and its conventions:
  :mod:`~owl_eval.protocols.lifelong_rl.metrics.declared`); ``SPECS`` lists their declarations. Adding a metric is
  one decorated function.

Defaults reproduce l2metrics 3.1 (``preset="l2metrics"``); see shared/METRICS.md section 4.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from owl_eval.metrics.keys import MetricKey
from owl_eval.metrics.results import NA, MetricResults, Series
from owl_eval.metrics.validation import MetricInputError, check_option

# importing the metric module registers its metrics
from owl_eval.protocols.lifelong_rl.metrics import task_metrics  # noqa: F401
from owl_eval.protocols.lifelong_rl.metrics.blocks import (
    performance_recovery,
    recovery_time,
    saturation,
    terminal_performance,
    time_to_saturation,
)
from owl_eval.protocols.lifelong_rl.metrics.declared import (
    LIFELONG_RL,
    TaskCurves,
    lifetime_names,
    lifetime_values,
    task_values,
)
from owl_eval.protocols.lifelong_rl.metrics.pipeline import (
    BlockMetrics,
    PreparedLog,
    Preprocessed,
    Smoothing,
    block_table,
    prepare,
    runtime_seconds,
)
from owl_eval.protocols.lifelong_rl.metrics.smoothing import smooth
from owl_eval.protocols.lifelong_rl.metrics.ste import sample_efficiency, ste_relative_performance, time_to_learn
from owl_eval.protocols.lifelong_rl.metrics.transfer import maintenance_values, performance_maintenance, transfer_values

PROTOCOL = "lifelong_rl"

#: every declaration of the registered lifelong-RL metrics, always current (what owl_eval.evaluation.registry reads)
SPECS = LIFELONG_RL.specs
#: transfer values by metric, then by (trained task, evaluated task) name
TransferValues = dict[str, dict[tuple[str, str], list[float]]]
#: the lifetime names of the built-in metrics (``lifetime_names()`` is always current)
LIFETIME_NAMES = lifetime_names()

__all__ = [
    "LIFELONG_RL",
    "SPECS",
    "LIFETIME_NAMES",
    "evaluate_log",
    "evaluate_log_results",
    "smooth",
    "saturation",
    "time_to_saturation",
    "terminal_performance",
    "recovery_time",
    "performance_recovery",
    "performance_maintenance",
    "maintenance_values",
    "transfer_values",
    "ste_relative_performance",
    "sample_efficiency",
    "time_to_learn",
]


def evaluate_log(
    log,
    *,
    ste_logs=(),
    perf_measure: str = "reward",
    preset: str = "l2metrics",
    smoothing: str = "flat",
    smoothing_fraction: float = 0.2,
    window_length: int | None = None,
    max_window: int = 100,
    smooth_eval: bool = False,
    normalization: str = "task",
    data_range: dict | None = None,
    clamp_outliers: bool = False,
    aggregation: str = "mean",
    learn_threshold: float = 0.9,
    variant_mode: str = "aware",
    series: bool = True,
) -> dict[str, Any]:
    """Block, task and lifetime lifelong-RL metrics of one log, as l2metrics 3.1 ``MetricsReport`` computes them.

    ``log``: an ``EpisodeLog`` (``owl_eval.formats.l2logger.read_log`` reads a directory); ``ste_logs``: STE logs (
    EpisodeLogs, each training exactly one task). Options mirror l2metrics' (``smoothing`` = its
    ``smoothing_method``, ``window_length``, ``normalization`` = ``normalization_method``, ``aggregation`` =
    ``aggregation_method``, ``variant_mode``, ``clamp_outliers``, ``data_range``); ``smoothing_fraction``
    is the 0.2 in the default window ``min(int(0.2 n), 100)`` (the seed's ``s``).

    Returns ``{"lifetime": {name: float | NA}, "tasks": {task: {name: value}}, "blocks": {column: array},
    "transfer": {metric: {(src, tgt): [values]}}, "info": {...}, "series": {name: Series}}``.
    Lifetime values are the mean (or median) over tasks of each task's value; transfer lifetime values are
    over (source, target) pairs of each pair's first value, as l2metrics does.
    """
    _check_scoring_options(preset, aggregation, learn_threshold)
    smoothing_settings = Smoothing(smoothing, smoothing_fraction, window_length, max_window, smooth_eval)
    processed = prepare(
        log,
        tuple(ste_logs),
        perf_measure=perf_measure,
        variant_mode=variant_mode,
        smoothing=smoothing_settings,
        normalization=normalization,
        data_range=data_range,
        clamp_outliers=clamp_outliers,
    )
    if len(processed.values) == 0:
        return _evaluation_without_episodes(perf_measure)
    regimes = processed.log
    block_metrics = block_table(regimes, processed.values, **smoothing_settings.saturation)
    kept = _evaluation_rule(regimes)
    order = _task_order(regimes)
    transfer = _transfer_by_task_names(regimes, block_metrics, kept)
    tasks = _values_of_each_task(processed, order, block_metrics, kept, transfer, learn_threshold, smoothing_settings)
    evaluated: dict[str, Any] = {
        "lifetime": lifetime_values(tasks, transfer, AGGREGATIONS[aggregation]),
        "tasks": tasks,
        "blocks": _block_columns(regimes, block_metrics, smoothing_settings),
        "transfer": transfer,
        "info": _log_info(processed, order, perf_measure, normalization),
    }
    if series:
        evaluated["series"] = _episode_series(processed, perf_measure)
    return evaluated


#: how the lifetime value of a metric is made from its tasks' values (``aggregation``)
AGGREGATIONS: dict[str, Callable[..., Any]] = {"mean": np.mean, "median": np.median}


def _check_scoring_options(preset: str, aggregation: str, learn_threshold: float) -> None:
    """Refuse the options that only scoring reads (preprocessing checks its own)."""
    check_option("preset", preset, ("l2metrics",))
    check_option("aggregation", aggregation, tuple(AGGREGATIONS))
    if not 0 < learn_threshold:
        raise MetricInputError(f"learn_threshold: expected a positive number, got {learn_threshold!r}")


def _evaluation_without_episodes(perf_measure: str) -> dict[str, Any]:
    """What a log without one complete episode with a ``perf_measure`` value scores: every lifetime metric N/A."""
    reason = f"the log has no complete episode with a {perf_measure!r} value"
    return {
        "lifetime": {name: NA(reason) for name in lifetime_names()},
        "tasks": {},
        "blocks": _empty_blocks(),
        "transfer": {},
        "info": {"num_lx": 0, "num_ex": 0},
        "series": {},
    }


def _task_order(regimes: PreparedLog) -> list[int]:
    """l2metrics' task order (task codes): tasks by first training block, then evaluation-only tasks."""
    trained_first = np.concatenate([regimes.r_task[regimes.r_train], regimes.r_task[~regimes.r_train]])
    return list(dict.fromkeys(trained_first.tolist()))


def _evaluation_rule(regimes: PreparedLog) -> np.ndarray:
    """The regimes the metrics read (a mask over regimes): when any regime is a sleep block, evaluations count
    only in sleep blocks (l2metrics' sleep rule); every regime otherwise."""
    if (~regimes.r_wake).any():
        return ~(~regimes.r_train & regimes.r_wake)
    return np.ones(len(regimes.r_start), bool)


def _transfer_by_task_names(regimes: PreparedLog, block_metrics: BlockMetrics, kept: np.ndarray) -> TransferValues:
    """Forward/backward transfer values of the kept regimes, by metric, then by (trained, evaluated) task name."""
    kept_tasks = list(dict.fromkeys(regimes.r_task[kept].tolist()))
    kept_regimes = np.flatnonzero(kept)
    is_train = regimes.r_train[kept_regimes]
    by_task_code = transfer_values(
        regimes.r_task[kept_regimes], is_train, ~is_train, block_metrics["term_perf"][kept_regimes], kept_tasks
    )
    names = regimes.task_names
    return {
        metric: {(names[source], names[target]): values for (source, target), values in pairs.items()}
        for metric, pairs in by_task_code.items()
    }


def _values_of_each_task(
    processed: Preprocessed,
    order: list[int],
    block_metrics: BlockMetrics,
    kept: np.ndarray,
    transfer: TransferValues,
    learn_threshold: float,
    smoothing: Smoothing,
) -> dict[str, dict[str, Any]]:
    """Every registered metric of each task (by task name, in ``order``)."""
    tasks: dict[str, dict[str, Any]] = {}
    for code in order:
        task = TaskCurves.of(
            code,
            processed.log,
            processed.values,
            block_metrics,
            kept,
            processed.ste_training.get(code, []),
            learn_threshold,
            smoothing.saturation,
        )
        tasks[task.name] = task_values(task, transfer)
    return tasks


def _block_columns(regimes: PreparedLog, block_metrics: BlockMetrics, smoothing: Smoothing) -> dict[str, np.ndarray]:
    """The block table l2metrics reports: one row per regime, its description then its metrics."""
    names = regimes.task_names
    return {
        "regime_num": np.arange(len(regimes.r_start)),
        "block_num": regimes.r_block,
        "block_type": np.where(regimes.r_train, "train", "test"),
        "block_subtype": np.where(regimes.r_wake, "wake", "sleep"),
        "task_name": np.array([names[c] for c in regimes.r_task], dtype=object),
        "task_params": regimes.log["task_params"][regimes.r_start],
        "length": regimes.r_len,
        "exp_num_start": regimes.exp_num[regimes.r_start],
        **block_metrics,
        # whether the regime is smoothed before normalisation (train blocks of >= 15 episodes by default)
        "smoothed": (regimes.r_train | smoothing.evaluations)
        & (smoothing.method != "none")
        & (smoothing.windows(regimes.r_len) >= 3),
    }


def _log_info(processed: Preprocessed, order: list[int], perf_measure: str, normalization: str) -> dict[str, Any]:
    """What l2metrics reports about the log: task order, episode counts, value extremes, runtime, the
    normalisation range of each task and the scenario's description."""
    regimes, values, value_range = processed.log, processed.values, processed.value_range
    names = regimes.task_names
    return {
        "task_order": [names[c] for c in order],
        "metrics_column": perf_measure,
        "num_lx": int(regimes.r_len[regimes.r_train].sum()),
        "num_ex": int(regimes.r_len[~regimes.r_train].sum()),
        "min": float(values.min()),
        "max": float(values.max()),
        "runtime": runtime_seconds(regimes.log["timestamp"]),
        "normalization_data_range": None
        if value_range is None or normalization == "none"
        else {
            names[c]: {"min": float(value_range.low[c]), "max": float(value_range.high[c])} for c in range(len(names))
        },
        **{k: regimes.log.scenario_info.get(k, "") for k in ("complexity", "difficulty", "scenario_type")},
    }


def _episode_series(processed: Preprocessed, perf_measure: str) -> dict[str, Series]:
    """The per-episode series (step = exp_num): the raw ``perf_measure`` values and the processed ones."""
    regimes = processed.log
    return {
        perf_measure: Series(regimes.exp_num, regimes.values),
        f"{perf_measure}_processed": Series(regimes.exp_num, processed.values),
    }


def _empty_blocks() -> dict[str, np.ndarray]:
    no_rows = np.zeros(0)
    return {
        k: no_rows
        for k in (
            "regime_num",
            "block_num",
            "block_type",
            "block_subtype",
            "task_name",
            "task_params",
            "length",
            "saturation",
            "eps_to_sat",
            "term_perf",
            "eps_to_term_perf",
            "avg_perf",
            "recovery_time",
            "smoothed",
        )
    }


def evaluate_log_results(log, **options) -> MetricResults:
    """:func:`evaluate_log` flattened: lifetime values under their names, per-task values as
    ``task/<task>/<metric>``, N/A reasons in ``na``, and the per-episode series (step = exp_num)."""
    return results_from_evaluated(evaluate_log(log, **options))


def results_from_evaluated(res: dict[str, Any]) -> MetricResults:
    """The output of :func:`evaluate_log` as :class:`MetricResults` (see :func:`evaluate_log_results`)."""
    out = MetricResults()
    for k, v in res["lifetime"].items():
        out.set(k, v)
    for task, metrics in res["tasks"].items():
        for k, v in metrics.items():
            if isinstance(v, (int, float, NA)) and not isinstance(v, bool):
                out.set(MetricKey(k, task=task), v)
    for k, s in res.get("series", {}).items():
        out.series[k] = s
    return out
