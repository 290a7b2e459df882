"""Continual learning over a task sequence (Renate's evaluation; METRICS.md section 2).

Order of calls on the learner (``owl_eval.protocols.continual.agents.base.ContinualLearner``):

1. ``setup(num_features, num_classes, rng)``; in ``task_incremental`` mode, then ``classes_for_task(task_id,
   task.classes)`` for every task when the learner has that method;
2. ``predict`` on every task's test set: the init accuracies ``b``;
3. for each task ``j`` in order: ``learn(j, X_train_j, y_train_j)`` (only task j's training rows, copies),
   then ``predict`` on every task's test set (past and future), filling row ``A[j]``.

``scenario``: ``class_incremental`` calls ``predict(X)`` (task id withheld, any class may be answered);
``task_incremental`` calls ``predict(X, task_id)``. Epochs and batch size belong to the learner (its config).

Logged metrics: each Renate (and Avalanche-style) metric's final value under its name (step 0), its series
over ``task_id`` under ``by_task/<name>`` (steps 0..T-1; a separate key, because MLflow would otherwise hold
two different values at step 0 under one name), each task's accuracy over the sequence as
``task/<i>/accuracy`` (step j = A[j][i]; for at most ``metrics.max_task_series`` tasks, evenly spread: the whole
matrix is in the record), and ``tasks_completed``.

Interrupted runs: the record travels on the exception once the init evaluation is done, holding the rows
of ``A`` completed before the failure (a row counts only when every task of it was evaluated). Its
metrics are computed on the completed prefix ``A[:k, :k]`` with ``b[:k]``, ``n[:k]``: every Renate metric at
step ``t < k`` then equals what the full run would report at step ``t`` (each uses rows and columns
``<= t`` only), while ``forward_transfer_avalanche`` (one task ahead) at the last completed step cannot see
task k. With no completed row every metric is N/A with the reason.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tqdm.auto import tqdm

from owl_eval.protocols.base import AgentOutputError, ProtocolDriver, keep_partial, real_array
from owl_eval.protocols.continual.record import ContinualRecord
from owl_eval.protocols.interfaces import Method, choices, no_baseline, require_attributes, require_interface
from owl_eval.typed import as_choice

SCENARIOS = ("class_incremental", "task_incremental")
# What the protocol calls on the learner, in the order a mismatch is reported.
LEARNER_METHODS = (
    Method("learn", "learn(task_id, X, y)", args=3),
    Method("predict", "predict(X, task_id)", args=2),
    Method("setup", "setup(num_features, num_classes, rng)", args=3),
)
DOMAIN_CHOICES = "domain=<option> (split_digits, permuted_digits, split_dataset, dataset_sequence)"


class ContinualDriver(ProtocolDriver):
    name = "continual"

    def __init__(self, scenario: str = "class_incremental"):
        self.scenario = as_choice(scenario, "protocol.scenario", SCENARIOS)

    def check(self, *, domain, agent, baseline=None) -> None:
        """No baseline; the agent is a continual learner; the domain gives a task sequence."""
        no_baseline(baseline, "continual")
        require_interface(
            agent, LEARNER_METHODS, role="agent", kind="a continual learner", choose=choices("agent", "continual")
        )
        require_interface(
            domain,
            (Method("tasks", "tasks(rng)", args=1),),
            role="domain",
            kind="a continual domain",
            choose=DOMAIN_CHOICES,
        )
        require_attributes(
            domain, ("num_features", "num_classes"), role="domain", kind="a continual domain", choose=DOMAIN_CHOICES
        )

    @property
    def task_incremental(self) -> bool:
        return self.scenario == "task_incremental"

    def tags(self) -> dict[str, str]:
        return {"scenario": self.scenario}

    def record_tags(self, record: ContinualRecord) -> dict[str, str]:
        """The classes of each task as run (``class_order`` drawn by the seed shows here): ``0,1 | 2,3 | ...``."""
        return {"task_classes": " | ".join(",".join(str(c) for c in t) for t in record.task_classes)[:5000]}

    # -- running ---------------------------------------------------------------------------------------
    def run(self, *, domain, agent, rng, baseline=None, progress=True) -> ContinualRecord:
        if baseline is not None:
            raise ValueError("the continual protocol has no baseline agent; choose baseline=none")
        # Data and learner draw from independent generators: swapping the learner never changes the tasks.
        data_rng, agent_rng = rng.spawn(2)
        num_features, num_classes = int(domain.num_features), int(domain.num_classes)
        tasks = check_tasks(domain.tasks(data_rng), num_features, num_classes)
        agent.setup(num_features, num_classes, agent_rng)
        if self.task_incremental and callable(getattr(agent, "classes_for_task", None)):
            for task in tasks:
                agent.classes_for_task(task.task_id, tuple(task.classes))
        record = ContinualRecord(
            scenario=self.scenario,
            accuracy=np.zeros((0, len(tasks))),
            init_accuracy=self._evaluate_all(agent, tasks, num_classes, "before any training"),
            num_instances=np.array([t.y_test.size for t in tasks], dtype=np.int64),
            task_classes=tuple(tuple(int(c) for c in t.classes) for t in tasks),
            domain=str(getattr(domain, "name", "")),
        )
        with keep_partial(lambda: record) as unit_done:
            for task in tqdm(tasks, desc=f"continual tasks ({self.scenario})", disable=not progress, leave=True):
                agent.learn(task.task_id, task.X_train.copy(), task.y_train.copy())
                record.add_row(self._evaluate_all(agent, tasks, num_classes, f"after learning task {task.task_id}"))
                unit_done()
        return record

    def _evaluate_all(self, agent, tasks, num_classes: int, when: str) -> np.ndarray:
        """Accuracy on every task's test set (one row of A, or b)."""
        row = np.empty(len(tasks))
        for task in tasks:
            out = agent.predict(task.X_test.copy(), task.task_id if self.task_incremental else None)
            predicted = check_predictions(out, task, num_classes, when)
            row[task.task_id] = np.mean(predicted == task.y_test)
        return row


