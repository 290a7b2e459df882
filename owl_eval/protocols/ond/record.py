"""The OND record: every trial's ground truth and agent outputs, saved as one ``.npz`` (no pickle).

Read back with every member checked (CRC, dtype, lengths), so a damaged or hand-edited record is one
error naming the file and the member (:meth:`OndRecord.load`)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from owl_eval.formats.checksums import seal
from owl_eval.formats.names import distinct_names, text_names
from owl_eval.formats.npz import json_member, member, npz_arrays
from owl_eval.metrics.validation import MetricInputError
from owl_eval.protocols.ond.metrics import OndTrial

RECORD_FILE = "ond_record.npz"
FORMAT = "owl-eval/ond-record/1"
CONDITIONS = ("system", "given")


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
        arrays: dict[str, Any] = {  # Any: a **dict[str, ndarray] could fill savez_compressed's allow_pickle: bool
            "known_classes": np.asarray(self.known_classes),
            "novel_classes": np.asarray(self.novel_classes),
        }
        arrays |= _pack(self.trials, "agent")
        if self.baseline_trials is not None:
            arrays |= _pack(self.baseline_trials, "baseline")
        meta = {
            "condition": self.condition,
            "class_names": list(self.class_names),
            "has_baseline": self.baseline_trials is not None,
            "format": FORMAT,
        }
        arrays["meta_json"] = np.array(json.dumps(meta))
        np.savez_compressed(path, **arrays)
        seal(directory)  # the re-score checks the record against these
        return path

    @classmethod
    def load(cls, path: str | Path) -> OndRecord:
        """A saved record (the file or its folder); every member's CRC, type and length is checked, and a
        malformed one is one ``ValueError`` naming the file and the member (never an unpickled object)."""
        path = Path(path)
        if path.is_dir():
            path = path / RECORD_FILE
        return cls.from_arrays(npz_arrays(path), path)

    @classmethod
    def from_arrays(cls, arrays, path) -> OndRecord:
        meta = json_member(arrays, "meta_json", path)
        if meta.get("format") != FORMAT:
            raise MetricInputError(
                f"{path}: not an OND record (format {str(meta.get('format'))[:60]!r}, expected {FORMAT!r})"
            )
        condition, names, has_baseline = meta.get("condition"), meta.get("class_names"), meta.get("has_baseline")
        if condition not in CONDITIONS:
            raise MetricInputError(
                f"{path}: meta_json condition: expected one of {list(CONDITIONS)}, got {str(condition)[:60]!r}"
            )
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise MetricInputError(f"{path}: meta_json class_names: expected a list of strings")
        distinct_names(names, where=f"{path}: meta_json class_names", error=MetricInputError)
        if not isinstance(has_baseline, bool):
            raise MetricInputError(
                f"{path}: meta_json has_baseline: expected true or false, got {str(has_baseline)[:60]!r}"
            )
        trials = _unpack(arrays, "agent", path)
        baseline = _unpack(arrays, "baseline", path) if has_baseline else None
        if baseline is not None and [len(t.gt_class) for t in baseline] != [len(t.gt_class) for t in trials]:
            raise MetricInputError(f"{path}: the baseline's trials do not match the agent's (count or lengths)")
        return cls(
            condition=condition,
            known_classes=member(arrays, "known_classes", path, kinds="iu", ndim=1),
            novel_classes=member(arrays, "novel_classes", path, kinds="iu", ndim=1),
            class_names=tuple(names),
            trials=trials,
            baseline_trials=baseline,
        )


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


def _unpack(data, prefix: str, path) -> list[OndTrial]:
    """The trials packed under ``prefix``; lengths, indices and per-trial values checked (OndTrial checks values)."""

    def get(key, kinds="biuf", ndim=1):
        return member(data, f"{prefix}/{key}", path, kinds=kinds, ndim=ndim)

    lengths = get("lengths", "iu")
    n = len(lengths)
    if n == 0:
        raise MetricInputError(
            f"{path}: array '{prefix}/lengths' is empty: no trial in the record; expected one length per trial"
        )
    if (lengths < 1).any():
        raise MetricInputError(
            f"{path}: array '{prefix}/lengths' [{int(np.argmax(lengths < 1))}] is below 1 "
            "(a trial has at least one sample)"
        )
    total = int(lengths.sum(dtype=object))
    per_trial = {k: get(k, kinds) for k, kinds in (("red_light", "iu"), ("batch_size", "iu"), ("trial_id", "US"))}
    flat = {k: get(k, ndim=2 if k == "p_class" else 1) for k in ("gt_class", "gt_novel", "p_world_changed", "p_class")}
    for key, arr in list(per_trial.items()) + list(flat.items()):
        want = n if key in per_trial else total
        if len(arr) != want:
            raise MetricInputError(
                f"{path}: array '{prefix}/{key}' has {len(arr)} entries, expected {want} "
                f"({'one per trial' if key in per_trial else 'the sum of the trial lengths'})"
            )
    ids = text_names(
        per_trial["trial_id"], where=f"{path}: array '{prefix}/trial_id'", what="trial id", error=MetricInputError
    )
    red = per_trial["red_light"]
    if ((red < -1) | (red >= lengths)).any():
        i = int(np.argmax((red < -1) | (red >= lengths)))
        raise MetricInputError(
            f"{path}: array '{prefix}/red_light' [{i}] is {int(red[i])}, expected -1 (no novelty) "
            f"or an index below the trial's {int(lengths[i])} samples"
        )
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    trials = []
    for i in range(n):
        s = slice(int(bounds[i]), int(bounds[i + 1]))
        red_light = int(red[i])
        try:
            trials.append(
                OndTrial(
                    gt_class=flat["gt_class"][s],
                    gt_novel=flat["gt_novel"][s],
                    red_light=None if red_light < 0 else red_light,
                    p_world_changed=flat["p_world_changed"][s],
                    p_class=flat["p_class"][s],
                    batch_size=int(per_trial["batch_size"][i]),
                    trial_id=ids[i],
                )
            )
        except MetricInputError as exc:
            raise MetricInputError(f"{path}: {prefix} trial {i}: {exc}") from None
    return trials
