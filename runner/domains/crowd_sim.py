"""A built-in crowd simulator: pedestrians walking to goals with mutual repulsion (social-force-like), numpy only.

Each scene is a square room of side ``area`` metres with between ``min_agents`` and ``max_agents``
pedestrians (padding agents are NaN). Every pedestrian has a preferred speed ~ N(``speed_mean``,
``speed_std``) and a goal drawn uniformly in the room; on reaching it (within ``goal_radius``) it draws a
new one, so trajectories hold turns. Per substep of ``dt / substeps`` (Helbing & Molnar 1995, simplified):

    F_i = (v0_i e_i - v_i) / tau  +  sum_{j != i} A exp((2 r - d_ij) / B) n_ji  +  sigma xi_i
    v_i <- clip(v_i + h F_i, speed <= max_speed_factor v0_i),   x_i <- x_i + h v_i

with e_i the unit vector to the goal, n_ji the unit vector from j to i, xi_i standard normal. All scenes
and agents step at once (arrays ``[S, A, 2]``). After ``warmup_steps`` steps, ``obs_len + pred_len``
steps are recorded. The generator passed to ``load`` drives everything: same seed, same scenes.
"""
from __future__ import annotations

import numpy as np

from runner.domains.trajectory_scenes import TrajectoryScenes, TrajectorySplits


class CrowdSimDomain:
    name = "crowd_sim"

    def __init__(self, num_train_scenes: int = 300, num_test_scenes: int = 100, min_agents: int = 4,
                 max_agents: int = 12, area: float = 12.0, obs_len: int = 8, pred_len: int = 12, dt: float = 0.4,
                 substeps: int = 4, warmup_steps: int = 5, speed_mean: float = 1.3, speed_std: float = 0.2,
                 max_speed_factor: float = 1.3, tau: float = 0.5, repulsion_strength: float = 2.0,
                 repulsion_range: float = 0.3, radius: float = 0.3, noise_std: float = 0.3,
                 goal_radius: float = 0.5):
        if not 1 <= int(min_agents) <= int(max_agents):
            raise ValueError(f"domain.min_agents/max_agents: expected 1 <= min_agents <= max_agents, got {min_agents}, {max_agents}")
        for key, value in (("num_train_scenes", num_train_scenes), ("num_test_scenes", num_test_scenes),
                           ("pred_len", pred_len), ("substeps", substeps)):
            if int(value) < 1:
                raise ValueError(f"domain.{key}: expected a positive integer, got {value!r}")
        if int(obs_len) < 2:
            raise ValueError(f"domain.obs_len: at least 2 observed steps are needed, got {obs_len}")
        if dt <= 0 or area <= 0 or tau <= 0:
            raise ValueError("domain.dt, domain.area and domain.tau must be > 0")
        self.num_train_scenes, self.num_test_scenes = int(num_train_scenes), int(num_test_scenes)
        self.min_agents, self.max_agents = int(min_agents), int(max_agents)
        self.area, self.obs_len, self.pred_len, self.dt = float(area), int(obs_len), int(pred_len), float(dt)
        self.substeps, self.warmup_steps = int(substeps), int(warmup_steps)
        self.speed_mean, self.speed_std, self.max_speed_factor = float(speed_mean), float(speed_std), float(max_speed_factor)
        self.tau, self.repulsion_strength, self.repulsion_range = float(tau), float(repulsion_strength), float(repulsion_range)
        self.radius, self.noise_std, self.goal_radius = float(radius), float(noise_std), float(goal_radius)

    def load(self, rng: np.random.Generator) -> TrajectorySplits:
        train_rng, test_rng = rng.spawn(2)
        return TrajectorySplits(self.simulate(self.num_train_scenes, train_rng, "crowd_sim/train"),
                                self.simulate(self.num_test_scenes, test_rng, "crowd_sim/test"),
                                description=f"crowd_sim: {self.num_train_scenes} train, {self.num_test_scenes} test scenes")

    def simulate(self, num_scenes: int, rng: np.random.Generator, source: str = "crowd_sim") -> TrajectoryScenes:
        """``num_scenes`` independent scenes, recorded after the warm-up."""
        s, a = num_scenes, self.max_agents
        counts = rng.integers(self.min_agents, self.max_agents + 1, size=s)
        present = np.arange(a)[None, :] < counts[:, None]  # [S, A]
        pos = rng.uniform(0.0, self.area, size=(s, a, 2))
        goal = rng.uniform(0.0, self.area, size=(s, a, 2))
        v0 = np.clip(rng.normal(self.speed_mean, self.speed_std, size=(s, a)), 0.2, None)
        vel = v0[..., None] * _unit(goal - pos)
        length = self.obs_len + self.pred_len
        track = np.empty((s, a, length, 2))
        for step in range(self.warmup_steps + length):
            pos, vel, goal = self._step(pos, vel, goal, v0, present, rng)
            if step >= self.warmup_steps:
                track[:, :, step - self.warmup_steps] = pos
        track[~present] = np.nan
        return TrajectoryScenes(track[:, :, : self.obs_len].copy(), track[:, :, self.obs_len:].copy(), self.dt,
                                np.full(s, source), np.full(s, self.warmup_steps, dtype=np.int64))

    def _step(self, pos, vel, goal, v0, present, rng):
        h = self.dt / self.substeps
        pair_ok = present[:, :, None] & present[:, None, :] & ~np.eye(present.shape[1], dtype=bool)[None]
        for _ in range(self.substeps):
            reached = (np.linalg.norm(goal - pos, axis=-1) < self.goal_radius)[..., None]
            goal = np.where(reached, rng.uniform(0.0, self.area, size=goal.shape), goal)
            drive = (v0[..., None] * _unit(goal - pos) - vel) / self.tau
            diff = pos[:, :, None, :] - pos[:, None, :, :]  # [S, A, A, 2]: from j to i
            dist = np.linalg.norm(diff, axis=-1)
            push = self.repulsion_strength * np.exp((2 * self.radius - dist) / self.repulsion_range)
            push = np.where(pair_ok, push, 0.0)
            repulse = (push[..., None] * diff / np.maximum(dist, 1e-6)[..., None]).sum(2)
            noise = self.noise_std * rng.standard_normal(pos.shape)
            vel = vel + h * (drive + repulse + noise)
            speed = np.linalg.norm(vel, axis=-1, keepdims=True)
            cap = (self.max_speed_factor * v0)[..., None]
            vel = np.where(speed > cap, vel * cap / np.maximum(speed, 1e-12), vel)
            pos = pos + h * vel
        return pos, vel, goal


def _unit(v: np.ndarray) -> np.ndarray:
    n = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.maximum(n, 1e-9)
