"""A folder of pedestrian track files in any of the common layouts, at any frame rate (``domain=trajectory_files``).

Files (each may be gzipped, ``<name>.<ext>.gz``):

- ``.ndjson``: TrajNet++ (trajnetplusplustools), one JSON object per line: ``{"track": {"f": frame, "p": id,
  "x": x, "y": y}}`` positions and ``{"scene": {...}}`` lines, which are not needed (windows are cut from the
  tracks, by the rules of ETH/UCY); a predicted track (``prediction_number``) is refused;
- ``.txt`` / ``.tsv``: whitespace-separated ``frame id x y`` (ETH/UCY's layout);
- ``.csv``: comma-separated ``frame,id,x,y``.

A text or CSV file may start with a header line (found when its first field is not a number): it names the columns
``frame``, ``id``, ``x`` and ``y`` in any order (``f``/``frame_id``; ``p``/``ped_id``/``pedestrian_id``/
``agent_id``/``track_id`` are the same), other columns are ignored. Lines starting with ``#`` and blank lines are
skipped. Coordinates are kept as written (float64). Rows repeated exactly are read once; the same pedestrian at the
same frame at two positions is an error.

Frames: ``frame_step`` frame numbers between consecutive observations, ``fps`` frame numbers per second
(``dt = frame_step / fps``). Windows: exactly ETH/UCY's (``obs_len``, ``pred_len``, ``stride``, ``max_agents``,
``windows``; :mod:`owl_eval.protocols.trajectory.domains.tracks`).

Split: ``test_group`` null reads the sub-folders ``train/`` and ``test/``; otherwise the test split is the files
of ``groups[test_group]`` (or, without such a group, the file named ``test_group``) and every other file of the
folder is the training split (the other groups' files in ``groups`` order, then the rest by name). A file is named
by its name without extensions (``biwi_eth`` for ``biwi_eth.ndjson.gz``) or its full name.
"""

from __future__ import annotations

import fnmatch
import gzip
import json
import os
import zlib
from pathlib import Path

import numpy as np

from owl_eval.datasets.provenance import DataInput
from owl_eval.errors import ConfigError
from owl_eval.json_input import RepeatedKey, refuse_repeated_keys
from owl_eval.protocols.trajectory.domains.scenes import TrajectoryScenes, TrajectorySplits
from owl_eval.protocols.trajectory.domains.tracks import (
    DataPathError,
    TrackFileDomain,
    WindowSettings,
    data_folder,
    file_groups,
    files_provenance,
)
from owl_eval.safe_paths import decode_utf8, read_bytes
from owl_eval.typed import as_str

# extension -> layout; each also read gzipped (<name><ext>.gz)
EXTENSIONS = {".ndjson": "ndjson", ".csv": "csv", ".txt": "text", ".tsv": "text"}
EXTENSIONS_READ = ", ".join(f"{e}, {e}.gz" for e in EXTENSIONS)
COLUMNS = ("frame", "id", "x", "y")
ALIASES = {
    "frame": "frame",
    "f": "frame",
    "frame_id": "frame",
    "id": "id",
    "p": "id",
    "ped": "id",
    "ped_id": "id",
    "pedestrian": "id",
    "pedestrian_id": "id",
    "agent_id": "id",
    "track_id": "id",
    "x": "x",
    "y": "y",
}
TRACK_FIELDS = ("f", "p", "x", "y")
DEFAULT_IGNORE = [
    "*LICENSE*",
    "*README*",
]  # not track files (ETH/UCY's folder holds TRAJECTRON_LICENSE.txt)  # TrajNet++ track: frame, pedestrian, x, y


def layout(name: str) -> str | None:
    """``ndjson``, ``csv`` or ``text`` by the file name's extension (``.gz`` allowed), else None."""
    name = name.lower().removesuffix(".gz")
    return next((kind for ext, kind in EXTENSIONS.items() if name.endswith(ext)), None)


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _header(path: Path, number: int, fields: list[str]) -> list[int]:
    """The column index of frame, id, x, y named by a header line."""
    names = [f.strip().strip("\"'").strip().lower() for f in fields]
    where: dict[str, int] = {}
    for index, name in enumerate(names):
        column = ALIASES.get(name)
        if column is not None:
            if column in where:
                raise DataPathError(f"{path}, line {number}: the header names column {column} twice ({fields})")
            where[column] = index
    missing = [c for c in COLUMNS if c not in where]
    if missing:
        raise DataPathError(
            f"{path}, line {number}: header {fields} has no column {', '.join(missing)}; expected the columns "
            "frame, id, x, y (in any order)"
        )
    return [where[c] for c in COLUMNS]


