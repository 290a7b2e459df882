"""Scenes of several pedestrians cut into observed and future windows: the data every trajectory domain returns.

A *scene* holds up to ``N_A`` agents (padded): ``history[S, N_A, N_I, 2]`` observed positions and
``future[S, N_A, N_O, 2]`` positions to predict, in metres, NaN wherever an agent is not observed (missing
steps and padding agents alike). ``history_mask`` / ``future_mask`` say which steps are real. Positions are
in the domain's world frame; ``dt`` is the time between steps in seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TrajectoryScenes:
    history: np.ndarray  # [S, A, N_I, 2] float, NaN where not observed
    future: np.ndarray  # [S, A, N_O, 2] float, NaN where not observed
    dt: float
    scene_source: np.ndarray  # [S] str: file (or simulator) the scene comes from
    scene_frame: np.ndarray  # [S] int: first observed frame (or simulator step)

    def __post_init__(self):
        h, f = self.history, self.future
        if h.ndim != 4 or h.shape[-1] != 2 or f.ndim != 4 or f.shape[:2] != h.shape[:2] or f.shape[-1] != 2:
            raise ValueError(
                f"scenes: expected history [S, A, N_I, 2] and future [S, A, N_O, 2] with equal S, A; "
                f"got {h.shape} and {f.shape}"
            )
        if self.scene_source.shape != (h.shape[0],) or self.scene_frame.shape != (h.shape[0],):
            raise ValueError(f"scenes: scene_source and scene_frame must have shape [{h.shape[0]}]")

    @property
    def history_mask(self) -> np.ndarray:
        return np.isfinite(self.history).all(-1)

    @property
    def future_mask(self) -> np.ndarray:
        return np.isfinite(self.future).all(-1)

    @property
    def agent_mask(self) -> np.ndarray:
        """[S, A]: agents observed at the last history step (the agents a scene is built around)."""
        return self.history_mask[:, :, -1]

    @property
    def num_scenes(self) -> int:
        return self.history.shape[0]

    @property
    def num_agents(self) -> int:
        return self.history.shape[1]

    @property
    def obs_len(self) -> int:
        return self.history.shape[2]

    @property
    def pred_len(self) -> int:
        return self.future.shape[2]

    def subset(self, index) -> TrajectoryScenes:
        return TrajectoryScenes(
            self.history[index], self.future[index], self.dt, self.scene_source[index], self.scene_frame[index]
        )

    @staticmethod
    def concatenate(parts: list[TrajectoryScenes]) -> TrajectoryScenes:
        """Scenes of several sources in one set, padded to the widest agent count."""
        if not parts:
            raise ValueError("no scenes to concatenate")
        width = max(p.num_agents for p in parts)

        def pad(a):
            out = np.full((a.shape[0], width) + a.shape[2:], np.nan)
            out[:, : a.shape[1]] = a
            return out

        return TrajectoryScenes(
            np.concatenate([pad(p.history) for p in parts]),
            np.concatenate([pad(p.future) for p in parts]),
            parts[0].dt,
            np.concatenate([p.scene_source for p in parts]),
            np.concatenate([p.scene_frame for p in parts]),
        )


@dataclass(frozen=True)
class TrajectorySplits:
    """What a trajectory domain's ``load()`` returns: the split the predictor may fit on, and the test split."""

    train: TrajectoryScenes
    test: TrajectoryScenes
    description: str = ""


# Which pedestrians of a window are scored (domain setting ``windows``).
WINDOW_RULES = {
    "cvm": "present at every observed step and at least two future steps, windows running past the end of the "
    "recording included (Schoeller et al. 2020, the constant velocity model paper: evaluate.py, "
    "min_sequence_length=10)",
    "social_gan": "present at every observed and future step, in windows with at least two such pedestrians "
    "(Social-GAN's loader: min_ped=1, num_peds_considered > min_ped)",
    "last_observed": "present at the last observed step; missing steps masked (histories may be one point long)",
}


