"""The lifelong-RL metrics, each declared on the function that computes it for one task (:mod:`.declared`).

Declared in the order the lifetime values are reported (``SPECS``: l2metrics' lifetime summary, then the seed's
metrics); ``task_order`` keeps the order of a task's values. The array work is in :mod:`.blocks`,
:mod:`.transfer` and :mod:`.ste`; the functions here read one task's part of it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from owl_eval.metrics.declare import NAIf
from owl_eval.metrics.results import NA
from owl_eval.protocols.lifelong_rl.metrics.blocks import performance_recovery
from owl_eval.protocols.lifelong_rl.metrics.declared import LIFELONG_RL, TaskCurves
from owl_eval.protocols.lifelong_rl.metrics.ste import sample_efficiency, ste_relative_performance, time_to_learn
from owl_eval.protocols.lifelong_rl.metrics.transfer import maintenance_values

_INF = math.inf

NO_CURVE = NAIf("task {task} has no training (wake) block", lambda task, **_: task.saturations is None)


@LIFELONG_RL.metric(
    "perf_recovery",
    higher_is_better=True,
    title="Performance recovery",
    description="−Theil–Sen slope of recovery times (l2metrics)",
    needs=("task",),
    na=(
        NAIf(
            "task {task} is trained in fewer than 3 blocks: performance recovery needs 2 recovery times",
            lambda task: len(task.wake_trainings) < 2,
        ),
    ),
    task_order=1,
)
def _perf_recovery(task: TaskCurves) -> float | NA:
    """−(Theil–Sen slope) of the task's recovery times (:func:`~.blocks.performance_recovery`)."""
    return performance_recovery(task.recovery_times)


@LIFELONG_RL.family(
    LIFELONG_RL.spec(
        "perf_maintenance_mrlep",
        True,
        title="Performance maintenance (MRLEP)",
        description="eval − most recent learning eval perf",
    ),
    LIFELONG_RL.spec("perf_maintenance_mrtlp", True, description="eval − most recent terminal learning perf"),
    needs=("task",),
    task_order=2,
)
def _perf_maintenance(task: TaskCurves) -> dict[str, Any]:
    """Mean of the task's :func:`~.transfer.maintenance_values` by each method, with the values themselves
    (``maintenance_val_<method>``, not metrics)."""
    out: dict[str, Any] = {}
    for method in ("mrlep", "mrtlp"):
        mv = maintenance_values(task.trainings, task.evaluations, task.blocks["term_perf"], method=method)
        out[f"maintenance_val_{method}"] = mv.tolist()
        out[f"perf_maintenance_{method}"] = (
            float(np.mean(mv))
            if len(mv)
            else NA(
                f"task {task.name}: no evaluation block after a reference evaluation (needs train, eval, ..., eval)"
                if len(task.evaluations)
                else f"task {task.name} has no evaluation block"
            )
        )
    return out


def _transfer_lifetime(transfer: Mapping[str, Mapping], aggregate: Callable[..., Any]) -> dict[str, float | NA]:
    """Lifetime transfer: ``aggregate`` over (source, target) pairs of each pair's first value (l2metrics)."""
    out: dict[str, float | NA] = {}
    for name, pairs in transfer.items():
        firsts = [values[0] for values in pairs.values()]
        out[name] = (
            float(aggregate(firsts))
            if firsts
            else NA("no valid task pair: needs a task evaluated before and after another task's training")
        )
    return out


@LIFELONG_RL.family(
    LIFELONG_RL.spec("forward_transfer_ratio", True, (0.0, _INF), title="Forward transfer (ratio)"),
    LIFELONG_RL.spec("backward_transfer_ratio", True, (0.0, _INF), title="Backward transfer (ratio)"),
    LIFELONG_RL.spec("forward_transfer_contrast", True, (-1.0, 1.0)),
    LIFELONG_RL.spec("backward_transfer_contrast", True, (-1.0, 1.0)),
    needs=("task", "transfer"),
    task_order=8,
    lifetime=_transfer_lifetime,
)
def _transfer(task: TaskCurves, transfer: Mapping[str, Mapping]) -> dict[str, float | NA]:
    """The task as the trained one: mean over the tasks evaluated around its training of each pair's first
    transfer value (:func:`~.transfer.transfer_values`)."""
    out: dict[str, float | NA] = {}
    for name, pairs in transfer.items():
        firsts = [values[0] for (source, _), values in pairs.items() if source == task.name]
        out[name] = float(np.mean(firsts)) if firsts else NA(f"no valid (trained {task.name}, evaluated other) pair")
    return out


