"""Trajectory predictions in General-Framework's arrays, one ``.npz`` (FORMATS.md, seed 003).

Arrays: ``Path_true[N_S, 1, N_A, N_O, 2]``, ``Path_pred[N_S, N_P, N_A, N_O, 2]``, ``Pred_steps[N_S, N_A, N_O]``
(bool, or 0/1 integers: the steps that count), optional log-probabilities ``[N_S, N_P + 1, N_A]`` (last
column: the truth; they replace the KDE), and optional behaviour-class outputs ``P_true[N_S, N_C]`` (one-hot),
``P_pred[N_S, N_C]`` (rows summing to 1) with ``Class_names[N_C]`` (strings), scored with AUC, class ECE and
TNR-PR. Names are configurable; other arrays in the file are ignored.

The file is never unpickled and never loaded whole: every member's CRC-32 is checked first (a member
damaged after it was written is an error naming it, never scored), uncompressed members are memory-mapped
(:func:`owl_eval.formats.npz.npz_arrays`), validated ``source.chunk_size`` scenes at a time, and the metric
table is streamed the same way (:func:`owl_eval.protocols.trajectory.evaluation.trajectory_table_npz`), so memory stays bounded
by the chunk. Validation reads the file once before any MLflow run exists; the metrics read it again.
Positions at counted steps must be finite and within +-1e12 m (:mod:`owl_eval.protocols.trajectory.sources.checks`):
larger values are export errors and overflow the squared distances. Every ``source.*`` option is typed
(:mod:`owl_eval.typed`): ``source.chunk_size=2.5`` is one error naming the key.
"""

from __future__ import annotations

import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from owl_eval.errors import UnsafePathError
from owl_eval.formats.checksums import sha256_of
from owl_eval.formats.names import distinct_names, text_names
from owl_eval.metrics.validation import MetricInputError
from owl_eval.protocols.trajectory.sources.checks import check_class_outputs, check_coordinates, check_log_probs
from owl_eval.safe_paths import regular_file
from owl_eval.sources import SourceData, SourceFormatError
from owl_eval.typed import as_int, as_str

SUMMARY_FILE = "trajectory_source.json"


@dataclass
class TrajectoryFile:
    """What was validated: the file, its array names and sizes (the arrays stay on disk)."""

    path: Path
    keys: dict[str, str | None]  # role -> array name: true, pred, mask, log_probs
    num_scenes: int
    num_preds: int
    num_agents: int
    pred_len: int
    num_valid_agents: int
    seed: int
    chunk_size: int
    p_true: np.ndarray | None = None  # [N_S, N_C] one-hot behaviour classes (small: read whole)
    p_pred: np.ndarray | None = None
    class_names: tuple[str, ...] = ()

    def summary(self) -> dict:
        return {
            "path": str(self.path),
            "arrays": self.keys,
            "num_scenes": self.num_scenes,
            "num_preds": self.num_preds,
            "num_agents": self.num_agents,
            "pred_len": self.pred_len,
            "num_valid_agents": self.num_valid_agents,
            "seed": self.seed,
            "class_names": list(self.class_names),
        }

    def save(self, directory) -> Path:
        """The input file is the record (possibly gigabytes): log where it is and what was read, not a copy, with
        its SHA-256, so that a re-score of this run refuses the file once it was rewritten."""
        path = Path(directory) / SUMMARY_FILE
        path.write_text(json.dumps(self.summary() | {"sha256": sha256_of(self.path)}, indent=2))
        return path


