"""What every reader returns (:class:`DataSet` of :class:`Split`), the content digest, and the checks shared by
the readers (labels to class ids, finite features, one-line errors).

Digest rule (:class:`Digest`): sha256 over the files read, in the order of their relative paths sorted as Python
sorts ``str`` (relative to the path given, ``/``-separated; a single file is named by its file name). For each
file, in that order, the hash is fed ``relpath.encode("utf-8") + b"\\0" + str(size).encode("ascii") + b"\\0"``
and then the file's bytes (read in 1 MiB chunks, never whole). Equivalently::

    h = hashlib.sha256()
    for rel in sorted(files):
        data = (root / rel).read_bytes()
        h.update(rel.encode() + b"\\0" + str(len(data)).encode() + b"\\0" + data)
    digest = h.hexdigest()

The size makes the boundaries between files unambiguous. Only the files a reader reads are hashed (for a folder of
``.npy`` files, the arrays used; for an ``.npz``, the whole file).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from owl_eval.errors import ConfigError
from owl_eval.formats.names import distinct_names

CHUNK_BYTES = 1 << 20  # bytes per read while hashing
CHECK_ROWS = 65536  # rows per finite check (fewer when rows are large: at most CHECK_ELEMENTS values a chunk)
CHECK_ELEMENTS = 1 << 21


def fail(message: str) -> ConfigError:
    """A :class:`ConfigError` whose message is one line (newlines in names or values are shown escaped)."""
    return ConfigError(message.replace("\r", "\\r").replace("\n", "\\n"))


@dataclass(frozen=True)
class Split:
    """One split of a data set: ``features`` ``[N, ...]`` (the file's dtype; a ``np.memmap`` where the format
    allows) and ``labels`` ``[N]`` int64 class ids in ``0..C-1``."""

    features: np.ndarray
    labels: np.ndarray

    def __len__(self) -> int:
        return int(self.labels.shape[0])


@dataclass(frozen=True)
class DataSet:
    """A classification data set read from ``source``: its class names, its splits (``"all"`` or its own), the
    sha256 ``digest`` of the bytes read (rule in the module docstring) and the ``format`` it was read as."""

    name: str
    source: str
    class_names: tuple[str, ...]
    splits: dict[str, Split] = field(repr=False)
    digest: str
    format: str

    @property
    def num_samples(self) -> int:
        return sum(len(s) for s in self.splits.values())

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of one sample (``features.shape[1:]``)."""
        return tuple(int(n) for n in next(iter(self.splits.values())).features.shape[1:])

    @property
    def num_classes(self) -> int:
        return len(self.class_names)

    def profile(self) -> dict[str, Any]:
        """What was read, as plain values (for a log of the run's inputs)."""
        return {
            "name": self.name,
            "source": self.source,
            "format": self.format,
            "digest": self.digest,
            "num_samples": self.num_samples,
            "shape": list(self.shape),
            "dtype": str(next(iter(self.splits.values())).features.dtype),
            "class_names": list(self.class_names),
            "splits": {name: len(s) for name, s in self.splits.items()},
        }


class Digest:
    """The streaming sha256 of the files read (rule in the module docstring); files may be added in any order."""

    def __init__(self, root: Path):
        self.root = root
        self._files: dict[str, Path] = {}

    def add(self, path: Path) -> None:
        rel = path.name if path == self.root else path.relative_to(self.root).as_posix()
        self._files[rel] = path

    def hexdigest(self) -> str:
        h = hashlib.sha256()
        buffer = bytearray(CHUNK_BYTES)
        view = memoryview(buffer)
        for rel in sorted(self._files):
            path = self._files[rel]
            try:
                with open(path, "rb") as fh:
                    size = fh.seek(0, 2)
                    fh.seek(0)
                    h.update(rel.encode("utf-8", "surrogateescape") + b"\0" + str(size).encode("ascii") + b"\0")
                    while n := fh.readinto(buffer):
                        h.update(view[:n])
            except OSError as exc:
                raise fail(f"{path}: cannot be read ({exc.strerror or type(exc).__name__})") from None
        return h.hexdigest()


def text(value: object, *, where: str) -> str:
    """A class or split name as text: ``str`` as it is, ``bytes`` decoded as UTF-8; anything else is an error."""
    if isinstance(value, bytes | np.bytes_):
        raw = bytes(value)
        try:
            value = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise fail(f"{where}: name {raw[:40]!r} is not valid UTF-8 text; expected text names") from None
    if not isinstance(value, str):
        raise fail(f"{where}: name {value!r} is not text; expected text names")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise fail(f"{where}: name {value!r} is not valid UTF-8 text; expected text names") from None
    return value


