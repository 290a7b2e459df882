"""Track rows ``[frame, pedestrian_id, x, y]`` to scenes: what every file-based trajectory domain shares.

A file's rows become a dense grid ``[time step, pedestrian, 2]`` (NaN where a pedestrian is absent; frames are
placed by ``(frame - first frame) / frame_step``, so a gap in the file is a gap in time, not a skipped step), which
:func:`owl_eval.protocols.trajectory.domains.scenes.windows_from_grid` cuts into windows. :class:`WindowSettings`
holds (and checks) the window options of such a domain: ``obs_len``, ``pred_len``, ``stride``, ``max_agents``,
``windows``, ``frame_step`` and ``fps``. Used by ETH/UCY (``eth_ucy.py``) and the general folder of track files
(``files.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

import numpy as np

from owl_eval.datasets.provenance import DataInput, file_digest
from owl_eval.errors import ConfigError
from owl_eval.protocols.trajectory.domains.scenes import (
    WINDOW_RULES,
    TrajectoryScenes,
    TrajectorySplits,
    split_windows,
    windows_from_grid,
)
from owl_eval.safe_paths import check_name
from owl_eval.typed import as_float, as_int, as_str

# A grid cell per (time step, pedestrian): a file whose frames or ids would need more is not track data.
MAX_GRID_CELLS = 200_000_000


class DataPathError(ConfigError):
    """``domain.path`` is missing or does not hold the expected files (or a file cannot be read)."""


def data_folder(path: object, what: str) -> Path:
    """``domain.path`` as a folder; not set or not a folder is one :class:`DataPathError` saying ``what`` it holds."""
    if path is None or str(path).strip() in ("", "None", "???"):
        raise DataPathError(f"domain.path is not set: expected a folder with {what}; run with domain.path=<dir>")
    directory = Path(str(path)).expanduser()
    if not directory.is_dir():
        raise DataPathError(f"domain.path={path!r} is not a folder: expected a folder with {what}")
    return directory


def file_names(names, key: str) -> list[str]:
    """A list of file names (without their extensions); each is looked up inside ``domain.path``."""
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise ConfigError(f"{key}: expected a list of file names, got {names!r}")
    return [check_name(as_str(n, f"{key}[{i}]"), what="file name", where=f"{key}[{i}]") for i, n in enumerate(names)]


def file_groups(groups) -> dict[str, list[str]]:
    """``domain.groups``: a non-empty mapping ``{group: [file names]}``."""
    if not isinstance(groups, Mapping) or not groups:
        raise ConfigError(f"domain.groups: expected a mapping {{group: [file names]}}, got {groups!r}")
    return {str(k): file_names(v, f"domain.groups.{k}") for k, v in groups.items()}


def _where(where: str, lines: np.ndarray | None, index: int) -> str:
    """``"<file>, line N: "`` (or less, as known) before a message about row ``index``."""
    if lines is not None and where:
        return f"{where}, line {int(lines[index])}: "
    return f"{where}: " if where else ""


def track_grid(
    rows: np.ndarray, frame_step: int, *, where: str = "", lines: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, int]:
    """Dense ``positions[T, P, 2]`` (NaN = absent), the pedestrian ids ``[P]`` and the first frame.

    ``where`` (the file) and ``lines`` (the line number of each row) name the row of an error."""
    frames = rows[:, 0]
    first = int(round(frames.min()))
    offset = (frames - first) / frame_step
    step = np.rint(offset).astype(np.int64)
    if np.any(np.abs(offset - step) > 1e-6):
        index = int(np.argmax(np.abs(offset - step)))
        raise DataPathError(
            f"{_where(where, lines, index)}frame {rows[index, 0]:g} is not on the grid of frame_step={frame_step} "
            f"from the first frame {first} (set domain.frame_step)"
        )
    ids, ped = np.unique(rows[:, 1], return_inverse=True)
    if (int(step.max()) + 1) * len(ids) > MAX_GRID_CELLS:
        raise DataPathError(
            f"{_where(where, None, 0)}{int(step.max()) + 1} time steps x {len(ids)} pedestrians is too large a track "
            f"grid (frames {first}..{int(round(frames.max()))} with frame_step={frame_step}); check the "
            "frame column and domain.frame_step"
        )
    grid = np.full((int(step.max()) + 1, len(ids), 2), np.nan)
    grid[step, ped] = rows[:, 2:4]
    return grid, ids, first


def tracks_scenes(
    rows: np.ndarray,
    name: str,
    *,
    frame_step: int,
    obs_len: int,
    pred_len: int,
    stride: int,
    max_agents: int,
    windows: str,
    dt: float,
    where: str = "",
    lines: np.ndarray | None = None,
) -> TrajectoryScenes:
    """The scenes of one recording's rows ``[N, 4]`` (``name`` is their ``scene_source``)."""
    grid, _, first = track_grid(rows, frame_step, where=where, lines=lines)
    cut, start, counts = windows_from_grid(
        grid, obs_len=obs_len, pred_len=pred_len, stride=stride, max_agents=max_agents, windows=windows
    )
    cut = cut[:, : max(1, int(counts.max(initial=0)))]  # no all-padding agent columns
    history, future = split_windows(cut, obs_len)
    return TrajectoryScenes(history, future, dt, np.full(len(start), name), first + start * frame_step)


