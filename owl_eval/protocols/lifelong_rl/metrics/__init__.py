"""Lifelong-RL metrics (seed 004), compatible with l2metrics 3.1 on l2logger 1.1 logs.

Public entry points:

- :func:`evaluate_log` — every block, task and lifetime metric of one log (an ``EpisodeLog``, read by
  :mod:`owl_eval.formats.l2logger`: metrics read no files), with optional single-task-expert (STE) logs;
- :func:`evaluate_log_results` — the same flattened into :class:`MetricResults`;
- pure array functions: :func:`smooth`, :func:`saturation`, :func:`time_to_saturation`,
  :func:`terminal_performance`, :func:`recovery_time`, :func:`performance_recovery`,
  :func:`performance_maintenance`, :func:`transfer_values`, :func:`ste_relative_performance`,
  :func:`sample_efficiency`, :func:`time_to_learn`;

Defaults reproduce l2metrics 3.1 (``preset="l2metrics"``); see shared/METRICS.md section 4.
"""

from __future__ import annotations

import math

import numpy as np

from owl_eval.metrics.keys import MetricKey
from owl_eval.metrics.results import NA, MetricResults, MetricSpec, Series
from owl_eval.metrics.validation import MetricInputError, check_option
from owl_eval.protocols.lifelong_rl.metrics.blocks import (
    _segment_rows,
    performance_recovery,
    recovery_time,
    saturation,
    terminal_performance,
    time_to_saturation,
)
from owl_eval.protocols.lifelong_rl.metrics.pipeline import block_table, prepare, runtime_seconds
from owl_eval.protocols.lifelong_rl.metrics.smoothing import smooth, window_lengths
from owl_eval.protocols.lifelong_rl.metrics.ste import (
    curve_saturations,
    sample_efficiency,
    ste_relative_performance,
    time_to_learn,
)
from owl_eval.protocols.lifelong_rl.metrics.transfer import maintenance_values, performance_maintenance, transfer_values

PROTOCOL = "lifelong_rl"
_INF = math.inf

SPECS: list[MetricSpec] = [
    MetricSpec("perf_recovery", PROTOCOL, True, description="−Theil–Sen slope of recovery times (l2metrics)"),
    MetricSpec("perf_maintenance_mrlep", PROTOCOL, True, description="eval − most recent learning eval perf"),
    MetricSpec("perf_maintenance_mrtlp", PROTOCOL, True, description="eval − most recent terminal learning perf"),
    MetricSpec("forward_transfer_ratio", PROTOCOL, True, (0.0, _INF)),
    MetricSpec("backward_transfer_ratio", PROTOCOL, True, (0.0, _INF)),
    MetricSpec("forward_transfer_contrast", PROTOCOL, True, (-1.0, 1.0)),
    MetricSpec("backward_transfer_contrast", PROTOCOL, True, (-1.0, 1.0)),
    MetricSpec("ste_rel_perf", PROTOCOL, True, (0.0, _INF), description="Σ agent / Σ STE over equal prefixes"),
    MetricSpec("sample_efficiency", PROTOCOL, True, (0.0, _INF)),
    MetricSpec("ste_saturation_ratio", PROTOCOL, True, (0.0, _INF)),
    MetricSpec("ste_time_to_saturation_ratio", PROTOCOL, True, (0.0, _INF)),
    MetricSpec("avg_train_perf", PROTOCOL, True),
    MetricSpec("avg_eval_perf", PROTOCOL, True),
    MetricSpec("eval_train_gap", PROTOCOL, True, description="avg_eval_perf − avg_train_perf"),
    MetricSpec("saturation", PROTOCOL, True, description="max of the smoothed training curve"),
    MetricSpec("time_to_saturation", PROTOCOL, False, (0.0, _INF)),
    MetricSpec("normalized_integral", PROTOCOL, True, description="mean of the processed training curve"),
    MetricSpec("recovery_time", PROTOCOL, False, (0.0, _INF)),
    MetricSpec(
        "time_to_learn", PROTOCOL, True, (0.0, _INF), description="STE episodes / agent episodes to 0.9 STE sat"
    ),
]
LIFETIME_NAMES = [s.name for s in SPECS]
_TRANSFER = (
    "forward_transfer_ratio",
    "backward_transfer_ratio",
    "forward_transfer_contrast",
    "backward_transfer_contrast",
)

