"""A learner that fails on purpose: Finetune that raises when asked to learn a chosen task.

For checking the harness end to end (a crashed learner must leave a FAILED run whose record holds the
rows completed before the crash) and for rehearsing how a sweep behaves when one job dies.
"""
from __future__ import annotations

import numpy as np

from owl_eval.agents.continual.finetune import Finetune
from owl_eval.typed import as_int


class LearnerCrash(RuntimeError):
    pass


class CrashingLearner(Finetune):
    def __init__(self, crash_at_task: int = 2, **finetune_kwargs):
        super().__init__(**finetune_kwargs)
        self.crash_at_task = as_int(crash_at_task, "agent.crash_at_task", minimum=0)

    def learn(self, task_id: int, X: np.ndarray, y: np.ndarray) -> None:
        if task_id == self.crash_at_task:
            raise LearnerCrash(f"deliberate crash when learning task {task_id}")
        super().learn(task_id, X, y)