# ------------------------------------------------------------------------------------------- checks


def check_tasks(tasks: Sequence, num_features: int, num_classes: int) -> list:
    """The domain's tasks, in order with task ids 0..T-1, each with train and test data of the right shapes."""
    tasks = list(tasks)
    if not tasks:
        raise ValueError("domain.tasks(rng) returned no tasks")
    for position, task in enumerate(tasks):
        where = f"domain task {position}"
        if task.task_id != position:
            raise ValueError(
                f"{where}: task ids must be 0..T-1 in order, got task_id {task.task_id!r} at position {position}"
            )
        for split in ("train", "test"):
            X, y = getattr(task, f"X_{split}"), getattr(task, f"y_{split}")
            if X.ndim != 2 or X.shape[1] != num_features or y.shape != (X.shape[0],):
                raise ValueError(
                    f"{where}: X_{split} must be [n, {num_features}] with y_{split} [n], got {X.shape} and {y.shape}"
                )
            if y.size == 0:
                raise ValueError(f"{where}: the {split} set is empty")
            if y.min() < 0 or y.max() >= num_classes:
                raise ValueError(
                    f"{where}: y_{split} labels must lie in 0..{num_classes - 1}, got {y.min()}..{y.max()}"
                )
    return tasks


def check_predictions(out, task, num_classes: int, when: str) -> np.ndarray:
    """``out`` as int64 class labels, one per test sample of ``task``; AgentOutputError naming task and step."""
    n = task.y_test.size
    where = f"agent predictions for task {task.task_id} ({when})"
    arr = real_array(out, "predict's class labels", where=where)
    values = arr.astype(np.float64)
    if arr.shape != (n,):
        raise AgentOutputError(
            f"{where}: predictions have shape {arr.shape}, expected ({n},) (one class label per test sample)"
        )
    if not np.all(np.isfinite(values)) or np.any(values != np.round(values)):
        bad = int(np.argmax(~np.isfinite(values) | (values != np.round(values))))
        raise AgentOutputError(f"{where}: predictions must be whole class labels, got {values[bad]!r} at index {bad}")
    if n and (values.min() < 0 or values.max() >= num_classes):
        raise AgentOutputError(
            f"{where}: predictions must lie in 0..{num_classes - 1}, got {values.min():g}..{values.max():g}"
        )
    return values.astype(np.int64)
