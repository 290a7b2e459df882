"""Lifelong-RL agents: the interface and baselines (random, tabular Q-learning, tile-coded linear Q)."""
from agents.rl.base import AgentHooks, BlockInfo, RLAgent, TaskSpec
from agents.rl.linear_q import LinearQAgent
from agents.rl.q_learning import QLearningAgent
from agents.rl.random_agent import RandomAgent

__all__ = ["AgentHooks", "BlockInfo", "RLAgent", "TaskSpec", "LinearQAgent", "QLearningAgent", "RandomAgent"]
