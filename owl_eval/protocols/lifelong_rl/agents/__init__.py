"""Lifelong-RL agents (the interface, re-exported here, is :mod:`owl_eval.protocols.lifelong_rl.api`): baselines (random, tabular Q-learning, tile-coded linear Q)."""

from owl_eval.protocols.lifelong_rl.agents.base import AgentHooks
from owl_eval.protocols.lifelong_rl.agents.linear_q import LinearQAgent
from owl_eval.protocols.lifelong_rl.agents.q_learning import QLearningAgent
from owl_eval.protocols.lifelong_rl.agents.random_agent import RandomAgent
from owl_eval.protocols.lifelong_rl.api import BlockInfo, RLAgent, TaskSpec

__all__ = ["AgentHooks", "BlockInfo", "RLAgent", "TaskSpec", "LinearQAgent", "QLearningAgent", "RandomAgent"]
