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
from owl_eval.protocols.lifelong_rl.metrics.pipeline import block_table, prepare, runtime_seconds
from owl_eval.protocols.lifelong_rl.metrics.smoothing import smooth, window_lengths
from owl_eval.protocols.lifelong_rl.metrics.ste import sample_efficiency, ste_relative_performance, time_to_learn
from owl_eval.protocols.lifelong_rl.metrics.transfer import maintenance_values, performance_maintenance, transfer_values

PROTOCOL = "lifelong_rl"

#: every declaration of the registered lifelong-RL metrics, always current (what owl_eval.evaluation.registry reads)
SPECS = LIFELONG_RL.specs
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
) -> dict:
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
    check_option("preset", preset, ("l2metrics",))
    check_option("aggregation", aggregation, ("mean", "median"))
    if not 0 < learn_threshold:
        raise MetricInputError(f"learn_threshold: expected a positive number, got {learn_threshold!r}")
    p, values, ste_train, rng = prepare(
        log,
        tuple(ste_logs),
        perf_measure=perf_measure,
        variant_mode=variant_mode,
        smoothing=smoothing,
        smoothing_fraction=smoothing_fraction,
        window_length=window_length,
        max_window=max_window,
        smooth_eval=smooth_eval,
        normalization=normalization,
        data_range=data_range,
        clamp_outliers=clamp_outliers,
    )
    if len(values) == 0:
        reason = f"the log has no complete episode with a {perf_measure!r} value"
        return {
            "lifetime": {n: NA(reason) for n in lifetime_names()},
            "tasks": {},
            "blocks": _empty_blocks(),
            "transfer": {},
            "info": {"num_lx": 0, "num_ex": 0},
            "series": {},
        }
    kw = dict(fraction=smoothing_fraction, max_window=max_window)
    bt = block_table(p, values, **kw)
    names = p.task_names
    R = len(p.r_start)
    # l2metrics' task order: tasks by first training block, then evaluation-only tasks
    order = list(dict.fromkeys(np.concatenate([p.r_task[p.r_train], p.r_task[~p.r_train]]).tolist()))
    # sleep rule: when any regime is a sleep block, evaluation uses only sleep evaluations
    keep = ~(~p.r_train & p.r_wake) if (~p.r_wake).any() else np.ones(R, bool)
    kept_tasks = list(dict.fromkeys(p.r_task[keep].tolist()))
    regs = np.flatnonzero(keep)
    tv = transfer_values(p.r_task[regs], p.r_train[regs], ~p.r_train[regs], bt["term_perf"][regs], kept_tasks)
    transfer = {m: {(names[s], names[t]): v for (s, t), v in pairs.items()} for m, pairs in tv.items()}
    tasks = {}
    for c in order:
        task = TaskCurves.of(c, p, values, bt, keep, ste_train.get(c, []), learn_threshold, kw)
        tasks[task.name] = task_values(task, transfer)
    lifetime = lifetime_values(tasks, transfer, np.mean if aggregation == "mean" else np.median)
    blocks = {
        "regime_num": np.arange(R),
        "block_num": p.r_block,
        "block_type": np.where(p.r_train, "train", "test"),
        "block_subtype": np.where(p.r_wake, "wake", "sleep"),
        "task_name": np.array([names[c] for c in p.r_task], dtype=object),
        "task_params": p.log["task_params"][p.r_start],
        "length": p.r_len,
        "exp_num_start": p.exp_num[p.r_start],
        **bt,
        # was the regime smoothed before normalisation (train blocks of >= 15 episodes by default)?
        "smoothed": (p.r_train | smooth_eval)
        & (smoothing != "none")
        & (window_lengths(p.r_len, window_len=window_length, fraction=smoothing_fraction, max_window=max_window) >= 3),
    }
    info = {
        "task_order": [names[c] for c in order],
        "metrics_column": perf_measure,
        "num_lx": int(p.r_len[p.r_train].sum()),
        "num_ex": int(p.r_len[~p.r_train].sum()),
        "min": float(values.min()),
        "max": float(values.max()),
        "runtime": runtime_seconds(p.log["timestamp"]),
        "normalization_data_range": None
        if rng is None or normalization == "none"
        else {names[c]: {"min": float(rng[0][c]), "max": float(rng[1][c])} for c in range(len(names))},
        **{k: p.log.scenario_info.get(k, "") for k in ("complexity", "difficulty", "scenario_type")},
    }
    out = {"lifetime": lifetime, "tasks": tasks, "blocks": blocks, "transfer": transfer, "info": info}
    if series:
        out["series"] = {
            perf_measure: Series(p.exp_num, p.values),
            f"{perf_measure}_processed": Series(p.exp_num, values),
        }
    return out


def _empty_blocks() -> dict:
    z = np.zeros(0)
    return {
        k: z
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


def results_from_evaluated(res: dict) -> MetricResults:
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
