"""A fixed policy named in YAML as a lifelong-RL agent (``agent=lifelong_rl/policy``): no learning, no Python glue.

``policy`` is either

- a callable ``policy(observation) -> action`` (a function named with ``_partial_: true``, or an object with
  ``__call__``); a ``rng`` keyword, if it declares one, gets the agent's generator (every random choice from it);
- an object with ``predict(observation, ...)``, Stable-Baselines3's signature included:
  ``predict(observation, state=None, episode_start=None, deterministic=False) -> (action, state)``. The keywords it
  declares are passed: ``state`` (what it returned last, None at the start of each episode), ``episode_start``
  (``numpy.array([True])`` at an episode's first step, else ``[False]``) and ``deterministic`` (the config's). A
  returned ``(action, state)`` pair keeps the state for the next step; anything else is the action.

The action must be an int in ``[0, num_actions)`` (a Python or numpy int, or a 0-d integer array such as
Stable-Baselines3's); anything else stops the run with the block, episode and step. ``observe`` does nothing: the
agent never learns, so every block measures the same policy.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from owl_eval.errors import ConfigError
from owl_eval.protocols.adapters import describe, has_method, keywords, require_call, resolve
from owl_eval.protocols.base import AgentOutputError
from owl_eval.protocols.lifelong_rl.agents.base import AgentHooks
from owl_eval.protocols.lifelong_rl.api import BlockInfo
from owl_eval.typed import as_bool

PREDICT_KEYWORDS = ("state", "episode_start", "deterministic")


def cartpole_balance(observation) -> int:
    """An example policy for CartPole: push the cart towards the side the pole falls to (angle plus angular
    velocity); it balances the default pole for the full 200 steps."""
    return int(observation[2] + observation[3] > 0.0)


class PolicyAgent(AgentHooks):
    def __init__(self, policy: Any, deterministic: bool = True):
        self.policy = resolve(policy, "agent.policy")
        self.deterministic = as_bool(deterministic, "agent.deterministic")
        if has_method(self.policy, "predict"):
            self.mode = "predict"
            self.wanted = keywords(self.policy.predict, PREDICT_KEYWORDS)
            require_call(self.policy.predict, "agent.policy.predict", "predict(observation)", 1, self.wanted)
        elif callable(self.policy):
            self.mode = "call"
            self.wanted = keywords(self.policy, ("rng",))
            require_call(self.policy, "agent.policy", "policy(observation)", 1, self.wanted)
        else:
            raise ConfigError(
                f"agent.policy ({describe(self.policy)}) is neither callable as policy(observation) nor has a "
                "predict(observation) method; name a function (_target_ with _partial_: true) or a model"
            )
        self.rng = np.random.default_rng(0)
        self.state: Any = None
        self.episode_start = True

    def seed(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.start_episode()

    def start_episode(self) -> None:
        self.state, self.episode_start = None, True

    def start_block(self, block: BlockInfo) -> None:
        self.start_episode()

    def act(self, observation) -> Any:
        if self.mode == "call":
            action = self.policy(observation, **({"rng": self.rng} if "rng" in self.wanted else {}))
        else:
            given = {
                "state": self.state,
                "episode_start": np.array([self.episode_start]),
                "deterministic": self.deterministic,
            }
            out = self.policy.predict(observation, **{k: v for k, v in given.items() if k in self.wanted})
            if isinstance(out, tuple):
                if len(out) != 2:
                    raise AgentOutputError(
                        f"agent.policy ({describe(self.policy)}).predict returned a tuple of {len(out)}; expected "
                        "an action or (action, state) as Stable-Baselines3 does"
                    )
                action, self.state = out
            else:
                action = out
        self.episode_start = False
        return action

    def observe(self, observation, action, reward, next_observation, terminated, truncated) -> None:
        if terminated or truncated:
            self.start_episode()