__all__ = [
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
            "lifetime": {n: NA(reason) for n in LIFETIME_NAMES},
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
    tasks = {}
    for c in order:
        tasks[names[c]] = _task_metrics(c, p, values, bt, keep, ste_train.get(c, []), learn_threshold, kw)
    kept_tasks = list(dict.fromkeys(p.r_task[keep].tolist()))
    regs = np.flatnonzero(keep)
    tv = transfer_values(p.r_task[regs], p.r_train[regs], ~p.r_train[regs], bt["term_perf"][regs], kept_tasks)
    transfer = {m: {(names[s], names[t]): v for (s, t), v in pairs.items()} for m, pairs in tv.items()}
    for m, pairs in transfer.items():
        for t in tasks:
            firsts = [v[0] for (s, _), v in pairs.items() if s == t]
            tasks[t][m] = float(np.mean(firsts)) if firsts else NA(f"no valid (trained {t}, evaluated other) pair")
    lifetime = {}
    agg = np.mean if aggregation == "mean" else np.median
    for name in LIFETIME_NAMES:
        if name in _TRANSFER:
            vals = [v[0] for v in transfer[name].values()]
            why = "no valid task pair: needs a task evaluated before and after another task's training"
        else:
            tv_ = [tasks[t][name] for t in tasks]
            vals = [v for v in tv_ if not isinstance(v, NA) and not math.isnan(v)]
            reasons = [v.reason for v in tv_ if isinstance(v, NA)]
            why = reasons[0] if reasons else "undefined for every task"
        lifetime[name] = float(agg(vals)) if vals else NA(why)
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


def _task_metrics(c, p, values, bt, keep, ste_runs, learn_threshold, kw) -> dict:
    name = p.task_names[c]
    is_task = p.r_task == c
    tw = np.flatnonzero(is_task & p.r_train & p.r_wake)
    out: dict = {}
    rec = bt["recovery_time"][tw[1:]]
    out["recovery_times"] = rec.tolist()
    if len(tw) < 2:
        out["recovery_time"] = NA(f"task {name} is trained in fewer than 2 blocks: no recovery")
    else:
        out["recovery_time"] = float(np.mean(rec))
    out["perf_recovery"] = (
        performance_recovery(rec)
        if len(rec)
        else NA(f"task {name} is trained in fewer than 3 blocks: performance recovery needs 2 recovery times")
    )
    trs = np.flatnonzero(is_task & p.r_train & keep)
    tes = np.flatnonzero(is_task & ~p.r_train & keep)
    for method in ("mrlep", "mrtlp"):
        mv = maintenance_values(trs, tes, bt["term_perf"], method=method)
        out[f"maintenance_val_{method}"] = mv.tolist()
        out[f"perf_maintenance_{method}"] = (
            float(np.mean(mv))
            if len(mv)
            else NA(
                f"task {name}: no evaluation block after a reference evaluation (needs train, eval, ..., eval)"
                if len(tes)
                else f"task {name} has no evaluation block"
            )
        )
    avg_tr, avg_ev = bt["avg_perf"][trs], bt["avg_perf"][tes]
    out["avg_train_perf"] = float(avg_tr.mean()) if len(avg_tr) else NA(f"task {name} has no training block")
    out["avg_eval_perf"] = float(avg_ev.mean()) if len(avg_ev) else NA(f"task {name} has no evaluation block")
    out["eval_train_gap"] = (
        (out["avg_eval_perf"] - out["avg_train_perf"])
        if len(avg_tr) and len(avg_ev)
        else NA(f"task {name} needs both training and evaluation blocks")
    )
    # the task's concatenated training (wake) curve
    rows = _segment_rows(p.r_start[tw], p.r_len[tw])
    tv, te = values[rows], p.exp_num[rows]
    ste_pairs = [(v, e) for v, e, _ in ste_runs]
    curves = curve_saturations([(tv, te)] + ste_pairs, **kw) if len(tv) else None
    if curves is not None:  # len(tv)
        sat, tts, _ = curves[0]
        out["saturation"], out["time_to_saturation"] = sat, float(tts)
        out["normalized_integral"] = float(np.mean(tv))
    else:
        for k in ("saturation", "time_to_saturation", "normalized_integral"):
            out[k] = NA(f"task {name} has no training (wake) block")
    out["ste_rel_perf"] = (
        ste_relative_performance(tv, [v for v, _ in ste_pairs]) if ste_pairs else NA(f"no STE log for task {name}")
    )
    if ste_pairs:
        se = sample_efficiency(tv, te, ste_pairs, curves=curves, **kw)
        out["sample_efficiency"] = se["sample_efficiency"]
        out["ste_saturation_ratio"] = se["saturation_ratio"]
        out["ste_time_to_saturation_ratio"] = se["time_to_saturation_ratio"]
        out["sample_efficiency_vals"] = se["values"]
        out["time_to_learn"] = (
            time_to_learn(tv, te, ste_pairs, learn_threshold=learn_threshold, curves=curves, **kw)
            if len(tv)
            else NA(f"task {name} has no training (wake) block")
        )
    else:
        for k in ("sample_efficiency", "ste_saturation_ratio", "ste_time_to_saturation_ratio", "time_to_learn"):
            out[k] = NA(f"no STE log for task {name}")
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
