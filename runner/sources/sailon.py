"""SAIL-ON OND results in sail-on-client's local-harness layout.

Per test ``T``: ground truth ``T_single_df.csv`` (header row; column roles from config, by header name
or 0-based position), optional metadata ``T_metadata.json`` (``red_light``, ``detection`` = 0-based
red-light index, ``round_size``), and per session ``S``: ``S.T_detection.csv`` rows ``id,P_world_changed``
and ``S.T_classification.csv`` rows ``id,p_0,...,p_K`` (no header; the unknown column is first for images,
last for activity recognition: ``unknown_column``). Ground-truth classes: known classes are ``0..K-1``
and novel samples negative (image classification), so class ``c >= 0`` becomes OND label ``c + 1`` and a
negative class becomes 0 (unknown). Per-sample novelty comes from the ``novel`` column when the domain
has one, else from the class being negative.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from metrics.ond import OndTrial
from runner.protocols.ond import OndProtocol
from runner.protocols.ond_record import OndRecord
from runner.sources import SourceData, SourceFormatError
from runner.sources.csv_table import column_index, numeric, read_table

GT_SUFFIX = "_single_df.csv"


class SailonSource:
    def __init__(self, path: str, results_path: str | None = None, session: str | None = None,
                 baseline_session: str | None = None, columns: dict | None = None, unknown_column: str = "first",
                 round_size: int | None = None, condition: str = "system", normalize: bool = False,
                 sum_tolerance: float = 1e-6):
        if not path or path == "???":
            raise SourceFormatError("source.path: expected the directory holding the <test_id>_single_df.csv files")
        if unknown_column not in ("first", "last"):
            raise SourceFormatError(f"source.unknown_column must be 'first' or 'last', got {unknown_column!r}")
        self.path = Path(path).expanduser().resolve()
        self.results_path = Path(results_path).expanduser().resolve() if results_path else self.path
        self.session, self.baseline_session = session, baseline_session
        self.columns = {"id": "id", "detection": "detection", "class": "classification", "novel": None} | dict(columns or {})
        self.unknown_column, self.round_size, self.condition = unknown_column, round_size, condition
        self.normalize, self.sum_tolerance = bool(normalize), float(sum_tolerance)
        self._files: dict[Path, dict[str, Path]] = {}

    # -- discovery -------------------------------------------------------------------------------------
    def _index(self, root: Path) -> dict[str, Path]:
        """Every file under ``root`` by name, found once (one directory walk, not one per lookup)."""
        if root not in self._files:
            if not root.is_dir():
                raise SourceFormatError(f"source: {root} is not a directory")
            self._files[root] = {p.name: p for p in sorted(root.rglob("*"), reverse=True) if p.is_file()}
        return self._files[root]

    def test_ids(self) -> list[str]:
        if not self.path.is_dir():
            raise SourceFormatError(f"source.path: {self.path} is not a directory")
        ids = sorted(name[: -len(GT_SUFFIX)] for name in self._index(self.path) if name.endswith(GT_SUFFIX))
        if not ids:
            raise SourceFormatError(f"source.path: no *{GT_SUFFIX} ground-truth files under {self.path}")
        return ids

    def sessions(self, test_id: str) -> list[str]:
        suffix = f".{test_id}_detection.csv"
        return sorted(name[: -len(suffix)] for name in self._index(self.results_path) if name.endswith(suffix))

    def _file(self, root: Path, name: str) -> Path:
        found = self._index(root).get(name)
        if found is None:
            raise SourceFormatError(f"{root / name}: file not found")
        return found

    # -- reading ----------------------------------------------------------------------------------------
    def load(self) -> SourceData:
        test_ids = self.test_ids()
        session = self.session or self._only_session(test_ids[0])
        trials, baseline = [], [] if self.baseline_session else None
        num_known = None
        for test_id in test_ids:
            truth = self._read_truth(test_id)
            trial = self._read_session(session, test_id, truth)
            num_known = num_known or trial.p_class.shape[1] - 1
            if trial.p_class.shape[1] - 1 != num_known:
                raise SourceFormatError(f"test {test_id}: {trial.p_class.shape[1]} class columns, other tests have {num_known + 1}")
            trials.append(trial)
            if baseline is not None:
                baseline.append(self._read_session(self.baseline_session, test_id, truth))
        record = OndRecord(condition=self.condition, known_classes=np.arange(num_known), novel_classes=np.zeros(0, np.int64),
                           class_names=tuple(str(c) for c in range(num_known)), trials=trials, baseline_trials=baseline)
        return SourceData(protocol=OndProtocol(condition=self.condition), record=record,
                          tags={"source": "sailon", "session": session, "tests": str(len(trials)),
                                "baseline_session": self.baseline_session or "none"})

    def _only_session(self, test_id: str) -> str:
        sessions = self.sessions(test_id)
        if len(sessions) != 1:
            raise SourceFormatError(f"source.session: give the session name; found {sessions or 'no'} result files "
                                    f"'<session>.{test_id}_detection.csv' under {self.results_path}")
        return sessions[0]

    def _read_truth(self, test_id: str) -> dict:
        path = self._file(self.path, f"{test_id}{GT_SUFFIX}")
        header, fields = read_table(path, skip_header=True)
        if not len(fields):
            raise SourceFormatError(f"{path}: no samples after the header")
        roles = {role: column_index(path, header, role, spec) for role, spec in self.columns.items() if spec is not None}
        if max(roles.values()) >= fields.shape[1]:
            raise SourceFormatError(f"{path}: column position {max(roles.values())} is beyond the {fields.shape[1]} columns of the file")
        numeric_roles = [r for r in ("class", "detection", "novel") if r in roles]
        table = numeric(path, fields, columns=[roles[r] for r in numeric_roles], names=[str(self.columns[r]) for r in numeric_roles],
                        first_row_number=2)
        values = dict(zip(numeric_roles, table.T))
        ids = np.char.strip(fields[:, roles["id"]])
        cls = values["class"].astype(np.int64)
        gt_novel = (values["novel"] > 0) if "novel" in values else (cls < 0)
        gt_class = np.where(cls < 0, 0, cls + 1)
        if "novel" in values:
            gt_class = np.where(gt_novel, 0, gt_class)
        meta = self._read_metadata(test_id)
        red_light = meta.get("detection")
        if red_light is None and "detection" in values and (values["detection"] > 0).any():
            red_light = int(np.argmax(values["detection"] > 0))
        if red_light is None and gt_novel.any():
            red_light = int(np.argmax(gt_novel))
        round_size = int(meta.get("round_size") or self.round_size or 0)
        if round_size < 1:
            raise SourceFormatError(f"test {test_id}: no round_size in {test_id}_metadata.json; set source.round_size")
        return {"ids": ids, "gt_class": gt_class, "gt_novel": gt_novel.astype(np.int64),
                "red_light": None if red_light is None else int(red_light), "round_size": round_size, "path": path}

    def _read_metadata(self, test_id: str) -> dict:
        found = self._index(self.path).get(f"{test_id}_metadata.json")
        if found is None:
            return {}
        try:
            meta = json.loads(found.read_text())
        except json.JSONDecodeError as exc:
            raise SourceFormatError(f"{found}: not valid JSON ({exc})") from None
        if not isinstance(meta, dict):
            raise SourceFormatError(f"{found}: expected a JSON object")
        return meta

    def _read_session(self, session: str, test_id: str, truth: dict) -> OndTrial:
        det_path = self._file(self.results_path, f"{session}.{test_id}_detection.csv")
        cls_path = self._file(self.results_path, f"{session}.{test_id}_classification.csv")
        _, det_fields = read_table(det_path, skip_header=False, min_width=2)
        _, cls_fields = read_table(cls_path, skip_header=False, min_width=3)
        if det_fields.shape[1] != 2:
            raise SourceFormatError(f"{det_path}, row 1: expected 2 comma-separated fields (id,P_world_changed), got {det_fields.shape[1]}")
        world = numeric(det_path, det_fields, columns=[1], names=["P_world_changed"], first_row_number=1)[:, 0]
        width = cls_fields.shape[1]
        scores = numeric(cls_path, cls_fields, columns=list(range(1, width)), names=[f"p_{k}" for k in range(width - 1)],
                         first_row_number=1)
        if self.unknown_column == "last":
            scores = np.roll(scores, 1, axis=1)
        world = world[self._alignment(det_path, np.char.strip(det_fields[:, 0]), truth)]
        scores = scores[self._alignment(cls_path, np.char.strip(cls_fields[:, 0]), truth)]
        for name, path, arr in (("P_world_changed", det_path, world), ("class scores", cls_path, scores)):
            outside = (arr < 0) | (arr > 1)
            if outside.any():
                row = int(np.argwhere(outside)[0][0])
                raise SourceFormatError(f"{path}, sample {str(truth['ids'][row])!r}: {name} must lie in [0, 1], got {arr[outside][0]}")
        sums = scores.sum(1)
        if self.normalize:
            scores = scores / np.where(sums > 0, sums, 1.0)[:, None]
        elif np.any(np.abs(sums - 1) > self.sum_tolerance):
            row = int(np.argmax(np.abs(sums - 1)))
            raise SourceFormatError(f"{cls_path}, sample {str(truth['ids'][row])!r}: class scores sum to {sums[row]:.9g}, expected 1 "
                                    f"within {self.sum_tolerance:g} (set source.normalize=true to rescale)")
        return OndTrial(gt_class=truth["gt_class"], gt_novel=truth["gt_novel"], red_light=truth["red_light"],
                        p_world_changed=world, p_class=scores, batch_size=truth["round_size"], trial_id=test_id)

    @staticmethod
    def _alignment(path: Path, result_ids: np.ndarray, truth: dict) -> np.ndarray:
        """Row order that puts a result file's rows in ground-truth order; every id exactly once."""
        gt_ids = truth["ids"]
        if len(result_ids) == len(gt_ids) and np.array_equal(result_ids, gt_ids):
            return np.arange(len(gt_ids))
        unique, counts = np.unique(result_ids, return_counts=True)
        if (counts > 1).any():
            raise SourceFormatError(f"{path}: id {str(unique[counts > 1][0])!r} appears {counts[counts > 1][0]} times")
        sorter = np.argsort(result_ids)
        pos = np.searchsorted(result_ids, gt_ids, sorter=sorter)
        pos = np.minimum(pos, len(result_ids) - 1)
        found = result_ids[sorter[pos]] == gt_ids
        if not found.all():
            raise SourceFormatError(f"{path}: no row for sample {str(gt_ids[~found][0])!r} of {truth['path'].name} "
                                    f"({int((~found).sum())} ground-truth id(s) missing)")
        extra = np.setdiff1d(result_ids, gt_ids)
        if extra.size:
            raise SourceFormatError(f"{path}: id {str(extra[0])!r} is not in {truth['path'].name}")
        return sorter[pos]
