"""Baseline continual learners (all seeded from the generator given to ``setup``).

- :class:`Finetune`: one linear classifier trained on each task in turn (lower bound).
- :class:`Replay`: the same plus a reservoir buffer of past samples mixed into training.
- :class:`Joint`: retrained from scratch on all data seen so far (upper bound).

The interface is :class:`ContinualLearner` (:mod:`owl_eval.protocols.continual.api`, re-exported here).
"""

from owl_eval.protocols.continual.agents.finetune import Finetune
from owl_eval.protocols.continual.agents.joint import Joint
from owl_eval.protocols.continual.agents.replay import Replay, ReservoirBuffer
from owl_eval.protocols.continual.api import ContinualLearner

__all__ = ["ContinualLearner", "Finetune", "Joint", "Replay", "ReservoirBuffer"]
