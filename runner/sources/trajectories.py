"""Trajectory predictions in General-Framework's arrays, one ``.npz`` (FORMATS.md, seed 003).

Arrays: ``Path_true[N_S, 1, N_A, N_O, 2]``, ``Path_pred[N_S, N_P, N_A, N_O, 2]``, ``Pred_steps[N_S, N_A, N_O]``
(bool, or 0/1 integers: the steps that count), optional log-probabilities ``[N_S, N_P + 1, N_A]`` (last
column: the truth; they replace the KDE), and optional behaviour-class outputs ``P_true[N_S, N_C]`` (one-hot),
``P_pred[N_S, N_C]`` (rows summing to 1) with ``Class_names[N_C]`` (strings), scored with AUC, class ECE and
TNR-PR. Names are configurable; other arrays in the file are ignored.

The file is never unpickled and never loaded whole: uncompressed members are memory-mapped
(:func:`metrics.traj_table.npz_arrays`), validated ``source.chunk_size`` scenes at a time, and the metric
table is streamed the same way (:func:`metrics.traj_table.trajectory_table_npz`), so memory stays bounded
by the chunk. Validation reads the file once before any MLflow run exists; the metrics read it again.
"""
from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from metrics.results import NA, MetricResults
from metrics.validation import MetricInputError
from runner.protocols.base import Protocol
from runner.protocols.trajectory import TABLE_OPTIONS, set_class_metrics
from runner.sources import SourceData, SourceFormatError

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
        return {"path": str(self.path), "arrays": self.keys, "num_scenes": self.num_scenes, "num_preds": self.num_preds,
                "num_agents": self.num_agents, "pred_len": self.pred_len, "num_valid_agents": self.num_valid_agents, "seed": self.seed,
                "class_names": list(self.class_names)}


