"""The OND agent interface (a ``typing.Protocol``: any class with these methods is an agent)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class OndBatch:
    """One mini-batch of a trial as the agent sees it: features only, never labels.

    ``red_light_index`` is the 0-based index in the trial of the first novel sample. It is set only
    under ``condition: given``, and only from the batch that holds it on; otherwise None.
    """

    trial_id: str
    batch_index: int
    sample_index: np.ndarray  # [n] positions of these samples in the trial
    features: np.ndarray  # [n, D]
    red_light_index: int | None = None

    @property
    def novelty_started(self) -> bool:
        return self.red_light_index is not None


@runtime_checkable
class OndAgent(Protocol):
    """A K+1 classifier with a world-change detector.

    ``fit`` gets the known classes' training split once (labels 1..K); the stream then comes trial by
    trial, batch by batch. ``predict_batch`` returns ``(p_world_changed [n], p_class [n, K+1])`` with
    column 0 of ``p_class`` the "unknown" score and rows summing to 1.
    """

    def fit(self, features: np.ndarray, labels: np.ndarray, *, num_known: int, rng: np.random.Generator) -> None: ...

    def start_trial(self, trial_id: str, num_samples: int) -> None: ...

    def predict_batch(self, batch: OndBatch) -> tuple[np.ndarray, np.ndarray]: ...
