"""An agent that fails on purpose: wraps a real agent and raises at a chosen trial and batch.

For checking a harness end to end (a crashed agent must leave a FAILED run with the completed trials'
metrics logged), and for rehearsing how a sweep behaves when one job dies.
"""
from __future__ import annotations

from owl_eval.api.ond import OndBatch
from owl_eval.agents.ond.closed_world import ClosedWorldAgent
from owl_eval.typed import as_int


class AgentCrash(RuntimeError):
    pass


class CrashingAgent:
    def __init__(self, crash_at_trial: int = 2, crash_at_batch: int = 0, inner: object | None = None):
        self.crash_at_trial = as_int(crash_at_trial, "agent.crash_at_trial", minimum=0)
        self.crash_at_batch = as_int(crash_at_batch, "agent.crash_at_batch", minimum=0)
        self.inner = inner if inner is not None else ClosedWorldAgent()
        self.trials_started = -1

    def check_training_size(self, num_samples: int, *, role: str = "agent") -> None:
        if callable(getattr(self.inner, "check_training_size", None)):
            self.inner.check_training_size(num_samples, role=role)

    def fit(self, features, labels, *, num_known, rng):
        self.inner.fit(features, labels, num_known=num_known, rng=rng)

    def start_trial(self, trial_id, num_samples):
        self.trials_started += 1
        self.inner.start_trial(trial_id, num_samples)

    def predict_batch(self, batch: OndBatch):
        if self.trials_started == self.crash_at_trial and batch.batch_index == self.crash_at_batch:
            raise AgentCrash(f"deliberate crash in trial {batch.trial_id!r}, batch {batch.batch_index}")
        return self.inner.predict_batch(batch)