class TrajectoriesSource:
    def __init__(self, path: str, chunk_size: int = 256, true_key: str = "Path_true", pred_key: str = "Path_pred",
                 mask_key: str = "Pred_steps", log_probs: str | None = "auto", seed: int = 0,
                 class_true_key: str = "P_true", class_pred_key: str = "P_pred", class_names_key: str = "Class_names"):
        self.path = Path(str(path)).expanduser()
        self.chunk_size, self.seed = int(chunk_size), int(seed)
        self.keys = {"true": true_key, "pred": pred_key, "mask": mask_key}
        self.log_probs = log_probs
        self.class_keys = {"class_true": class_true_key, "class_pred": class_pred_key, "class_names": class_names_key}

    def load(self) -> SourceData:
        if not str(self.path) or str(self.path) == "???":
            raise SourceFormatError("source.path: expected an .npz with Path_true, Path_pred and Pred_steps")
        if self.chunk_size < 1:
            raise SourceFormatError(f"source.chunk_size: expected a positive integer, got {self.chunk_size}")
        if not self.path.is_file():
            raise SourceFormatError(f"{self.path}: file not found")
        arrays = self._open()
        keys = dict(self.keys)
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
        info = TrajectoryFile(self.path.resolve(), keys, n_s, n_p, n_a, n_o, valid_agents, self.seed, self.chunk_size,
                              p_true, p_pred, class_names)
        return SourceData(protocol=TrajectoryFileProtocol(), record=info,
                          tags={"source": "trajectories", "file": self.path.name, "scenes": str(n_s),
                                "log_probs": keys["log_probs"] or "kde"})

    def _read_classes(self, arrays: dict, n_s: int):
        """The optional class outputs: both arrays or neither; one-hot truth, probability rows summing to 1."""
        t_key, p_key, n_key = (self.class_keys[k] for k in ("class_true", "class_pred", "class_names"))
        present = [k for k in (t_key, p_key) if k and k in arrays]
        if not present:
            return None, None, ()
        if len(present) == 1:
            missing = p_key if present[0] == t_key else t_key
            raise SourceFormatError(f"{self.path}: array {present[0]!r} is there but {missing!r} is not; class outputs need both")
        p_true = np.asarray(arrays[t_key], dtype=np.float64)
        p_pred = np.asarray(arrays[p_key], dtype=np.float64)
        for key, arr in ((t_key, p_true), (p_key, p_pred)):
            if arr.ndim != 2 or arr.shape[0] != n_s or arr.shape[1] < 2:
                raise SourceFormatError(f"{self.path}: array {key!r} has shape {arr.shape}, expected [N_S, N_classes] = "
                                        f"[{n_s}, >=2] (N_S from {self.keys['pred']!r})")
            bad = np.argwhere(~np.isfinite(arr))
            if bad.size:
                raise SourceFormatError(f"{self.path}: array {key!r} [scene {bad[0][0]}, class {bad[0][1]}] is not a finite number")
        if p_pred.shape != p_true.shape:
            raise SourceFormatError(f"{self.path}: array {p_pred.shape} of {p_key!r} does not match {p_true.shape} of {t_key!r}")
        not_one_hot = np.flatnonzero(~(np.isin(p_true, (0.0, 1.0)).all(1) & (p_true.sum(1) == 1)))
        if not_one_hot.size:
            raise SourceFormatError(f"{self.path}: array {t_key!r} scene {not_one_hot[0]} is not one-hot: {p_true[not_one_hot[0]].tolist()}")
        outside = np.argwhere((p_pred < 0) | (p_pred > 1))
        if outside.size:
            i, j = outside[0]
            raise SourceFormatError(f"{self.path}: array {p_key!r} [scene {i}, class {j}] = {p_pred[i, j]} is outside [0, 1]")
        sums = p_pred.sum(1)
        off = np.flatnonzero(np.abs(sums - 1) > 1e-6)
        if off.size:
            raise SourceFormatError(f"{self.path}: array {p_key!r} scene {off[0]} sums to {sums[off[0]]:.9g}, expected 1 within 1e-06")
        n_c = p_true.shape[1]
        if n_key and n_key in arrays:
            names = np.asarray(arrays[n_key])
            if names.dtype.kind not in "US" or names.shape != (n_c,):
                raise SourceFormatError(f"{self.path}: array {n_key!r} must hold {n_c} class names (strings), got "
                                        f"dtype {names.dtype}, shape {names.shape}")
            class_names = tuple(str(n) for n in names.astype(str))
        else:
            class_names = tuple(f"class{c}" for c in range(n_c))
        return p_true, p_pred, class_names

    def _open(self) -> dict:
        from metrics.traj_table import npz_arrays

        try:
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
        if n_p < 1:
            fail("pred", f"axis 1 (N_P, predictions) is empty (shape {pred.shape})")
        expect = {"true": (true, (n_s, 1, n_a, n_o, 2), ("N_S", "1", "N_A", "N_O", "2")),
                  "mask": (mask, (n_s, n_a, n_o), ("N_S", "N_A", "N_O"))}
        if lp is not None:
            expect["log_probs"] = (lp, (n_s, n_p + 1, n_a), ("N_S", "N_P + 1", "N_A"))
        for role, (arr, shape, axes) in expect.items():
            if arr.ndim != len(shape):
                fail(role, f"has {arr.ndim} axes {arr.shape}, expected {len(shape)}: [{', '.join(axes)}] = {list(shape)}")
            for axis, (got, want) in enumerate(zip(arr.shape, shape)):
                if got != want:
                    fail(role, f"axis {axis} ({axes[axis]}) has length {got}, expected {want} "
                               f"(shape {arr.shape}, expected {list(shape)} from {keys['pred']!r} {pred.shape})")
        if mask.dtype != bool and mask.dtype.kind not in "iu":
            fail("mask", f"has dtype {mask.dtype}, expected booleans (or 0/1 integers)")
        return n_s, n_p, n_a, n_o

    def _check_values(self, keys, true, pred, mask, lp, n_s) -> int:
        """Chunk by chunk: 0/1 mask, finite truth and predictions at every counted step, log-probs of
        counted agents not NaN/+inf. Returns the number of agents with a counted step."""
        valid_agents = 0
        for lo in range(0, n_s, self.chunk_size):
            sl = slice(lo, lo + self.chunk_size)
            m = np.asarray(mask[sl])
            if m.dtype != bool:
                bad = (m != 0) & (m != 1)
                if bad.any():
                    s, a, t = (int(i) for i in np.argwhere(bad)[0])
                    raise SourceFormatError(f"{self.path}: array {keys['mask']!r} [scene {lo + s}, agent {a}, step {t}] "
                                            f"is {m[s, a, t]}, expected 0/1 (or booleans)")
                m = m.astype(bool)
            t_bad = ~np.isfinite(np.asarray(true[sl])[:, 0]).all(-1) & m
            if t_bad.any():
                s, a, t = (int(i) for i in np.argwhere(t_bad)[0])
                raise SourceFormatError(f"{self.path}: array {keys['true']!r} [scene {lo + s}, 0, agent {a}, step {t}] is "
                                        f"NaN/inf where {keys['mask']!r} counts the step (a value is required)")
            p_bad = ~np.isfinite(np.asarray(pred[sl])).all(-1) & m[:, None]
            if p_bad.any():
                s, p, a, t = (int(i) for i in np.argwhere(p_bad)[0])
                raise SourceFormatError(f"{self.path}: array {keys['pred']!r} [scene {lo + s}, prediction {p}, agent {a}, "
                                        f"step {t}] is NaN/inf where {keys['mask']!r} counts the step (a value is required)")
            agents = m.any(-1)
            valid_agents += int(agents.sum())
            if lp is not None:
                v = np.asarray(lp[sl], dtype=np.float64)
                l_bad = (np.isnan(v) & agents[:, None]) | np.isposinf(v)
                if l_bad.any():
                    s, p, a = (int(i) for i in np.argwhere(l_bad)[0])
                    raise SourceFormatError(f"{self.path}: array {keys['log_probs']!r} [scene {lo + s}, column {p}, agent {a}] "
                                            f"is {v[s, p, a]} (NaN for a counted agent, or +inf)")
        return valid_agents


