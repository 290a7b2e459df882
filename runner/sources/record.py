"""Records saved by owl-eval runs (the ``record/`` artifact folder), re-scored without re-running agents.

The kind is detected from the file name (``source.path`` may be the file or the folder holding it):
``ond_record.npz``, ``continual_record.npz``, ``trajectory_record.npz``, ``rl_record.json`` (a lifelong-RL
record folder: ``l2log/`` and ``ste/``), ``trajectory_source.json`` (a trajectories-source run: the file it
names is read again), or a bare l2logger log directory. The metric settings are the protocol's
defaults (``conf/metrics/<protocol>.yaml``) with whatever the command line gives under ``metrics``:
``+metrics.threshold=0.7`` (or ``+metrics=ond metrics.threshold=0.7``). A key the protocol does not know
is an error before any run is created.
"""
from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from runner.paths import CONFIG_DIR
from runner.sources import SourceData, SourceFormatError

KINDS = {  # file name -> protocol name
    "ond_record.npz": "ond",
    "continual_record.npz": "continual",
    "trajectory_record.npz": "trajectory",
    "rl_record.json": "lifelong_rl",
    "trajectory_source.json": "trajectory",
}


class RecordSource:
    def __init__(self, path: str, metrics: Mapping | None = None, chunk_size: int = 256):
        self.path = Path(str(path)).expanduser()
        self.given = dict(metrics or {})
        self.chunk_size = int(chunk_size)

    def load(self) -> SourceData:
        if not str(self.path) or str(self.path) == "???":
            raise SourceFormatError("source.path: expected a saved record file or the record folder of a run")
        file = self._find()
        try:
            data = self._load(file)
        except SourceFormatError:
            raise
        except (OSError, KeyError, ValueError, TypeError, zipfile.BadZipFile, json.JSONDecodeError) as exc:
            raise SourceFormatError(f"{file}: not a readable owl-eval record ({type(exc).__name__}: {exc})") from None
        defaults = metric_defaults(data.protocol.name)
        unknown = sorted(set(self.given) - set(defaults))
        if unknown:
            raise SourceFormatError(f"metrics: unknown setting(s) {unknown} for a {data.protocol.name} record; "
                                    f"valid: {sorted(defaults)}")
        data.protocol = WithDefaultSettings(data.protocol, defaults)
        data.tags = data.tags | {"source": "record", "record_kind": data.protocol.name, "file": file.name}
        return data

    def _find(self) -> Path:
        if self.path.is_file():
            if self.path.name not in KINDS:
                raise SourceFormatError(f"{self.path}: not a record file (expected one of {sorted(KINDS)})")
            return self.path
        if not self.path.is_dir():
            raise SourceFormatError(f"{self.path}: file or directory not found")
        found = [self.path / name for name in KINDS if (self.path / name).is_file()]
        if len(found) > 1:
            raise SourceFormatError(f"{self.path}: holds several records ({', '.join(p.name for p in found)}); give the file")
        if found:
            return found[0]
        if any(self.path.rglob("data-log.tsv")):
            return self.path  # a bare l2logger log directory
        raise SourceFormatError(f"{self.path}: no record here (expected one of {sorted(KINDS)} or an l2logger log directory)")

    def _load(self, file: Path) -> SourceData:
        name = file.name if file.is_file() else ""
        if name == "ond_record.npz":
            from runner.protocols.ond import OndProtocol
            from runner.protocols.ond_record import OndRecord

            record = OndRecord.load(file)
            check_ond(file, record)
            return SourceData(OndProtocol(condition=record.condition), record, {"trials": str(len(record.trials))})
        if name == "continual_record.npz":
            return load_continual(file)
        if name == "trajectory_record.npz":
            from runner.protocols.trajectory import TrajectoryProtocol
            from runner.protocols.trajectory_record import TrajectoryRecord

            record = TrajectoryRecord.load(file)
            check_trajectory(file, record)
            return SourceData(TrajectoryProtocol(num_preds=record.path_pred.shape[1]), record,
                              {"scenes": str(record.num_scenes)})
        if name == "trajectory_source.json":
            from runner.sources.trajectories import TrajectoriesSource

            summary = json.loads(file.read_text())
            arrays = summary.get("arrays", {})
            return TrajectoriesSource(summary["path"], chunk_size=self.chunk_size, true_key=arrays.get("true", "Path_true"),
                                      pred_key=arrays.get("pred", "Path_pred"), mask_key=arrays.get("mask", "Pred_steps"),
                                      log_probs=arrays.get("log_probs"), seed=int(summary.get("seed", 0))).load()
        from runner.sources.l2logger import L2LoggerSource, L2LogProtocol

        if name == "rl_record.json":
            from metrics.l2_log import L2LogError
            from runner.protocols.rl_record import RLRecord

            try:
                record = RLRecord.load(file)
            except L2LogError as exc:
                raise SourceFormatError(str(exc)) from None
            return SourceData(L2LogProtocol(), record, {"episodes": str(len(record.log))})
        perf = str(self.given.get("perf_measure", "reward"))
        return L2LoggerSource(str(file), perf_measure=perf, variant_mode=str(self.given.get("variant_mode", "aware"))).load()