# The constant-velocity paper's evaluate.py slices each track into windows of up to obs_len + pred_len = 20
# positions and keeps those of at least min_sequence_length = 10: the full history and 2 future positions.
CVM_MIN_FUTURE = 2


def min_future_steps(rule: str, pred_len: int) -> int:
    """The fewest future steps a scored pedestrian may have under ``rule``; a window may start so late that
    only this many of its ``pred_len`` steps lie inside the recording (``cvm`` keeps such windows)."""
    return min(CVM_MIN_FUTURE, pred_len) if rule == "cvm" else pred_len


def window_agents(present: np.ndarray, obs_len: int, rule: str) -> np.ndarray:
    """``[W, P]`` which pedestrians a window scores, from ``present[W, P, obs_len + pred_len]``."""
    if rule == "cvm":
        min_future = min_future_steps(rule, present.shape[2] - obs_len)
        return present[:, :, :obs_len].all(-1) & (present[:, :, obs_len:].sum(-1) >= min_future)
    if rule == "social_gan":
        complete = present.all(-1)
        return complete & (complete.sum(1, keepdims=True) >= 2)
    if rule == "last_observed":
        return present[:, :, obs_len - 1]
    raise ValueError(f"windows: expected one of {sorted(WINDOW_RULES)}, got {rule!r}")


def windows_from_grid(
    positions: np.ndarray, *, obs_len: int, pred_len: int, stride: int, max_agents: int, windows: str = "cvm"
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cut a dense track grid ``positions[T, P, 2]`` (NaN = absent) into scenes.

    A scene is a window start ``t0`` (every ``stride`` steps) with the pedestrians that ``windows`` selects
    (:data:`WINDOW_RULES`). Under ``cvm`` a window may run past the last step of the grid as long as
    :func:`min_future_steps` of its future lie inside it (the steps after the end are missing, i.e. masked). Agents keep NaN at the steps they are missing (masked, not dropped). A window
    with more than ``max_agents`` agents is split into several scenes of at most ``max_agents`` agents (in
    pedestrian order), so no agent is dropped. Windows without agents give no scene.

    Returns ``(windows[S, max_agents, obs_len + pred_len, 2], start_step[S], agents_per_scene[S])``.
    """
    overhang = pred_len - min_future_steps(windows, pred_len)
    if overhang:
        positions = np.concatenate([positions, np.full((overhang,) + positions.shape[1:], np.nan)])
    t_total, _, _ = positions.shape
    length = obs_len + pred_len
    starts = np.arange(0, t_total - length + 1, stride)
    if len(starts) == 0:
        return np.full((0, max_agents, length, 2), np.nan), np.zeros(0, int), np.zeros(0, int)
    # [W, length, P, 2] all windows at once (a strided view, no copy)
    view = np.lib.stride_tricks.sliding_window_view(positions, length, axis=0)[starts]  # [W, P, 2, length]
    present = np.isfinite(view).all(2)  # [W, P, length]
    keep = window_agents(present, obs_len, windows)
    w_idx, p_idx = np.nonzero(keep)  # row-major: grouped by window, pedestrians in order
    if len(w_idx) == 0:
        return np.full((0, max_agents, length, 2), np.nan), np.zeros(0, int), np.zeros(0, int)
    # rank of each kept agent within its window -> (scene chunk, slot)
    first = np.searchsorted(w_idx, w_idx, side="left")
    rank = np.arange(len(w_idx)) - first
    chunk = rank // max_agents
    slot = rank % max_agents
    scene_key = w_idx * (rank.max() // max_agents + 1) + chunk
    keys, first_member, scene_of = np.unique(scene_key, return_index=True, return_inverse=True)
    out = np.full((len(keys), max_agents, length, 2), np.nan)
    out[scene_of, slot] = view[w_idx, p_idx].transpose(0, 2, 1)
    start_step = starts[w_idx[first_member]]
    counts = np.bincount(scene_of, minlength=len(keys))
    return out, start_step, counts


def split_windows(windows: np.ndarray, obs_len: int) -> tuple[np.ndarray, np.ndarray]:
    return windows[:, :, :obs_len].copy(), windows[:, :, obs_len:].copy()