def _parse_columns(path: Path, text: str, comma: bool) -> tuple[list[list[float]], list[int]]:
    rows: list[list[float]] = []
    lines: list[int] = []
    order: list[int] | None = None
    width = 4
    layout_name = "comma-separated" if comma else "whitespace-separated"
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        fields = [f.strip().strip('"') for f in line.split(",")] if comma else line.split()
        if order is None:
            order = [0, 1, 2, 3]
            if _number(fields[0]) is None:  # a header line
                order, width = _header(path, number, fields), len(fields)
                continue
        values = [_number(fields[i]) for i in order] if len(fields) == width else [None]
        if any(v is None for v in values):
            expected = "4 numbers frame, id, x, y" if width == 4 else f"{width} fields with numbers in frame, id, x, y"
            raise DataPathError(f"{path}, line {number}: expected {expected} ({layout_name}), got {line[:80]!r}")
        rows.append(values)  # type: ignore[arg-type]  # no None left
        lines.append(number)
    return rows, lines


def _track_number(path: Path, number: int, track: dict, field: str) -> float:
    value = track[field]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DataPathError(f"{path}, line {number}: track field {field!r} is {value!r}; expected a number")
    return float(value)


def _parse_ndjson(path: Path, text: str) -> tuple[list[list[float]], list[int]]:
    rows: list[list[float]] = []
    lines: list[int] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        try:
            item = json.loads(line, object_pairs_hook=refuse_repeated_keys)
        except RepeatedKey as exc:
            raise DataPathError(f"{path}, line {number}: {exc}") from None
        except RecursionError:
            raise DataPathError(f"{path}, line {number}: JSON nested too deeply to read") from None
        except json.JSONDecodeError as exc:
            raise DataPathError(
                f"{path}, line {number}: not valid JSON ({exc.msg}, column {exc.colno}); expected one JSON object "
                'per line, {"track": {"f": frame, "p": id, "x": x, "y": y}} or {"scene": {...}} (TrajNet++)'
            ) from None
        except ValueError as exc:  # an integer of more than 4300 digits
            raise DataPathError(f"{path}, line {number}: not valid JSON ({exc})") from None
        track = item.get("track") if isinstance(item, dict) else None
        if isinstance(item, dict) and "scene" in item and track is None:
            continue  # scenes are not needed: windows are cut from the tracks
        if not isinstance(track, dict):
            raise DataPathError(
                f"{path}, line {number}: expected a TrajNet++ object "
                f'{{"track": {{"f": frame, "p": id, "x": x, "y": y}}}} or {{"scene": {{...}}}}, got {line[:80]!r}'
            )
        missing = [f for f in TRACK_FIELDS if f not in track]
        if missing:
            raise DataPathError(
                f"{path}, line {number}: track without field {', '.join(map(repr, missing))}; expected the fields "
                "f (frame), p (pedestrian id), x, y"
            )
        if track.get("prediction_number") is not None:
            raise DataPathError(
                f"{path}, line {number}: a predicted track (prediction_number); expected observed tracks only"
            )
        rows.append([_track_number(path, number, track, f) for f in TRACK_FIELDS])
        lines.append(number)
    return rows, lines


