"""ETH/UCY pedestrian trajectories (FORMATS.md "ETH/UCY text files"), held out by scene group.

Files: ``<name>.txt`` or ``<name>.txt.gz``, tab-separated ``frame  pedestrian_id  x  y`` (metres), frames every
``frame_step`` (10, i.e. 0.4 s at 2.5 Hz). Each file becomes a dense grid ``[time step, pedestrian, 2]``
(NaN where a pedestrian is absent; frames are placed by ``(frame - first frame) / frame_step``, so a gap
in the file is a gap in time, not a skipped step).

Scenes (see :func:`owl_eval.protocols.trajectory.domains.scenes.windows_from_grid`): a scene is a window start every
``stride`` steps, ``obs_len`` observed plus ``pred_len`` future steps. Which pedestrians it scores is the
``windows`` setting, one of the published conventions: ``cvm`` (default; present at all ``obs_len``
observed steps and at least two future steps, windows running past the end of the recording kept, exactly as the
constant-velocity paper's evaluate.py, Schoeller et al. 2020),
``social_gan`` (present at all ``obs_len + pred_len`` steps, windows with at least two of them, as
Social-GAN's loader), or ``last_observed`` (present at the last observed step; histories may be a single point). Missing steps are masked (NaN); windows with more than ``max_agents``
pedestrians are split into several scenes, so nobody is dropped. The run's tags say which (``windows``).

Split: leave one group out. ``groups`` maps a group name to its files (the benchmark's eth, hotel, univ =
students001 + students003, zara1, zara2); the files of ``test_group`` are the test split, every other
file in ``groups`` plus ``extra_train_files`` (zara03, uni_examples) is the training split.
"""

from __future__ import annotations

import functools
import gzip
import io
import os
import warnings
import zlib
from pathlib import Path

import numpy as np

from owl_eval.datasets.provenance import DataInput
from owl_eval.errors import ConfigError
from owl_eval.protocols.trajectory.domains.scenes import TrajectoryScenes, TrajectorySplits
from owl_eval.protocols.trajectory.domains.tracks import (  # noqa: F401  (track_grid: importable here)
    DataPathError,
    TrackFileDomain,
    WindowSettings,
    data_folder,
    files_provenance,
    track_grid,
    tracks_scenes,
)
from owl_eval.protocols.trajectory.domains.tracks import file_groups as _groups
from owl_eval.protocols.trajectory.domains.tracks import file_names as _file_names
from owl_eval.safe_paths import read_bytes
from owl_eval.typed import as_str

DEFAULT_GROUPS = {
    "eth": ["biwi_eth"],
    "hotel": ["biwi_hotel"],
    "univ": ["students001", "students003"],
    "zara1": ["crowds_zara01"],
    "zara2": ["crowds_zara02"],
}
DEFAULT_EXTRA_TRAIN = ["crowds_zara03", "uni_examples"]


def find_file(directory: Path, name: str) -> Path:
    """``<name>.txt.gz``, ``<name>.txt`` or ``<name>`` in ``directory``: a regular file, never through a link."""
    for candidate in (directory / f"{name}.txt.gz", directory / f"{name}.txt", directory / name):
        try:
            os.lstat(candidate)
        except OSError:
            continue
        return candidate  # a link or a folder here is reported by the read (owl_eval.safe_paths)
    raise DataPathError(
        f"domain.path: {directory} has no file {name}.txt.gz or {name}.txt (ETH/UCY tab-separated "
        "'frame pedestrian_id x y'); set domain.path=<folder with the ETH/UCY files>"
    )


def _exists(directory: Path, name: str) -> bool:
    try:
        find_file(directory, name)
        return True
    except DataPathError:
        return False


