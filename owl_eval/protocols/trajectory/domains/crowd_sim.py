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

from owl_eval.errors import ConfigError
from owl_eval.protocols.trajectory.domains.scenes import TrajectoryScenes, TrajectorySplits
from owl_eval.typed import as_float, as_int


def _count(value, key: str, minimum: int = 1) -> int:
    return as_int(value, f"domain.{key}", minimum=minimum)


def _positive(value, key: str) -> float:
    return as_float(value, f"domain.{key}", minimum=0.0, open_minimum=True)


def _non_negative(value, key: str) -> float:
    return as_float(value, f"domain.{key}", minimum=0.0)


class CrowdSimDomain:
    name = "crowd_sim"

    def __init__(
        self,
        num_train_scenes: int = 300,
        num_test_scenes: int = 100,
        min_agents: int = 4,
        max_agents: int = 12,
        area: float = 12.0,
        obs_len: int = 8,
        pred_len: int = 12,
        dt: float = 0.4,
        substeps: int = 4,
        warmup_steps: int = 5,
        speed_mean: float = 1.3,
        speed_std: float = 0.2,
        max_speed_factor: float = 1.3,
        tau: float = 0.5,
        repulsion_strength: float = 2.0,
        repulsion_range: float = 0.3,
        radius: float = 0.3,
        noise_std: float = 0.3,
        goal_radius: float = 0.5,
    ):
        self.num_train_scenes = _count(num_train_scenes, "num_train_scenes")
        self.num_test_scenes = _count(num_test_scenes, "num_test_scenes")
        self.min_agents = _count(min_agents, "min_agents")
        self.max_agents = _count(max_agents, "max_agents")
        if self.max_agents < self.min_agents:
            raise ConfigError(
                f"domain.max_agents: expected at least domain.min_agents ({self.min_agents}), got {self.max_agents}"
            )
        self.area, self.dt = _positive(area, "area"), _positive(dt, "dt")
        self.obs_len = _count(obs_len, "obs_len", 2)  # two observed steps at least: a velocity
        self.pred_len = _count(pred_len, "pred_len")
        self.substeps, self.warmup_steps = _count(substeps, "substeps"), _count(warmup_steps, "warmup_steps", 0)
        self.speed_mean, self.speed_std = _non_negative(speed_mean, "speed_mean"), _non_negative(speed_std, "speed_std")
        self.max_speed_factor = _positive(max_speed_factor, "max_speed_factor")
        self.tau = _positive(tau, "tau")
        self.repulsion_strength = _non_negative(repulsion_strength, "repulsion_strength")
        self.repulsion_range = _positive(repulsion_range, "repulsion_range")
        self.radius, self.noise_std = _non_negative(radius, "radius"), _non_negative(noise_std, "noise_std")
        self.goal_radius = _non_negative(goal_radius, "goal_radius")

    def load(self, rng: np.random.Generator) -> TrajectorySplits:
        train_rng, test_rng = rng.spawn(2)
        return TrajectorySplits(
            self.simulate(self.num_train_scenes, train_rng, "crowd_sim/train"),
            self.simulate(self.num_test_scenes, test_rng, "crowd_sim/test"),
            description=f"crowd_sim: {self.num_train_scenes} train, {self.num_test_scenes} test scenes",
        )

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
        return TrajectoryScenes(
            track[:, :, : self.obs_len].copy(),
            track[:, :, self.obs_len :].copy(),
            self.dt,
            np.full(s, source),
            np.full(s, self.warmup_steps, dtype=np.int64),
        )

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
