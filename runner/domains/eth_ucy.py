"""ETH/UCY pedestrian trajectories (FORMATS.md "ETH/UCY text files"), held out by scene group.

Files: ``<name>.txt`` or ``<name>.txt.gz``, tab-separated ``frame  pedestrian_id  x  y`` (metres), frames every
``frame_step`` (10, i.e. 0.4 s at 2.5 Hz). Each file becomes a dense grid ``[time step, pedestrian, 2]``
(NaN where a pedestrian is absent; frames are placed by ``(frame - first frame) / frame_step``, so a gap
in the file is a gap in time, not a skipped step).

Scenes (see :func:`runner.domains.trajectory_scenes.windows_from_grid`): a scene is a window start every
``stride`` steps, ``obs_len`` observed plus ``pred_len`` future steps; its agents are the pedestrians present
at the last observed step. Pedestrians missing at some steps are kept with those steps masked (NaN);
windows with more than ``max_agents`` such pedestrians are split into several scenes, so nobody is
dropped. ``complete_only: true`` keeps only pedestrians present at all steps (the Social-GAN convention).

Split: leave one group out. ``groups`` maps a group name to its files (the benchmark's eth, hotel, univ =
students001 + students003, zara1, zara2); the files of ``test_group`` are the test split, every other
file in ``groups`` plus ``extra_train_files`` (zara03, uni_examples) is the training split.
"""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

from runner.domains.trajectory_scenes import TrajectoryScenes, TrajectorySplits, split_windows, windows_from_grid

DEFAULT_GROUPS = {
    "eth": ["biwi_eth"],
    "hotel": ["biwi_hotel"],
    "univ": ["students001", "students003"],
    "zara1": ["crowds_zara01"],
    "zara2": ["crowds_zara02"],
}
DEFAULT_EXTRA_TRAIN = ["crowds_zara03", "uni_examples"]


class DataPathError(ValueError):
    """``domain.path`` is missing or does not hold the expected files."""


def find_file(directory: Path, name: str) -> Path:
    for candidate in (directory / f"{name}.txt.gz", directory / f"{name}.txt", directory / name):
        if candidate.is_file():
            return candidate
    raise DataPathError(f"domain.path: {directory} has no file {name}.txt.gz or {name}.txt (ETH/UCY tab-separated "
                        "'frame pedestrian_id x y'); set domain.path=<folder with the ETH/UCY files>")


def _exists(directory: Path, name: str) -> bool:
    try:
        find_file(directory, name)
        return True
    except DataPathError:
        return False


def read_tracks(path: Path) -> np.ndarray:
    """Rows ``[frame, pedestrian_id, x, y]`` of one file as float64 ``[N, 4]``."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        try:
            rows = np.loadtxt(fh, dtype=np.float64, ndmin=2)
        except ValueError as exc:
            raise DataPathError(f"{path}: expected 4 numeric tab-separated columns frame, id, x, y ({exc})") from None
    if rows.shape[1] != 4:
        raise DataPathError(f"{path}: expected 4 columns frame, pedestrian_id, x, y; got {rows.shape[1]}")
    return rows


def track_grid(rows: np.ndarray, frame_step: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Dense ``positions[T, P, 2]`` (NaN = absent), the pedestrian ids ``[P]`` and the first frame."""
    frames = rows[:, 0]
    first = int(round(frames.min()))
    offset = (frames - first) / frame_step
    step = np.rint(offset).astype(np.int64)
    if np.any(np.abs(offset - step) > 1e-6):
        bad = rows[np.argmax(np.abs(offset - step)), 0]
        raise DataPathError(f"frame {bad:g} is not on the grid of frame_step={frame_step} from the first frame {first} "
                            "(set domain.frame_step)")
    ids, ped = np.unique(rows[:, 1], return_inverse=True)
    grid = np.full((int(step.max()) + 1, len(ids), 2), np.nan)
    grid[step, ped] = rows[:, 2:4]
    return grid, ids, first