class TrajectoriesSource:
    """Options are kept as given and checked in :meth:`load` (owl_eval.typed), so a bad one is one error
    naming ``source.<key>`` before any run exists."""

    def __init__(
        self,
        path: str,
        chunk_size: int = 256,
        true_key: str = "Path_true",
        pred_key: str = "Path_pred",
        mask_key: str = "Pred_steps",
        log_probs: str | None = "auto",
        seed: int = 0,
        class_true_key: str | None = "P_true",
        class_pred_key: str | None = "P_pred",
        class_names_key: str | None = "Class_names",
    ):
        self.path: Any = path  # as given (any YAML value); a Path after _options()
        self.chunk_size, self.seed = chunk_size, seed
        self.keys = {"true": true_key, "pred": pred_key, "mask": mask_key}
        self.log_probs = log_probs
        self.class_keys = {"class_true": class_true_key, "class_pred": class_pred_key, "class_names": class_names_key}

    def _options(self) -> None:
        if self.path is None or not str(self.path) or str(self.path) == "???":
            raise SourceFormatError("source.path: expected an .npz with Path_true, Path_pred and Pred_steps")
        self.path = Path(as_str(self.path, "source.path")).expanduser()
        self.chunk_size = as_int(self.chunk_size, "source.chunk_size", minimum=1)
        self.seed = as_int(self.seed, "source.seed", minimum=0)
        self.keys = {role: as_str(key, f"source.{role}_key") for role, key in self.keys.items()}
        if self.log_probs is not None:
            self.log_probs = as_str(self.log_probs, "source.log_probs")
        self.class_keys = {
            role: None if key is None else as_str(key, f"source.{role}_key") for role, key in self.class_keys.items()
        }

    def load(self) -> SourceData:
        self._options()
        try:  # the file the user named (a link to it is fine); a directory, FIFO or device is not
            regular_file(self.path.resolve(), what="trajectories .npz")
        except (UnsafePathError, OSError, RuntimeError) as exc:  # RuntimeError: a link loop
            raise SourceFormatError(
                f"{self.path}: {exc}" if not isinstance(exc, UnsafePathError) else str(exc)
            ) from None
        arrays = self._open()
        keys: dict[str, str | None] = dict(self.keys)
        lp_key = self.log_probs
        if lp_key == "auto":
            lp_key = next((k for k in ("Log_probs", "Log_prob", "log_probs") if k in arrays), None)
        keys["log_probs"] = lp_key or None
        for role, key in keys.items():
            if key is not None and key not in arrays:
                raise SourceFormatError(f"{self.path}: array {key!r} ({role}) not found; the file has {sorted(arrays)}")
        true, pred, mask = arrays[keys["true"]], arrays[keys["pred"]], arrays[keys["mask"]]
        lp = arrays[keys["log_probs"]] if keys["log_probs"] else None
        n_s, n_p, n_a, n_o = self._check_shapes(keys, true, pred, mask, lp)
        valid_agents = self._check_values(keys, true, pred, mask, lp, n_s)
        p_true, p_pred, class_names = self._read_classes(arrays, n_s)
        info = TrajectoryFile(
            self.path.resolve(),
            keys,
            n_s,
            n_p,
            n_a,
            n_o,
            valid_agents,
            self.seed,
            self.chunk_size,
            p_true,
            p_pred,
            class_names,
        )
        return SourceData(
            protocol="trajectory",
            record=info,
            tags={
                "source": "trajectories",
                "file": self.path.name,
                "scenes": str(n_s),
                "log_probs": keys["log_probs"] or "kde",
            },
        )

    def _read_classes(self, arrays: dict, n_s: int):
        """The optional class outputs: both arrays or neither; one-hot truth, probability rows summing to 1."""
        t_key, p_key, n_key = (self.class_keys[k] for k in ("class_true", "class_pred", "class_names"))
        present = [k for k in (t_key, p_key) if k and k in arrays]
        if not present:
            return None, None, ()
        if len(present) == 1:
            missing = p_key if present[0] == t_key else t_key
            raise SourceFormatError(
                f"{self.path}: array {present[0]!r} is there but {missing!r} is not; class outputs need both"
            )
        assert t_key is not None and p_key is not None  # both present
        p_true, p_pred = check_class_outputs(self.path, t_key, p_key, arrays[t_key], arrays[p_key], rows=n_s)
        n_c = p_true.shape[1]
        if n_key and n_key in arrays:
            names = np.asarray(arrays[n_key])
            if names.dtype.kind not in "US" or names.shape != (n_c,):
                raise SourceFormatError(
                    f"{self.path}: array {n_key!r} must hold {n_c} class names (strings), got "
                    f"dtype {names.dtype}, shape {names.shape}"
                )
            where = f"{self.path}: array {n_key!r}"
            class_names = text_names(names, where=where, error=SourceFormatError)
            distinct_names(class_names, where=where, error=SourceFormatError)
        else:
            class_names = tuple(f"class{c}" for c in range(n_c))
        return p_true, p_pred, class_names

    def _open(self) -> dict:
        from owl_eval.formats.npz import npz_arrays

        try:  # every member's CRC is checked first: a corrupted member is an error, never scored
            return npz_arrays(self.path)
        except MetricInputError as exc:
            raise SourceFormatError(str(exc)) from None
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as exc:
            raise SourceFormatError(f"{self.path}: not a readable .npz ({exc})") from None

    def _check_shapes(self, keys, true, pred, mask, lp):
        def fail(role, what):
            raise SourceFormatError(f"{self.path}: array {keys[role]!r} {what}")

        for role, arr in (("true", true), ("pred", pred), ("log_probs", lp)):
            if arr is not None and arr.dtype.kind not in "fiu":
                fail(role, f"has dtype {arr.dtype}, expected numbers")
        if pred.ndim != 5:
            fail("pred", f"has {pred.ndim} axes {pred.shape}, expected 5: [N_S, N_P, N_A, N_O, 2]")
        n_s, n_p, n_a, n_o, two = pred.shape
        if two != 2:
            fail("pred", f"axis 4 (x, y) has length {two}, expected 2 (shape {pred.shape})")
        if n_s < 1:  # every metric would be N/A: a run of nothing is refused, not logged
            fail("pred", f"axis 0 (N_S, scenes) is empty: no scene in the file (shape {pred.shape})")
        for axis, (length, name) in enumerate(
            zip((n_p, n_a, n_o), ("N_P, predictions", "N_A, agents", "N_O, steps")), 1
        ):
            if length < 1:
                fail("pred", f"axis {axis} ({name}) is empty (shape {pred.shape})")
        expect = {
            "true": (true, (n_s, 1, n_a, n_o, 2), ("N_S", "1", "N_A", "N_O", "2")),
            "mask": (mask, (n_s, n_a, n_o), ("N_S", "N_A", "N_O")),
        }
        if lp is not None:
            expect["log_probs"] = (lp, (n_s, n_p + 1, n_a), ("N_S", "N_P + 1", "N_A"))
        for role, (arr, shape, axes) in expect.items():
            if arr.ndim != len(shape):
                fail(
                    role, f"has {arr.ndim} axes {arr.shape}, expected {len(shape)}: [{', '.join(axes)}] = {list(shape)}"
                )
            for axis, (got, want) in enumerate(zip(arr.shape, shape)):
                if got != want:
                    fail(
                        role,
                        f"axis {axis} ({axes[axis]}) has length {got}, expected {want} "
                        f"(shape {arr.shape}, expected {list(shape)} from {keys['pred']!r} {pred.shape})",
                    )
        if mask.dtype != bool and mask.dtype.kind not in "iu":
            fail("mask", f"has dtype {mask.dtype}, expected booleans (or 0/1 integers)")
        return n_s, n_p, n_a, n_o

    def _check_values(self, keys, true, pred, mask, lp, n_s) -> int:
        """Chunk by chunk: 0/1 mask, truth and predictions finite and within +-MAX_ABS_COORDINATE at every
        counted step (:mod:`owl_eval.protocols.trajectory.sources.checks`), log-probs of counted agents not NaN/+inf.
        Returns the number of agents with a counted step."""
        valid_agents = 0
        for lo in range(0, n_s, self.chunk_size):
            sl = slice(lo, lo + self.chunk_size)
            m = np.asarray(mask[sl])
            if m.dtype != bool:
                bad = (m != 0) & (m != 1)
                if bad.any():
                    s, a, t = (int(i) for i in np.argwhere(bad)[0])
                    raise SourceFormatError(
                        f"{self.path}: array {keys['mask']!r} [scene {lo + s}, agent {a}, step {t}] "
                        f"is {m[s, a, t]}, expected 0/1 (or booleans)"
                    )
                m = m.astype(bool)
            check_coordinates(
                self.path,
                keys["true"],
                true[sl],
                m[:, None],
                ("scene", "", "agent", "step"),
                offset=lo,
                mask_key=keys["mask"],
            )
            check_coordinates(
                self.path,
                keys["pred"],
                pred[sl],
                m[:, None],
                ("scene", "prediction", "agent", "step"),
                offset=lo,
                mask_key=keys["mask"],
            )
            agents = m.any(-1)
            valid_agents += int(agents.sum())
            if lp is not None:
                check_log_probs(self.path, keys["log_probs"], lp[sl], agents, offset=lo)
        return valid_agents