def encode_labels(
    labels: Mapping[str, np.ndarray], *, where: str, classes: Iterable[object] | None = None
) -> tuple[dict[str, np.ndarray], tuple[str, ...]]:
    """Labels of every split as int64 ids and the class names.

    With ``classes`` (a ``classes`` array, ClassLabel names): integer labels index them (``0..C-1``). Without:
    string labels are class names (sorted unique -> ids) and integer labels name their classes by their values
    (sorted unique -> ids; ``0..C-1`` stay as they are).
    """
    names = None if classes is None else tuple(text(c, where=f"{where} (class names)") for c in classes)
    if names is not None:
        distinct_names(names, where=f"{where} (class names)", error=fail)
    arrays = {}
    for split, arr in labels.items():
        arr = np.asarray(arr)
        if arr.ndim != 1:
            raise fail(f"{where}: labels of split {split!r} have shape {arr.shape}; expected one label per sample [N]")
        if arr.dtype.kind == "O":
            arr = np.array([text(v, where=where) for v in arr], dtype=str) if len(arr) else arr.astype(str)
        if arr.dtype.kind not in "iuSU":
            raise fail(f"{where}: labels have dtype {arr.dtype}; expected integer class ids or string class names")
        arrays[split] = arr
    kinds = {a.dtype.kind for a in arrays.values()}
    if kinds & set("SU") and kinds & set("iu"):
        raise fail(f"{where}: some splits have integer labels and others string labels; expected one kind")
    out: dict[str, np.ndarray] = {}
    if kinds & set("SU"):
        if names is not None:
            raise fail(f"{where}: labels are strings and a classes list is given; expected integer labels with it")
        decoded = {s: np.array([text(v, where=where) for v in a.tolist()], dtype=str) for s, a in arrays.items()}
        names = tuple(np.unique(np.concatenate(list(decoded.values()))).tolist())
        for s, a in decoded.items():
            out[s] = np.searchsorted(np.array(names, dtype=str), a).astype(np.int64)
        return out, names
    if names is not None:
        for s, a in arrays.items():
            bad = np.flatnonzero((a < 0) | (a >= len(names)))
            if len(bad):
                raise fail(
                    f"{where}: label {a[bad[0]]} at row {bad[0]} (split {s!r}) is outside 0..{len(names) - 1}; "
                    f"expected class ids indexing the {len(names)} class names"
                )
            out[s] = a.astype(np.int64)
        return out, names
    values = np.unique(np.concatenate([a.astype(np.int64) for a in arrays.values()]))
    for s, a in arrays.items():
        out[s] = np.searchsorted(values, a.astype(np.int64)).astype(np.int64)
    return out, tuple(str(v) for v in values.tolist())


def check_features(features: np.ndarray, *, where: str) -> None:
    """Features are numbers; floats are finite (checked in chunks of rows: a memmap is never loaded whole)."""
    kind = features.dtype.kind
    if kind not in "biuf":
        raise fail(f"{where}: features have dtype {features.dtype}; expected numbers (float32, float64 or uint8)")
    if features.ndim < 1:
        raise fail(f"{where}: features are a scalar; expected an array [N, ...]")
    if kind != "f" or features.shape[0] == 0:
        return
    per_row = max(1, int(np.prod(features.shape[1:], dtype=np.int64)))
    step = max(1, min(CHECK_ROWS, CHECK_ELEMENTS // per_row))
    bad: list[int] = []
    for start in range(0, features.shape[0], step):
        chunk = np.asarray(features[start : start + step])
        finite = np.isfinite(chunk)
        if finite.all():
            continue
        rows = np.flatnonzero(~finite.reshape(len(chunk), -1).all(axis=1))
        bad.extend(int(r) + start for r in rows[: 5 - len(bad)])
        if len(bad) >= 5:
            break
    if bad:
        raise fail(f"{where}: features hold NaN or infinite values (rows {bad}); expected finite numbers")


def make_dataset(
    *,
    path: Path,
    fmt: str,
    features: Mapping[str, np.ndarray],
    labels: Mapping[str, np.ndarray],
    digest: Digest,
    classes: Iterable[object] | None = None,
    where: str | None = None,
) -> DataSet:
    """Checks the splits (lengths, per-sample shape, finite values, not empty) and builds the :class:`DataSet`."""
    where = where or str(path)
    ids, names = encode_labels(labels, where=where, classes=classes)
    splits = {}
    shapes = set()
    for name, feats in features.items():
        check_features(feats, where=f"{where} (split {name!r})" if len(features) > 1 else where)
        if feats.shape[0] != ids[name].shape[0]:
            raise fail(
                f"{where}: split {name!r} has {feats.shape[0]} feature rows but {ids[name].shape[0]} labels; "
                "expected one label per sample"
            )
        shapes.add((feats.shape[1:], feats.dtype))
        splits[name] = Split(features=feats, labels=ids[name])
    if len(shapes) > 1:
        found = ", ".join(f"{n!r}: {f.shape[1:]} {f.dtype}" for n, f in features.items())
        raise fail(f"{where}: splits differ in sample shape or dtype ({found}); expected one")
    if sum(len(s) for s in splits.values()) == 0:
        raise fail(f"{where}: the data set holds no samples; expected at least one")
    empty = [name for name, split in splits.items() if len(split) == 0]
    if empty:  # an agent trained on nothing, or trials of nothing
        raise fail(f"{where}: split {empty[0]!r} holds no samples; expected at least one in every split")
    return DataSet(
        name=path.name,
        source=str(path),
        class_names=names,
        splits=splits,
        digest=digest.hexdigest(),
        format=fmt,
    )
