"""The OND record: every trial's ground truth and agent outputs, saved as one ``.npz`` (no pickle)."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from metrics.ond import OndTrial

RECORD_FILE = "ond_record.npz"


@dataclass
class OndRecord:
    condition: str
    known_classes: np.ndarray
    novel_classes: np.ndarray
    class_names: tuple[str, ...]
    trials: list[OndTrial]
    baseline_trials: list[OndTrial] | None = None

    def save(self, directory: str | Path) -> Path:
        path = Path(directory) / RECORD_FILE
        arrays = {"known_classes": np.asarray(self.known_classes), "novel_classes": np.asarray(self.novel_classes)}
        arrays |= _pack(self.trials, "agent")
        if self.baseline_trials is not None:
            arrays |= _pack(self.baseline_trials, "baseline")
        meta = {"condition": self.condition, "class_names": list(self.class_names),
                "has_baseline": self.baseline_trials is not None, "format": "owl-eval/ond-record/1"}
        arrays["meta_json"] = np.array(json.dumps(meta))
        np.savez_compressed(path, **arrays)
        return path

    @classmethod
    def load(cls, path: str | Path) -> "OndRecord":
        path = Path(path)
        if path.is_dir():
            path = path / RECORD_FILE
        with np.load(path, allow_pickle=False) as data:
            meta = json.loads(str(data["meta_json"]))
            trials = _unpack(data, "agent")
            baseline = _unpack(data, "baseline") if meta["has_baseline"] else None
            return cls(condition=meta["condition"], known_classes=data["known_classes"], novel_classes=data["novel_classes"],
                       class_names=tuple(meta["class_names"]), trials=trials, baseline_trials=baseline)


def _pack(trials: list[OndTrial], prefix: str) -> dict[str, np.ndarray]:
    lengths = np.array([len(t.gt_class) for t in trials], dtype=np.int64)
    return {
        f"{prefix}/lengths": lengths,
        f"{prefix}/red_light": np.array([-1 if t.red_light is None else t.red_light for t in trials], dtype=np.int64),
        f"{prefix}/batch_size": np.array([t.batch_size for t in trials], dtype=np.int64),
        f"{prefix}/trial_id": np.array([t.trial_id for t in trials], dtype=str),
        f"{prefix}/gt_class": np.concatenate([t.gt_class for t in trials]) if trials else np.zeros(0, np.int64),
        f"{prefix}/gt_novel": np.concatenate([t.gt_novel for t in trials]) if trials else np.zeros(0, np.int64),
        f"{prefix}/p_world_changed": np.concatenate([t.p_world_changed for t in trials]) if trials else np.zeros(0),
        f"{prefix}/p_class": np.concatenate([t.p_class for t in trials]) if trials else np.zeros((0, 1)),
    }


def _unpack(data, prefix: str) -> list[OndTrial]:
    lengths = data[f"{prefix}/lengths"]
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    arrays = {k: data[f"{prefix}/{k}"] for k in ("gt_class", "gt_novel", "p_world_changed", "p_class")}
    trials = []
    for i in range(len(lengths)):
        s = slice(bounds[i], bounds[i + 1])
        red = int(data[f"{prefix}/red_light"][i])
        trials.append(OndTrial(gt_class=arrays["gt_class"][s], gt_novel=arrays["gt_novel"][s],
                               red_light=None if red < 0 else red, p_world_changed=arrays["p_world_changed"][s],
                               p_class=arrays["p_class"][s], batch_size=int(data[f"{prefix}/batch_size"][i]),
                               trial_id=str(data[f"{prefix}/trial_id"][i])))
    return trials
