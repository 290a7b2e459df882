"""The episode loop shared by syllabus runs and STE runs: blocks of episodes, each logged as it ends."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from tqdm.auto import tqdm

from owl_eval.protocols.base import AgentOutputError
from owl_eval.protocols.lifelong_rl.api import BlockInfo
from owl_eval.protocols.lifelong_rl.domains import TaskEnv
from owl_eval.protocols.lifelong_rl.syllabus import Block

SEED_HIGH = 2**31 - 1


def run_syllabus(
    blocks: Sequence[Block],
    agent,
    domain,
    logger,
    rng: np.random.Generator,
    *,
    eval_seed: int,
    worker_id: str = "worker-default",
    progress: bool = False,
    desc: str = "RL blocks",
    on_block_end=None,
) -> int:
    """Run ``blocks`` in order, logging one row per episode through ``logger``; returns the episode count.

    ``rng`` is split into the environment's and the agent's generators (``agent.seed`` is called here, so
    the agent starts from scratch). Training episodes take their reset seeds from the environment
    generator; every evaluation block of the run uses the same seeds ``eval_seed, eval_seed + 1, ...``
    and never calls ``observe`` (learning off whatever the agent does).
    """
    env_rng, agent_rng = rng.spawn(2)
    agent.seed(agent_rng)
    envs: dict[tuple[str, str], TaskEnv] = {}
    exp_num = 0
    current = None
    for index, block in enumerate(tqdm(blocks, desc=desc, disable=not progress, leave=True)):
        key = (block.task, block.variant)
        if key not in envs:
            envs[key] = domain.make(block.task, block.variant)
        env = envs[key]
        if key != current:
            if current is not None:
                agent.end_task(envs[current].spec)
            agent.start_task(env.spec)
            current = key
        learning = block.type == "train"
        if learning:
            seeds = env_rng.integers(0, SEED_HIGH, size=block.episodes)
        else:
            seeds = int(eval_seed) + np.arange(block.episodes)
        info = BlockInfo(index=index, block_type=block.type, spec=env.spec, episodes=block.episodes)
        agent.set_learning(learning)
        agent.start_block(info)
        params = env.spec.params
        for episode, seed in enumerate(seeds.tolist()):
            ret, steps = _episode(agent, env, int(seed), learning, index, block, episode)
            logger.log_episode(
                block_num=index,
                exp_num=exp_num,
                block_type=block.type,
                task_name=block.task_name,
                task_params=params,
                worker_id=worker_id,
                reward=ret,
                episode_step_count=steps,
            )
            exp_num += 1
        agent.end_block(info)
        if on_block_end is not None:
            on_block_end(index)
    if current is not None:
        agent.end_task(envs[current].spec)
    return exp_num


def _episode(agent, env, seed: int, learning: bool, index: int, block: Block, episode: int) -> tuple[float, int]:
    num_actions = env.spec.num_actions
    obs = env.reset(seed)
    start = getattr(agent, "start_episode", None)  # optional: a policy with memory resets it here
    if callable(start):
        start()
    ret, steps = 0.0, 0
    while True:
        action = agent.act(obs)
        if action.__class__ is not int or not 0 <= action < num_actions:
            action = _check_action(action, num_actions, index, block, episode, steps)
        nxt, reward, terminated, truncated = env.step(action)
        if learning:
            agent.observe(obs, action, reward, nxt, terminated, truncated)
        ret += reward
        steps += 1
        obs = nxt
        if terminated or truncated:
            return ret, steps


def _check_action(action, num_actions: int, index: int, block: Block, episode: int, step: int) -> int:
    if (
        isinstance(action, (int, np.integer))
        and not isinstance(action, (bool, np.bool_))
        and 0 <= int(action) < num_actions
    ):
        return int(action)
    if isinstance(action, np.ma.MaskedArray):
        raise AgentOutputError(
            f"agent action in block {index} ({block.type} {block.task_name}), episode {episode}, step {step}: "
            f"expected an int in [0, {num_actions}), got a masked array (numpy.ma.MaskedArray) {action!r}"
        )
    if isinstance(action, np.ndarray) and action.shape == () and action.dtype.kind in "iu":
        return _check_action(action.item(), num_actions, index, block, episode, step)
    raise AgentOutputError(
        f"agent action in block {index} ({block.type} {block.task_name}), episode {episode}, step {step}: "
        f"expected an int in [0, {num_actions}), got {action!r} ({type(action).__name__})"
    )
