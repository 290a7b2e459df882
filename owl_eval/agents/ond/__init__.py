"""OND agents: the interface and two baselines."""

from owl_eval.agents.ond.closed_world import ClosedWorldAgent
from owl_eval.agents.ond.knn_novelty import KnnNoveltyAgent
from owl_eval.api.ond import OndAgent, OndBatch

__all__ = ["OndAgent", "OndBatch", "ClosedWorldAgent", "KnnNoveltyAgent"]
