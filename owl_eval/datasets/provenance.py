"""What data a run used, as the MLflow UI's "Datasets" section shows it: a :class:`DataInput` per data set a domain
read (name, where it came from, a digest of its content, number of samples, per-sample shape, class names).

A domain tells it with ``provenance() -> tuple[DataInput, ...]``; the runner logs it with the run
(``mlflow.log_input``) and puts the digests into the run's identity, so a resumed sweep never reuses a run made on
data that has changed since. Digests are computed here from the arrays a domain read (:func:`array_digest`: the
same values give the same digest on every machine) or from files (:func:`file_digest`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CHUNK_BYTES = 1 << 20  # hashed a mebibyte at a time: a memory-mapped array is never read whole


@dataclass(frozen=True)
class DataInput:
    """One data set a run read. ``digest``: sha256 hex of its content; ``source``: a path, or the package and
    function that ship it (``scikit-learn 1.7.2: sklearn.datasets.load_digits``); ``source_type``: ``local`` for
    a path, ``package`` for data inside an installed package; ``context``: its role in the run (MLflow's
    ``mlflow.data.context`` tag: ``evaluation``, ``train``, ...)."""

    name: str
    source: str
    digest: str
    num_samples: int
    shape: tuple[int, ...] = ()
    class_names: tuple[str, ...] = ()
    source_type: str = "package"
    context: str = "evaluation"

    def profile(self) -> dict:
        """What the UI shows beside the name: the full digest, sample count, shape and classes."""
        return {
            "sha256": self.digest,
            "num_samples": self.num_samples,
            "shape": list(self.shape),
            "num_classes": len(self.class_names),
            "class_names": list(self.class_names)[:200],
        }


def _update_with_array(h, array: np.ndarray) -> None:
    h.update(f"{array.dtype.str}{tuple(array.shape)}".encode())
    flat = np.ascontiguousarray(array).reshape(-1) if array.ndim else np.ascontiguousarray(array).reshape(1)
    step = max(1, CHUNK_BYTES // max(1, array.itemsize))
    for start in range(0, flat.size, step):
        h.update(np.ascontiguousarray(flat[start : start + step]).tobytes())


def array_digest(*arrays: np.ndarray) -> str:
    """sha256 hex over each array's dtype (byte order included), shape and values in C order, in the order
    given: one changed value, a changed dtype or shape changes it."""
    h = hashlib.sha256()
    for array in arrays:
        _update_with_array(h, np.asarray(array))
    return h.hexdigest()


def file_digest(paths: Iterable[str | Path], root: str | Path) -> str:
    """sha256 hex over the files, in the order of their paths relative to ``root`` (sorted): each path's text
    (UTF-8, ``/`` separators) then its bytes."""
    base = Path(root)
    h = hashlib.sha256()
    for rel, path in sorted((Path(p).resolve().relative_to(base.resolve()).as_posix(), Path(p)) for p in paths):
        h.update(rel.encode())
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(CHUNK_BYTES), b""):
                h.update(chunk)
    return h.hexdigest()


def provenance_of(domain) -> tuple[DataInput, ...]:
    """``domain.provenance()``, or () for a domain that reads no data set (a simulator, an environment)."""
    found = getattr(domain, "provenance", None)
    return tuple(found()) if callable(found) else ()


def path_inputs(options: dict, *, prefix: str) -> tuple[DataInput, ...]:
    """A :class:`DataInput` per option whose name ends in ``path`` and whose value is an existing file or folder
    (``source.path``, ``source.results_path``): what ``owl-eval-evaluate`` scored, with the digest of every file
    under it (:func:`file_digest`); ``num_samples`` counts the files."""
    found = []
    for key, value in options.items():
        if not str(key).endswith("path") or not isinstance(value, str | Path) or not str(value).strip():
            continue
        path = Path(str(value)).expanduser()
        if not path.exists():
            continue
        root = path if path.is_dir() else path.parent
        files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
        found.append(
            DataInput(
                name=f"{prefix}.{key}: {path.name}",
                source=str(path.resolve()),
                digest=file_digest(files, root),
                num_samples=len(files),
                source_type="local",
            )
        )
    return tuple(found)