def read_track_file(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """``(rows[N, 4], lines[N])``: float64 ``[frame, id, x, y]`` of one file (every value finite, exact repeats
    dropped) and the line each row is on. Anything else is one :class:`DataPathError` naming the file and line."""
    data = read_bytes(path, what="trajectory file")
    if path.name.lower().endswith(".gz"):
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise DataPathError(f"{path}: not a readable gzip file ({exc})") from None
    text = decode_utf8(path, data, error=DataPathError)
    kind = layout(path.name)
    if kind == "ndjson":
        parsed, numbers = _parse_ndjson(path, text)
    else:
        parsed, numbers = _parse_columns(path, text, comma=kind == "csv")
    if not parsed:
        raise DataPathError(f"{path}: no rows (expected frame, id, x, y positions)")
    rows = np.asarray(parsed, dtype=np.float64).reshape(-1, 4)
    lines = np.asarray(numbers, dtype=np.int64)
    bad = ~np.isfinite(rows)
    if bad.any():
        row, column = (int(i) for i in np.argwhere(bad)[0])
        raise DataPathError(
            f"{path}, line {lines[row]}: {COLUMNS[column]} is {rows[row, column]}; expected a finite number"
        )
    return _without_repeats(path, rows, lines)


def _without_repeats(path: Path, rows: np.ndarray, lines: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((lines, rows[:, 1], rows[:, 0]))  # by frame, id, then line
    s = rows[order]
    same = (s[1:, 0] == s[:-1, 0]) & (s[1:, 1] == s[:-1, 1])
    if not same.any():
        return rows, lines
    differ = same & np.any(s[1:, 2:] != s[:-1, 2:], axis=1)
    if differ.any():
        i = int(np.argmax(differ))
        a, b = order[i], order[i + 1]
        raise DataPathError(
            f"{path}, line {lines[b]}: pedestrian {rows[b, 1]:g} at frame {rows[b, 0]:g} again, at "
            f"({float(rows[b, 2])!r}, {float(rows[b, 3])!r}); line {lines[a]} has it at "
            f"({float(rows[a, 2])!r}, {float(rows[a, 3])!r}): "
            "expected one position per pedestrian and frame"
        )
    keep = np.ones(len(rows), bool)
    keep[order[1:][same]] = False
    return rows[keep], lines[keep]


def stem(name: str) -> str:
    return name.split(".")[0]


class TrajectoryFilesDomain(TrackFileDomain):
    name = "trajectory_files"

    def __init__(
        self,
        path: str | None = None,
        test_group: str | None = None,
        groups: dict | None = None,
        ignore: list | None = None,
        obs_len: int = 8,
        pred_len: int = 12,
        stride: int = 1,
        max_agents: int = 32,
        windows: str = "cvm",
        frame_step: int = 10,
        fps: float = 25.0,
    ):
        self.path = path
        self.test_group = None if test_group is None else as_str(test_group, "domain.test_group")
        self.groups = {} if groups is None else file_groups(groups)
        self.ignore = _patterns(ignore)
        self.settings = WindowSettings.parse(
            obs_len=obs_len,
            pred_len=pred_len,
            stride=stride,
            max_agents=max_agents,
            windows=windows,
            frame_step=frame_step,
            fps=fps,
        )
        self.obs_len, self.pred_len, self.dt = self.settings.obs_len, self.settings.pred_len, self.settings.dt
        self._splits: TrajectorySplits | None = None  # read once (check, then load)

    def _files(self, folder: Path) -> dict[str, Path]:
        """The track files of ``folder`` by name without extensions, in name order."""
        found: dict[str, Path] = {}
        for entry in sorted(os.listdir(folder)):
            if entry.startswith(".") or layout(entry) is None or (folder / entry).is_dir():
                continue
            if any(fnmatch.fnmatchcase(entry, pattern) for pattern in self.ignore):
                continue
            key = stem(entry)
            if key in found:
                raise DataPathError(
                    f"{folder}: two files are named {key!r} ({found[key].name}, {entry}); keep one of them"
                )
            found[key] = folder / entry
        if not found:
            raise DataPathError(
                f"domain.path: {folder} has no track file (read: {EXTENSIONS_READ}); set domain.path=<folder of "
                "TrajNet++ .ndjson, 'frame id x y' text or CSV files>"
            )
        return found

    def files(self) -> tuple[list[Path], list[Path], str]:
        """(train files, test files, the test split's name)."""
        folder = data_folder(self.path, f"track files ({EXTENSIONS_READ})")
        if self.test_group is None:
            if not ((folder / "train").is_dir() and (folder / "test").is_dir()):
                raise DataPathError(
                    f"domain.path: {folder} has no sub-folders train/ and test/; set domain.test_group=<a group of "
                    "domain.groups or a file name> to split the folder's files instead"
                )
            train_found, test_found = self._files(folder / "train"), self._files(folder / "test")
            return list(train_found.values()), list(test_found.values()), "test/"
        found = self._files(folder)

        def lookup(name: str, key: str) -> Path:
            for path in found.values():
                if name in (path.name, stem(path.name)):
                    return path
            raise ConfigError(f"{key}: {name!r} names no file in {folder} (files: {', '.join(found)})")

        if self.test_group in self.groups:
            test = [lookup(n, f"domain.groups.{self.test_group}") for n in self.groups[self.test_group]]
        elif any(self.test_group in (p.name, k) for k, p in found.items()):
            test = [lookup(self.test_group, "domain.test_group")]
        else:
            raise ConfigError(
                f"domain.test_group: {self.test_group!r} names no group of domain.groups "
                f"({', '.join(self.groups) or 'none'}) and no file in {folder} (files: {', '.join(found)})"
            )
        grouped = [lookup(n, f"domain.groups.{g}") for g, names in self.groups.items() for n in names]
        train: list[Path] = []
        for path in grouped + list(found.values()):
            if path not in test and path not in train:
                train.append(path)
        if not train:
            raise DataPathError(f"domain.path: {folder} has no file besides the test split's for training")
        return train, test, f"test group {self.test_group!r}"

    def provenance(self) -> tuple[DataInput, ...]:
        """The train and test files read, with their digests (:func:`~.tracks.files_provenance`)."""
        train, test, _ = self.files()
        folder = data_folder(self.path, "track files")
        return files_provenance(folder.name, folder, train, test, self.load())

    def scenes_of(self, path: Path) -> TrajectoryScenes:
        rows, lines = read_track_file(path)
        return self.settings.scenes(rows, stem(path.name), where=str(path), lines=lines)

    def _read(self) -> TrajectorySplits:
        train_files, test_files, test_name = self.files()
        names = [p.name for p in test_files]
        return self.settings.splits(
            [self.scenes_of(p) for p in train_files],
            [self.scenes_of(p) for p in test_files],
            test_name=f"{test_name} ({names})",
            description=f"test={self.test_group or 'test/'}: {names}",
        )


def _patterns(patterns) -> list[str]:
    """``domain.ignore``: a list of file name patterns (``fnmatch``: ``*LICENSE*``)."""
    if patterns is None:
        return list(DEFAULT_IGNORE)
    if isinstance(patterns, str) or not isinstance(patterns, (list, tuple)):
        raise ConfigError(f"domain.ignore: expected a list of file name patterns, got {patterns!r}")
    return [as_str(p, f"domain.ignore[{i}]") for i, p in enumerate(patterns)]
