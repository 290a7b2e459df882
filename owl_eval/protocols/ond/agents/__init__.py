"""OND agents: the interface and two baselines."""

from owl_eval.protocols.ond.agents.closed_world import ClosedWorldAgent
from owl_eval.protocols.ond.agents.knn_novelty import KnnNoveltyAgent
from owl_eval.protocols.ond.api import OndAgent, OndBatch

__all__ = ["OndAgent", "OndBatch", "ClosedWorldAgent", "KnnNoveltyAgent"]