class WindowOptions(TypedDict):
    frame_step: int
    obs_len: int
    pred_len: int
    stride: int
    max_agents: int
    windows: str
    dt: float


@dataclass(frozen=True)
class WindowSettings:
    """The window options of a file-based domain, checked (each error names its ``domain.`` key)."""

    obs_len: int
    pred_len: int
    stride: int
    max_agents: int
    windows: str
    frame_step: int
    dt: float

    @classmethod
    def parse(
        cls, *, obs_len, pred_len, stride, max_agents, windows, frame_step, fps, prefix: str = "domain"
    ) -> WindowSettings:
        obs = as_int(obs_len, f"{prefix}.obs_len", minimum=2)  # two observed steps at least: a velocity
        pred = as_int(pred_len, f"{prefix}.pred_len", minimum=1)
        stride = as_int(stride, f"{prefix}.stride", minimum=1)
        max_agents = as_int(max_agents, f"{prefix}.max_agents", minimum=1)
        rule = as_str(windows, f"{prefix}.windows")
        if rule not in WINDOW_RULES:
            raise ConfigError(
                f"{prefix}.windows: expected one of {', '.join(WINDOW_RULES)} (which pedestrians a window "
                f"scores), got {windows!r}"
            )
        step = as_int(frame_step, f"{prefix}.frame_step", minimum=1)
        dt = step / as_float(fps, f"{prefix}.fps", minimum=0.0, open_minimum=True)
        return cls(obs, pred, stride, max_agents, rule, step, dt)

    def options(self) -> WindowOptions:
        """The keyword arguments of :func:`tracks_scenes` (and of ETH/UCY's ``file_scenes``)."""
        return {
            "frame_step": self.frame_step,
            "obs_len": self.obs_len,
            "pred_len": self.pred_len,
            "stride": self.stride,
            "max_agents": self.max_agents,
            "windows": self.windows,
            "dt": self.dt,
        }

    def scenes(
        self, rows: np.ndarray, name: str, *, where: str = "", lines: np.ndarray | None = None
    ) -> TrajectoryScenes:
        return tracks_scenes(rows, name, where=where, lines=lines, **self.options())

    def splits(
        self, train: Sequence[TrajectoryScenes], test: Sequence[TrajectoryScenes], *, test_name: str, description: str
    ) -> TrajectorySplits:
        """The train and test scenes of several recordings each; a test split without a scene is one error."""
        test_scenes = TrajectoryScenes.concatenate(list(test))
        if test_scenes.num_scenes == 0:
            raise DataPathError(f"{test_name} gives no scene of {self.obs_len}+{self.pred_len} steps")
        return TrajectorySplits(TrajectoryScenes.concatenate(list(train)), test_scenes, description=description)


def files_provenance(
    name: str, folder: Path, train_files: list[Path], test_files: list[Path], splits
) -> tuple[DataInput, DataInput]:
    """The run's "Datasets" entries of a domain read from track files: its training files (context ``train``) and
    its test files (``evaluation``), each with the digest of the files' bytes and the number of scenes they gave."""
    found = []
    for role, files, scenes in (("train", train_files, splits.train), ("evaluation", test_files, splits.test)):
        found.append(
            DataInput(
                name=f"{name}/{role if role == 'train' else 'test'}",
                source=str(Path(folder).resolve()),
                digest=file_digest(files, folder),
                num_samples=int(scenes.history.shape[0]),
                shape=tuple(int(d) for d in scenes.history.shape[1:]),
                source_type="local",
                context=role,
            )
        )
    return found[0], found[1]


class TrackFileDomain:
    """What the domains read from track files share: their run tags, reading every file at the check (a bad file
    stops the job before any run exists) and keeping the splits read. A subclass sets ``settings`` and
    ``_splits = None`` and implements ``_read``."""

    settings: WindowSettings
    _splits: TrajectorySplits | None

    @property
    def windows(self) -> str:
        return self.settings.windows

    def tags(self) -> dict[str, str]:
        """Run tags: which pedestrians are scored (the published numbers differ by convention)."""
        return {"windows": self.windows}

    def check(self) -> None:
        """Read every file now: a missing folder, a bad file or split stops the job before any run exists."""
        self.load()

    def load(self, rng: np.random.Generator | None = None) -> TrajectorySplits:
        """The train and test scenes (``rng`` is not used: the split is by file). Read once per domain."""
        if self._splits is None:
            self._splits = self._read()
        return self._splits

    def _read(self) -> TrajectorySplits:  # pragma: no cover - interface
        raise NotImplementedError