def read_tracks(path: Path) -> np.ndarray:
    """Rows ``[frame, pedestrian_id, x, y]`` of one file as float64 ``[N, 4]``, every value finite.

    The file is read without following a link (``owl_eval.safe_paths``); anything unreadable (bad gzip, not
    UTF-8, not numbers) is one :class:`DataPathError` naming the file."""
    data = read_bytes(path, what="ETH/UCY file")
    try:
        if path.name.endswith(".gz"):
            data = gzip.decompress(data)
        text = data.decode("utf-8")
    except (OSError, EOFError, zlib.error) as exc:
        raise DataPathError(f"{path}: not a readable gzip file ({exc})") from None
    except UnicodeDecodeError as exc:
        raise DataPathError(f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})") from None
    if not any(line.strip() and not line.lstrip().startswith("#") for line in text.splitlines()):
        raise DataPathError(f"{path}: no rows (expected tab-separated frame, pedestrian_id, x, y)")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rows = np.loadtxt(io.StringIO(text), dtype=np.float64, ndmin=2)
    except ValueError as exc:
        raise DataPathError(f"{path}: expected 4 numeric tab-separated columns frame, id, x, y ({exc})") from None
    if rows.shape[1] != 4:
        raise DataPathError(f"{path}: expected 4 columns frame, pedestrian_id, x, y; got {rows.shape[1]}")
    bad = ~np.isfinite(rows)
    if bad.any():
        row, column = (int(i) for i in np.argwhere(bad)[0])
        names = ("frame", "pedestrian_id", "x", "y")
        raise DataPathError(
            f"{path}: data row {row + 1}, column {names[column]}: expected a finite number, got {rows[row, column]}"
        )
    return rows


def file_scenes(
    path: Path, *, frame_step: int, obs_len: int, pred_len: int, stride: int, max_agents: int, windows: str, dt: float
) -> TrajectoryScenes:
    return tracks_scenes(
        read_tracks(path),
        path.name.split(".")[0],
        frame_step=frame_step,
        obs_len=obs_len,
        pred_len=pred_len,
        stride=stride,
        max_agents=max_agents,
        windows=windows,
        dt=dt,
        where=str(path),
    )


class EthUcyDomain(TrackFileDomain):
    name = "eth_ucy"

    def __init__(
        self,
        path: str | None = None,
        test_group: str = "eth",
        groups: dict | None = None,
        extra_train_files: list | None = None,
        obs_len: int = 8,
        pred_len: int = 12,
        stride: int = 1,
        max_agents: int = 32,
        windows: str = "cvm",
        frame_step: int = 10,
        fps: float = 25.0,
    ):
        self.path = path
        self.groups = _groups(DEFAULT_GROUPS if groups is None else groups)
        self.extra_train_files = _file_names(
            DEFAULT_EXTRA_TRAIN if extra_train_files is None else extra_train_files, "domain.extra_train_files"
        )
        self.test_group = as_str(test_group, "domain.test_group")
        if self.test_group not in self.groups:
            raise ConfigError(f"domain.test_group: expected one of {sorted(self.groups)}, got {test_group!r}")
        self.settings = WindowSettings.parse(
            obs_len=obs_len,
            pred_len=pred_len,
            stride=stride,
            max_agents=max_agents,
            windows=windows,
            frame_step=frame_step,
            fps=fps,
        )
        self.obs_len, self.pred_len = self.settings.obs_len, self.settings.pred_len
        self.stride, self.max_agents = self.settings.stride, self.settings.max_agents
        self.frame_step, self.dt = self.settings.frame_step, self.settings.dt
        self._splits: TrajectorySplits | None = None  # read once (check, then load)

    def _directory(self) -> Path:
        return data_folder(
            self.path, "the ETH/UCY files (biwi_eth.txt.gz, biwi_hotel.txt.gz, crowds_zara01.txt.gz, ...)"
        )

    def files(self) -> tuple[list[Path], list[Path]]:
        """(train files, test files), checked to exist."""
        directory = self._directory()
        test_names = self.groups[self.test_group]
        train_names = [f for g, names in self.groups.items() if g != self.test_group for f in names]
        train_names += [f for f in self.extra_train_files if f not in train_names and f not in test_names]
        missing = [n for n in test_names + train_names if not _exists(directory, n)]
        if missing:
            raise DataPathError(
                f"domain.path: {directory} has no file {', '.join(missing)} (.txt.gz or .txt, ETH/UCY "
                "tab-separated 'frame pedestrian_id x y'); set domain.path=<folder with the ETH/UCY files>"
            )
        return [find_file(directory, n) for n in train_names], [find_file(directory, n) for n in test_names]

    def provenance(self) -> tuple[DataInput, ...]:
        """The train and test files read, with their digests (:func:`~.tracks.files_provenance`)."""
        train, test = self.files()
        return files_provenance(f"eth_ucy-{self.test_group}", self._directory(), train, test, self.load())

    def _read(self) -> TrajectorySplits:
        train_files, test_files = self.files()
        scenes = functools.partial(file_scenes, **self.settings.options())
        names = [p.name for p in test_files]
        return self.settings.splits(
            [scenes(p) for p in train_files],
            [scenes(p) for p in test_files],
            test_name=f"test group {self.test_group!r} ({names})",
            description=f"test={self.test_group}: {names}",
        )