@LIFELONG_RL.metric(
    "ste_rel_perf",
    higher_is_better=True,
    bounds=(0.0, _INF),
    title="Relative performance vs STE",
    description="Σ agent / Σ STE over equal prefixes",
    needs=("task", "ste"),
    task_order=5,
)
def _ste_rel_perf(task: TaskCurves, ste: list[tuple[np.ndarray, np.ndarray]]) -> float | NA:
    """:func:`~.ste.ste_relative_performance` of the task's training curve against its STE runs."""
    return ste_relative_performance(task.curve, [values for values, _ in ste])


@LIFELONG_RL.family(
    LIFELONG_RL.spec("sample_efficiency", True, (0.0, _INF), title="Sample efficiency"),
    LIFELONG_RL.spec("ste_saturation_ratio", True, (0.0, _INF)),
    LIFELONG_RL.spec("ste_time_to_saturation_ratio", True, (0.0, _INF)),
    needs=("task", "ste"),
    task_order=6,
)
def _sample_efficiency(task: TaskCurves, ste: list[tuple[np.ndarray, np.ndarray]]) -> dict[str, Any]:
    """:func:`~.ste.sample_efficiency` against the task's STE runs, with the value of each run
    (``sample_efficiency_vals``, not a metric)."""
    se = sample_efficiency(task.curve, task.curve_exp_num, ste, curves=task.saturations, **task.smoothing)
    return {
        "sample_efficiency": se["sample_efficiency"],
        "ste_saturation_ratio": se["saturation_ratio"],
        "ste_time_to_saturation_ratio": se["time_to_saturation_ratio"],
        "sample_efficiency_vals": se["values"],
    }


@LIFELONG_RL.family(
    LIFELONG_RL.spec("avg_train_perf", True),
    LIFELONG_RL.spec("avg_eval_perf", True),
    LIFELONG_RL.spec("eval_train_gap", True, description="avg_eval_perf − avg_train_perf"),
    needs=("task",),
    task_order=3,
)
def _average_performance(task: TaskCurves) -> dict[str, float | NA]:
    """Mean over the task's training (evaluation) blocks of each block's average performance, and their gap."""
    train, evaluation = task.blocks["avg_perf"][task.trainings], task.blocks["avg_perf"][task.evaluations]
    avg_train = float(train.mean()) if len(train) else None
    avg_eval = float(evaluation.mean()) if len(evaluation) else None
    return {
        "avg_train_perf": NA(f"task {task.name} has no training block") if avg_train is None else avg_train,
        "avg_eval_perf": NA(f"task {task.name} has no evaluation block") if avg_eval is None else avg_eval,
        "eval_train_gap": (
            NA(f"task {task.name} needs both training and evaluation blocks")
            if avg_train is None or avg_eval is None
            else avg_eval - avg_train
        ),
    }


@LIFELONG_RL.family(
    LIFELONG_RL.spec("saturation", True, description="max of the smoothed training curve"),
    LIFELONG_RL.spec("time_to_saturation", False, (0.0, _INF)),
    LIFELONG_RL.spec("normalized_integral", True, description="mean of the processed training curve"),
    needs=("task",),
    na=(NO_CURVE,),
    task_order=4,
)
def _saturation(task: TaskCurves) -> dict[str, float]:
    """Saturation and time to saturation of the task's smoothed training curve, and the curve's mean."""
    assert task.saturations is not None  # NO_CURVE
    saturation, time_to_saturation, _ = task.saturations[0]
    return {
        "saturation": saturation,
        "time_to_saturation": float(time_to_saturation),
        "normalized_integral": float(np.mean(task.curve)),
    }


@LIFELONG_RL.family(
    LIFELONG_RL.spec("recovery_time", False, (0.0, _INF)),
    needs=("task",),
    task_order=0,
)
def _recovery_time(task: TaskCurves) -> dict[str, Any]:
    """Mean recovery time of the task's training (wake) blocks after its first, with the times themselves
    (``recovery_times``, not a metric: listed also when there are none)."""
    times = task.recovery_times
    return {
        "recovery_times": times.tolist(),
        "recovery_time": (
            float(np.mean(times))
            if len(task.wake_trainings) >= 2
            else NA(f"task {task.name} is trained in fewer than 2 blocks: no recovery")
        ),
    }


@LIFELONG_RL.metric(
    "time_to_learn",
    higher_is_better=True,
    bounds=(0.0, _INF),
    description="STE episodes / agent episodes to 0.9 STE sat",
    needs=("task", "ste"),
    na=(NO_CURVE,),
    task_order=7,
)
def _time_to_learn(task: TaskCurves, ste: list[tuple[np.ndarray, np.ndarray]]) -> float | NA:
    """:func:`~.ste.time_to_learn`: STE episodes / agent episodes to ``learn_threshold`` × the STE's saturation."""
    return time_to_learn(
        task.curve,
        task.curve_exp_num,
        ste,
        learn_threshold=task.learn_threshold,
        curves=task.saturations,
        **task.smoothing,
    )
