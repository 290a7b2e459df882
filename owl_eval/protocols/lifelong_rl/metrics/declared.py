"""The registered lifelong-RL metrics (:data:`LIFELONG_RL`), what their functions receive (:class:`TaskCurves`) and
how a task's values and the lifetime values are made from them.

A lifelong-RL metric is a value of one task: a pure function of ``task`` (the task's regimes, block table and
training curve, :class:`TaskCurves`), ``ste`` (the task's single-task-expert runs, None without an STE log) and
``transfer`` (the transfer values of every (trained, evaluated) task pair), whichever it ``needs``, returning the
task's value or ``NA(reason)``. :func:`~owl_eval.protocols.lifelong_rl.metrics.evaluate_log` computes every
registered metric for every task (:func:`task_values`) and reports each name's lifetime value, the mean (or
median, ``aggregation``) over the tasks that have a number (:func:`lifetime_values`)::

    from owl_eval.metrics.declare import NAIf
    from owl_eval.protocols.lifelong_rl.metrics import LIFELONG_RL

    @LIFELONG_RL.metric("best_eval_perf", higher_is_better=True, needs=("task",),
                        na=(NAIf("task {task} has no evaluation block", lambda task: len(task.evaluations) == 0),),
                        description="best average performance of an evaluation block of the task")
    def _best_eval_perf(task):
        return float(task.blocks["avg_perf"][task.evaluations].max())

Conventions of this set, on top of :mod:`owl_eval.metrics.declare`:

- ``{task}`` in the reason of an N/A rule (an :class:`~owl_eval.metrics.declare.NAIf`, or the set's ``missing``
  reason of an input) is the task's name: ``no STE log for task {task}`` reads ``no STE log for task cartpole``.
- A family may return, besides its declared names, per-task lists that are not metrics (``recovery_times``,
  ``maintenance_val_mrlep``, ``sample_efficiency_vals``): they stay in the task's values and are not aggregated.
- ``task_order=<int>`` (an extra of the decorator): where the metric's values come among a task's values; each
  built-in metric sets one, which fixes the order of a task's values in reports and logs, and a metric without
  one comes after them, in declaration order.
- ``lifetime=<function>`` (an extra): the lifetime values of a metric that is not aggregated over tasks,
  ``lifetime(transfer=..., aggregate=np.mean or np.median) -> {name: value}`` (the transfer metrics: over task
  pairs, as l2metrics does).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from owl_eval.metrics.declare import Declared, MetricSet
from owl_eval.metrics.results import NA
from owl_eval.protocols.lifelong_rl.metrics.blocks import _segment_rows
from owl_eval.protocols.lifelong_rl.metrics.ste import curve_saturations

__all__ = ["LIFELONG_RL", "TASK", "TaskCurves", "task_values", "lifetime_values", "lifetime_names"]

#: the placeholder of the task's name in an N/A rule's reason
TASK = "{task}"

LIFELONG_RL = MetricSet(
    "lifelong_rl",
    missing={"ste": "no STE log for task {task}"},
    order=("owl_eval.protocols.lifelong_rl.metrics.task_metrics",),
)


@dataclass(frozen=True, eq=False)
class TaskCurves:
    """One task of a log as its metrics read it, built once per task by ``evaluate_log`` (:meth:`of`).

    Regime numbers index the log's regime table (``blocks``, log order). ``trainings`` and ``evaluations`` are
    those the evaluation rule keeps (when any regime is a sleep block, only sleep evaluations count).
    ``curve``/``curve_exp_num``: the task's training (wake) rows concatenated, processed values and exp_num;
    ``saturations``: :func:`~owl_eval.protocols.lifelong_rl.metrics.ste.curve_saturations` of ``curve`` then of
    each STE run (None when the task has no training (wake) row).
    """

    name: str
    wake_trainings: np.ndarray
    trainings: np.ndarray
    evaluations: np.ndarray
    blocks: Mapping[str, np.ndarray]
    values: np.ndarray
    curve: np.ndarray
    curve_exp_num: np.ndarray
    ste_runs: list[tuple[np.ndarray, np.ndarray]]
    saturations: list | None
    learn_threshold: float
    fraction: float
    max_window: int

    @property
    def smoothing(self) -> dict[str, Any]:
        """The saturation smoothing settings (``fraction``, ``max_window``) as keyword arguments."""
        return {"fraction": self.fraction, "max_window": self.max_window}

    @property
    def recovery_times(self) -> np.ndarray:
        """Recovery time of each training (wake) block of the task after its first."""
        return self.blocks["recovery_time"][self.wake_trainings[1:]]

    @classmethod
    def of(cls, c: int, p, values, blocks, keep, ste_runs, learn_threshold: float, kw: Mapping[str, Any]) -> TaskCurves:
        """Task ``c`` of the prepared log ``p``: ``values`` are its processed values, ``blocks`` the block table,
        ``keep`` the regimes the evaluation rule keeps, ``ste_runs`` the task's processed STE runs
        ``[(values, exp_num, prepared run)]``; ``kw`` the smoothing settings (``fraction``, ``max_window``)."""
        is_task = p.r_task == c
        wake = np.flatnonzero(is_task & p.r_train & p.r_wake)
        rows = _segment_rows(p.r_start[wake], p.r_len[wake])
        curve, curve_exp = values[rows], p.exp_num[rows]
        ste = [(v, e) for v, e, _ in ste_runs]
        return cls(
            name=p.task_names[c],
            wake_trainings=wake,
            trainings=np.flatnonzero(is_task & p.r_train & keep),
            evaluations=np.flatnonzero(is_task & ~p.r_train & keep),
            blocks=blocks,
            values=values,
            curve=curve,
            curve_exp_num=curve_exp,
            ste_runs=ste,
            saturations=curve_saturations([(curve, curve_exp)] + ste, **kw) if len(curve) else None,
            learn_threshold=learn_threshold,
            fraction=kw["fraction"],
            max_window=kw["max_window"],
        )


def _task_order(entry: Declared) -> float:
    return entry.extra.get("task_order", math.inf)


def task_values(task: TaskCurves, transfer: Mapping[str, Mapping]) -> dict[str, Any]:
    """Every registered metric of ``task`` (and the per-task lists families return), in ``task_order``.

    A metric made N/A by a rule is not computed; ``{task}`` in the rule's reason becomes the task's name."""
    inputs = {"task": task, "ste": task.ste_runs or None, "transfer": transfer}
    out: dict[str, Any] = {}
    for entry in sorted(LIFELONG_RL, key=_task_order):
        values, reason = LIFELONG_RL.evaluate(entry, inputs)
        if reason is not None:
            values = {name: NA(reason.replace(TASK, task.name)) for name in values}
        out.update(values)
    return out


def lifetime_values(
    tasks: Mapping[str, Mapping[str, Any]], transfer: Mapping[str, Mapping], aggregate: Callable[..., Any]
) -> dict[str, float | NA]:
    """The lifetime value of every registered name, in declaration order: ``aggregate`` of the tasks' numbers (NaN
    and N/A left out), N/A with the first task's reason when no task has one; an entry's own ``lifetime``
    function when it declares one."""
    out: dict[str, float | NA] = {}
    for entry in LIFELONG_RL:
        own = entry.extra.get("lifetime")
        if own is not None:
            values = own(transfer=transfer, aggregate=aggregate)
            out.update({spec.name: values[spec.name] for spec in entry.specs})
            continue
        for spec in entry.specs:
            per_task = [task[spec.name] for task in tasks.values()]
            numbers = [v for v in per_task if not isinstance(v, NA) and not math.isnan(v)]
            reasons = [v.reason for v in per_task if isinstance(v, NA)]
            why = reasons[0] if reasons else "undefined for every task"
            out[spec.name] = float(aggregate(numbers)) if numbers else NA(why)
    return out


def lifetime_names() -> list[str]:
    """Every registered name, in the order lifetime values are reported (``SPECS``)."""
    return [spec.name for spec in LIFELONG_RL.specs]