def metric_defaults(protocol: str) -> dict:
    """The protocol's metrics config (``conf/metrics/<protocol>.yaml``) as a plain dict."""
    return yaml.safe_load((Path(CONFIG_DIR) / "metrics" / f"{protocol}.yaml").read_text()) or {}


class WithDefaultSettings:
    """A protocol whose evaluate/figures see the protocol's default metric settings under the given ones."""

    def __init__(self, protocol, defaults: Mapping[str, Any]):
        self.inner, self.defaults = protocol, dict(defaults)
        self.name = protocol.name

    def _settings(self, settings: Mapping[str, Any]) -> dict:
        return self.defaults | dict(settings or {})

    def evaluate(self, record, settings):
        return self.inner.evaluate(record, self._settings(settings))

    def figures(self, record, results, settings):
        return self.inner.figures(record, results, self._settings(settings))

    def tags(self):
        return self.inner.tags()

    def save_record(self, record, directory):
        return self.inner.save_record(record, directory)


# --------------------------------------------------------------------------------- record checks


def load_continual(file: Path) -> SourceData:
    from runner.protocols.continual_record import ContinualRecord
    from runner.sources.accuracy_matrix import GivenMatrixProtocol

    record = ContinualRecord.load(file)
    A, T = np.asarray(record.accuracy), record.num_tasks
    if A.ndim != 2 or A.shape[1] != T or A.shape[0] > T:
        raise SourceFormatError(f"{file}: array 'accuracy' has shape {A.shape}, expected [k <= {T}, {T}] ({T} tasks)")
    bad = ~np.isfinite(A) | (A < 0) | (A > 1)
    if bad.any():
        j, i = (int(x) for x in np.argwhere(bad)[0])
        raise SourceFormatError(f"{file}: array 'accuracy' [{j}, {i}] is {A[j, i]}, expected an accuracy in [0, 1]")
    for key, arr in (("init_accuracy", record.init_accuracy), ("num_instances", record.num_instances)):
        if np.shape(arr) != (T,):
            raise SourceFormatError(f"{file}: array {key!r} has shape {np.shape(arr)}, expected [{T}]")
    # records of the accuracy_matrix source keep unknown b / n as NaN / 0
    has_init = bool(np.isfinite(record.init_accuracy).all())
    has_sizes = bool((record.num_instances > 0).all())
    protocol = GivenMatrixProtocol(record.scenario, has_init=has_init, has_sizes=has_sizes)
    return SourceData(protocol, record, {"tasks": str(T), "scenario": record.scenario})


def check_ond(file: Path, record) -> None:
    for k, trial in enumerate(record.trials + (record.baseline_trials or [])):
        n = len(trial.gt_class)
        for key in ("gt_novel", "p_world_changed"):
            if len(getattr(trial, key)) != n:
                raise SourceFormatError(f"{file}: trial {trial.trial_id!r}: {key} has {len(getattr(trial, key))} samples, "
                                        f"gt_class has {n}")
        if np.ndim(trial.p_class) != 2 or len(trial.p_class) != n:
            raise SourceFormatError(f"{file}: trial {trial.trial_id!r}: p_class has shape {np.shape(trial.p_class)}, "
                                    f"expected [{n}, K + 1]")


def check_trajectory(file: Path, record) -> None:
    from metrics.traj_core import check_paths
    from metrics.validation import MetricInputError

    try:
        check_paths(record.path_true, record.path_pred, record.pred_steps)
    except MetricInputError as exc:
        raise SourceFormatError(f"{file}: {exc}") from None