def file_scenes(path: Path, *, frame_step: int, obs_len: int, pred_len: int, stride: int, max_agents: int,
                complete_only: bool, dt: float) -> TrajectoryScenes:
    grid, _, first = track_grid(read_tracks(path), frame_step)
    windows, start, counts = windows_from_grid(grid, obs_len=obs_len, pred_len=pred_len, stride=stride,
                                              max_agents=max_agents, complete_only=complete_only)
    windows = windows[:, : max(1, int(counts.max(initial=0)))]  # no all-padding agent columns
    history, future = split_windows(windows, obs_len)
    name = path.name.split(".")[0]
    return TrajectoryScenes(history, future, dt, np.full(len(start), name), first + start * frame_step)


class EthUcyDomain:
    name = "eth_ucy"

    def __init__(self, path: str | None = None, test_group: str = "eth", groups: dict | None = None,
                 extra_train_files: list | None = None, obs_len: int = 8, pred_len: int = 12, stride: int = 1,
                 max_agents: int = 32, complete_only: bool = False, frame_step: int = 10, fps: float = 25.0):
        self.path = path
        self.groups = {str(k): list(v) for k, v in (groups if groups is not None else DEFAULT_GROUPS).items()}
        self.extra_train_files = list(DEFAULT_EXTRA_TRAIN if extra_train_files is None else extra_train_files)
        if test_group not in self.groups:
            raise ValueError(f"domain.test_group: expected one of {sorted(self.groups)}, got {test_group!r}")
        for key, value in (("obs_len", obs_len), ("pred_len", pred_len), ("stride", stride), ("max_agents", max_agents),
                           ("frame_step", frame_step)):
            if int(value) < 1:
                raise ValueError(f"domain.{key}: expected a positive integer, got {value!r}")
        if obs_len < 2:
            raise ValueError(f"domain.obs_len: at least 2 observed steps are needed for a velocity, got {obs_len}")
        self.test_group = test_group
        self.obs_len, self.pred_len, self.stride = int(obs_len), int(pred_len), int(stride)
        self.max_agents, self.complete_only = int(max_agents), bool(complete_only)
        self.frame_step = int(frame_step)
        self.dt = self.frame_step / float(fps)

    def _directory(self) -> Path:
        if self.path is None or str(self.path).strip() in ("", "None", "???"):
            raise DataPathError("domain.path is not set: expected a folder with the ETH/UCY files (biwi_eth.txt.gz, "
                                "biwi_hotel.txt.gz, crowds_zara01.txt.gz, ...); run with domain.path=<dir>")
        directory = Path(str(self.path)).expanduser()
        if not directory.is_dir():
            raise DataPathError(f"domain.path={self.path!r} is not a folder: expected a folder with the ETH/UCY files "
                                "(biwi_eth.txt.gz, biwi_hotel.txt.gz, crowds_zara01.txt.gz, ...)")
        return directory

    def files(self) -> tuple[list[Path], list[Path]]:
        """(train files, test files), checked to exist."""
        directory = self._directory()
        test_names = self.groups[self.test_group]
        train_names = [f for g, names in self.groups.items() if g != self.test_group for f in names]
        train_names += [f for f in self.extra_train_files if f not in train_names and f not in test_names]
        missing = [n for n in test_names + train_names if not _exists(directory, n)]
        if missing:
            raise DataPathError(f"domain.path: {directory} has no file {', '.join(missing)} (.txt.gz or .txt, ETH/UCY "
                                "tab-separated 'frame pedestrian_id x y'); set domain.path=<folder with the ETH/UCY files>")
        return [find_file(directory, n) for n in train_names], [find_file(directory, n) for n in test_names]

    def load(self, rng: np.random.Generator | None = None) -> TrajectorySplits:
        train_files, test_files = self.files()
        kw = dict(frame_step=self.frame_step, obs_len=self.obs_len, pred_len=self.pred_len, stride=self.stride,
                  max_agents=self.max_agents, complete_only=self.complete_only, dt=self.dt)
        train = TrajectoryScenes.concatenate([file_scenes(p, **kw) for p in train_files])
        test = TrajectoryScenes.concatenate([file_scenes(p, **kw) for p in test_files])
        if test.num_scenes == 0:
            raise DataPathError(f"test group {self.test_group!r} ({[p.name for p in test_files]}) gives no scene of "
                                f"{self.obs_len}+{self.pred_len} steps")
        return TrajectorySplits(train, test, description=f"test={self.test_group}: {[p.name for p in test_files]}")