class TrajectoryFileProtocol(Protocol):
    """The trajectory metric table of a validated file, streamed in chunks (no agent to run)."""

    name = "trajectory"

    def run(self, **kwargs):
        raise RuntimeError("a trajectories source has no agent to run; use runner.evaluate")

    def evaluate(self, record: TrajectoryFile, settings: Mapping[str, Any]) -> MetricResults:
        from metrics.traj_table import trajectory_table_npz

        options = {k: settings[k] for k in TABLE_OPTIONS if k != "chunk_size" and settings.get(k) is not None}
        if "k_values" in options:
            options["k_values"] = tuple(int(k) for k in options["k_values"])
        results = trajectory_table_npz(record.path, rng=np.random.default_rng(record.seed), chunk_size=record.chunk_size,
                                       true_key=record.keys["true"], pred_key=record.keys["pred"],
                                       mask_key=record.keys["mask"], log_prob_key=record.keys["log_probs"], **options)
        results.set("num_scenes", record.num_scenes)
        results.set("num_agents", record.num_valid_agents)
        if record.p_true is None:
            for key in ("auc", "class_ece", "tnr_pr"):
                results.set(key, NA("the file has no class outputs (P_true, P_pred)"))
        else:
            set_class_metrics(results, record.p_true, record.p_pred, record.class_names, settings,
                              empty_reason="no scene in the file")
        return results

    def figures(self, record: TrajectoryFile, results: MetricResults, settings) -> dict[str, Any]:
        from runner.plots.trajectory import error_by_step_from_series

        return {"error_vs_horizon": error_by_step_from_series(results)} if results.series else {}

    def save_record(self, record: TrajectoryFile, directory: Path) -> None:
        # The input file is the record (possibly gigabytes): log where it is and what was read, not a copy.
        (Path(directory) / SUMMARY_FILE).write_text(json.dumps(record.summary(), indent=2))
