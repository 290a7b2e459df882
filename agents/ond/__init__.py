"""OND agents: the interface and two baselines."""
from agents.ond.base import OndAgent, OndBatch
from agents.ond.closed_world import ClosedWorldAgent
from agents.ond.knn_novelty import KnnNoveltyAgent

__all__ = ["OndAgent", "OndBatch", "ClosedWorldAgent", "KnnNoveltyAgent"]
