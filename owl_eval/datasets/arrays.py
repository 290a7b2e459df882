"""Arrays: an ``.npz`` file, or a folder of ``.npy`` files.

The features and labels are the arrays named by ``features`` / ``labels`` (``X`` / ``y``), or pairs
``<features>_<split>`` / ``<labels>_<split>`` (``X_train`` / ``y_train``, ``X_test`` / ``y_test``) that give
splits. An optional ``classes`` array (strings) names the classes of integer labels.

Uncompressed ``.npy`` files and uncompressed (``ZIP_STORED``, as ``np.savez`` writes) ``.npz`` members are
memory-mapped, never copied: a member's data starts after its zip local header (30 bytes, the name and the extra
field) and its ``.npy`` header. Compressed members (``np.savez_compressed``) are read into memory, after their
declared size is checked (at most :data:`MAX_MEMBER_BYTES`, 2 GiB, and the memory available: a zip bomb is refused
before it is inflated; :func:`owl_eval.formats.npz.check_inflated_size`). Arrays
of Python objects are refused (no pickles).
"""

from __future__ import annotations

import functools
import re
import struct
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

from owl_eval.datasets.base import DataSet, Digest, fail, make_dataset
from owl_eval.errors import MetricInputError
from owl_eval.formats.names import text_names
from owl_eval.formats.npz import MAX_INFLATED_BYTES, compressed_array, distinct_members, stored_array, verify_npz

MAX_MEMBER_BYTES = MAX_INFLATED_BYTES  # the largest compressed .npz member inflated (one bound with records)
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, NotImplementedError, struct.error)

Loader = Callable[[], np.ndarray]


def _npy_header(fh, where: str) -> tuple[tuple[int, ...], bool, np.dtype]:
    try:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        elif version in ((2, 0), (3, 0)):
            reader = np.lib.format.read_array_header_2_0
            shape, fortran, dtype = reader(fh)
        else:
            raise ValueError(version)
    except _ZIP_ERRORS:
        raise fail(f"{where}: not a readable .npy array; expected an array saved with numpy") from None
    if dtype.hasobject:
        raise fail(f"{where}: holds Python objects (dtype {dtype}); expected numbers or strings (no pickles)")
    return shape, fortran, dtype


def _stored_member(path: Path, info: zipfile.ZipInfo) -> np.ndarray:
    """A stored member memory-mapped (:func:`owl_eval.formats.npz.stored_array`); its CRC-32 was checked when the
    file was opened (:func:`_npz_loaders`)."""
    try:
        with open(path, "rb") as fh:
            return stored_array(path, fh, info, info.filename[:-4])
    except MetricInputError as exc:
        raise fail(str(exc)) from None


def _compressed_member(path: Path, info: zipfile.ZipInfo) -> np.ndarray:
    """A deflated member read (:func:`owl_eval.formats.npz.compressed_array`), after a size check on what it declares
    it inflates to (:func:`owl_eval.formats.npz.check_inflated_size`): a small file that would expand to gigabytes
    is refused before any byte is inflated."""
    where = f"{path}: member {info.filename!r}"
    try:
        with zipfile.ZipFile(path) as zf:
            return compressed_array(path, zf, info)
    except MetricInputError as exc:
        raise fail(str(exc)) from None
    except _ZIP_ERRORS:
        raise fail(f"{where} is damaged or truncated; expected a readable .npz member") from None


def _npz_loaders(path: Path) -> dict[str, Loader]:
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except _ZIP_ERRORS:
        raise fail(f"{path}: not a readable .npz (zip) file; expected a file saved with np.savez") from None
    try:
        distinct_members(path, infos)
        verify_npz(path, stored_only=True)  # a map bypasses zipfile's CRC-32 check: a flipped byte is named here
    except MetricInputError as exc:
        raise fail(str(exc)) from None
    loaders: dict[str, Loader] = {}
    for info in infos:
        if not info.filename.endswith(".npy"):
            continue
        read = _stored_member if info.compress_type == zipfile.ZIP_STORED else _compressed_member
        loaders[info.filename[:-4]] = functools.partial(read, path, info)
    return loaders


def _npy(path: Path) -> np.ndarray:
    with open(path, "rb") as fh:
        _npy_header(fh, str(path))  # refuses objects before numpy sees the file
    try:
        return np.load(path, mmap_mode="r", allow_pickle=False)
    except _ZIP_ERRORS:
        raise fail(
            f"{path}: not a readable .npy array (damaged or truncated); expected an array saved with numpy"
        ) from None


def _pairs(names: list[str], features: str, labels: str, where: str) -> dict[str, tuple[str, str]]:
    """Split name -> (features array, labels array)."""
    pattern = re.compile(rf"^{re.escape(features)}_(.+)$")
    splits = {m.group(1): (n, f"{labels}_{m.group(1)}") for n in sorted(names) if (m := pattern.match(n))}
    if not splits:
        for name in (features, labels):
            if name not in names:
                raise fail(f"{where}: array {name!r} not found; the arrays are {sorted(names)[:30]}")
        return {"all": (features, labels)}
    if features in names:
        raise fail(
            f"{where}: holds both {features!r} and split arrays "
            f"{[f for f, _ in splits.values()]}; expected one layout (either {features}/{labels} or per-split pairs)"
        )
    for _, lab in splits.values():
        if lab not in names:
            raise fail(f"{where}: array {lab!r} not found; the arrays are {sorted(names)[:30]}")
    return splits


def read_arrays(path: Path, *, features: str, labels: str) -> DataSet:
    """An ``.npz`` file or a folder of ``.npy`` files as a :class:`DataSet`."""
    digest = Digest(path)
    if path.is_file():
        fmt = "npz"
        loaders = _npz_loaders(path)
        digest.add(path)
    else:
        fmt = "npy"
        files = {p.stem: p for p in sorted(path.iterdir()) if p.suffix == ".npy" and p.is_file()}
        loaders = {name: functools.partial(_npy, p) for name, p in files.items()}
    pairs = _pairs(list(loaders), features, labels, str(path))
    used = {n for pair in pairs.values() for n in pair} | ({"classes"} & set(loaders))
    if fmt == "npy":
        for name in sorted(used):
            digest.add(files[name])

    def where(name: str) -> str:
        return f"{path}: member {name + '.npy'!r}" if fmt == "npz" else str(files[name])

    feats = {split: loaders[f]() for split, (f, _) in pairs.items()}
    labs = {split: loaders[lab]() for split, (_, lab) in pairs.items()}
    for split, (f, _) in pairs.items():
        if feats[split].ndim < 1:
            raise fail(f"{where(f)}: array {f!r} is a scalar; expected features [N, ...]")
    classes = None
    if "classes" in loaders:
        arr = np.asarray(loaders["classes"]())
        if arr.ndim != 1 or arr.dtype.kind not in "SU":
            raise fail(
                f"{where('classes')}: array 'classes' has dtype {arr.dtype} and shape {arr.shape}; expected [C] strings"
            )
        classes = list(text_names(arr, where=where("classes"), error=fail))  # S bytes: UTF-8, named if not
    for split, (f, lab) in pairs.items():
        if labs[split].shape[:1] != feats[split].shape[:1]:
            raise fail(
                f"{path}: array {f!r} has {feats[split].shape[0]} rows but {lab!r} has "
                f"{labs[split].shape[0] if labs[split].ndim else 0}; expected one label per sample"
            )
    return make_dataset(path=path, fmt=fmt, features=feats, labels=labs, digest=digest, classes=classes)
