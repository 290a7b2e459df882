"""Lifelong-RL agents (the interface, re-exported here, is :mod:`owl_eval.api.lifelong_rl`): baselines (random, tabular Q-learning, tile-coded linear Q)."""

from owl_eval.agents.lifelong_rl.base import AgentHooks
from owl_eval.agents.lifelong_rl.linear_q import LinearQAgent
from owl_eval.agents.lifelong_rl.q_learning import QLearningAgent
from owl_eval.agents.lifelong_rl.random_agent import RandomAgent
from owl_eval.api.lifelong_rl import BlockInfo, RLAgent, TaskSpec

__all__ = ["AgentHooks", "BlockInfo", "RLAgent", "TaskSpec", "LinearQAgent", "QLearningAgent", "RandomAgent"]
