"""Run an agent written for sail-on-client's OND protocol, unchanged, as an owl-eval OND agent.

The user's object (``agent.detector``, built by Hydra from its ``_target_``) has sail-on-client's entry point
``execute(toolset, step_descriptor)``. This adapter drives it as sail-on-client 0.30's OND protocol does
(``sail_on_client/protocol/ond_test.py``, ``ond_round.py``, ``visual_round.py``, the toolsets of
``visual_dataclasses.py`` and ``ond_dataclasses.py``, the files of ``harness/local_harness.py`` and
``harness/file_provider.py``), one owl-eval trial being one client *test* and one mini-batch one *round*:

per trial  ``Initialize``  toolset: the detector's ``get_config()`` (when it has one) plus ``session_id``,
           ``test_id`` (the trial id), ``test_type`` (``""``), ``pre_novelty_batches`` (``agent.pre_novelty_batches``)
           and, added here, the known classes' training split (below);
per batch  ``FeatureExtraction``  {``dataset``: path of a file listing the round's sample ids, one a line,
           ``dataset_root``, ``round_id``} -> ``(features_dict, logit_dict)`` keyed by id;
           ``WorldDetection``  {``features_dict``, ``logit_dict``, ``round_id``, ``redlight_image``} -> path of a
           CSV ``id,P(world changed)``, one row per id of the round;
           ``NoveltyClassification``  {``features_dict``, ``logit_dict``, ``round_id``} -> path of a CSV
           ``id,p_0,...,p_K`` (K+1 scores);
           ``agent.adaptation_step`` (``NoveltyAdaptation``, or ``NoveltyAdaption``, as sail-on-client's mock
           agent spells it)
           {``round_id``}, when set;
after the  ``NoveltyCharacterization``  {``dataset_ids``: every id of the trial}, when ``agent.characterization``
last batch (its result is not scored: owl-eval has no characterization metric).

As in the client, the round's dataset file and the returned CSVs are read, then deleted (``safe_remove``). The
CSVs are read back into the arrays of :class:`~owl_eval.protocols.ond.api.OndAgent` and checked, one error naming
the step, the trial, the round and the file: a path that does not exist, a row with a wrong number of columns, an
id that is not in the round (or twice), an id of the round with no row, a value that is not a number in [0, 1], a
classification row that does not sum to 1 within ``agent.sum_tolerance``.

**Sample ids and features.** The id of a trial's sample ``i`` is ``<trial_id>/<i:06d>.npy`` (the client's ids are
image paths relative to ``dataset_root``). ``agent.features``:

- ``files`` (default): each sample's feature vector (float64, the domain's features) is saved as
  ``<dataset_root>/<id>`` (``numpy.save``) and ``FeatureExtraction`` is called: the detector loads
  ``np.load(os.path.join(dataset_root, id))`` where a client detector would load an image.
- ``saved``: as the client's ``use_saved_features``: ``FeatureExtraction`` is not called, ``features_dict`` maps
  each id to its feature vector and ``logit_dict`` is empty (the domains have no logits; the client skips feature
  extraction only when both dictionaries are non-empty).

**Training.** The client has no training step (its detectors come trained). Here the known classes' training
split is written once (``fit``) in the same layout: ``<dataset_root>/train/<i:06d>.npy``, the id list
``train_dataset`` and the ground truth ``train_ground_truth`` in the client's ``<test>_single_df.csv`` format
(header ``id,detection,classification``, detection 0, classification the known class 1..K). Their paths, with
``dataset_root`` and ``known_classes`` (K), are added to every ``Initialize`` toolset; a pre-trained detector
ignores them.

**Differences from sail-on-client, named.**

- Red light (``condition: given``): the client passes ``redlight_image`` (the red-light sample's id, from the
  test's metadata) in every round from round 0; owl-eval tells it only from the batch that holds it on, so here
  ``redlight_image`` is ``""`` before that batch and the id from it on (under ``condition: system`` always ``""``,
  as the client without the ``red_light`` hint).
- ``NoveltyAdaptation`` is called only with ``agent.adaptation_step`` set (default null, as the client with
  ``feedback: none`` skips it); there is no feedback, so no ``FeedbackInstance`` in the ``Initialize`` toolset.
- Result rows are matched to samples by id (the client's evaluation reads them by position, in posting order).
- The client checks nothing in the CSVs; owl-eval's metrics read the scores as probabilities, so they must lie
  in [0, 1] and each classification row sum to 1 within ``agent.sum_tolerance`` (default 1e-3, text round-off of
  a few digits per value); such rows are rescaled to sum to 1 exactly. ``agent.normalize: true`` rescales any row
  with a positive sum instead.
- The "unknown" score is the first of the K+1 columns (``agent.unknown_column: first``, the client's image
  classification); ``last`` reads it from the last column (the client's activity recognition) and moves it first.
- ``EvaluateRoundwise``, feature saving and session resumption are harness stages, not agent steps: not run.
"""

from __future__ import annotations

import csv
import inspect
import math
import os
import shutil
import tempfile
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from owl_eval.errors import ConfigError
from owl_eval.protocols.base import AgentOutputError
from owl_eval.protocols.interfaces import class_name, plain
from owl_eval.protocols.ond.api import OndBatch
from owl_eval.typed import as_bool, as_choice, as_float, as_int

FEATURES = ("files", "saved")
UNKNOWN_COLUMNS = ("first", "last")
ADAPTATION_STEPS = ("NoveltyAdaptation", "NoveltyAdaption")
KEY = "agent.detector"


class SailonClientAgent:
    """An OND agent that drives a sail-on-client detector (see the module docstring for the protocol)."""

    def __init__(
        self,
        detector: Any,
        features: str = "files",
        unknown_column: str = "first",
        adaptation_step: str | None = None,
        characterization: bool = True,
        pre_novelty_batches: int = 0,
        sum_tolerance: float = 1e-3,
        normalize: bool = False,
        work_dir: str | None = None,
    ):
        self.features = as_choice(features, "agent.features", FEATURES)
        self.unknown_column = as_choice(unknown_column, "agent.unknown_column", UNKNOWN_COLUMNS)
        self.characterization = as_bool(characterization, "agent.characterization")
        self.pre_novelty_batches = as_int(pre_novelty_batches, "agent.pre_novelty_batches", minimum=0)
        self.sum_tolerance = as_float(sum_tolerance, "agent.sum_tolerance", minimum=0.0)
        self.normalize = as_bool(normalize, "agent.normalize")
        self.work_dir = None if work_dir in (None, "") else Path(str(work_dir))
        self.detector = detector
        self.name = _check_detector(detector)
        self.adaptation_step = _adaptation_step(adaptation_step, detector)
        steps = ["Initialize", "WorldDetection", "NoveltyClassification"]
        steps += ["FeatureExtraction"] if self.features == "files" else []
        steps += [self.adaptation_step] if self.adaptation_step else []
        steps += ["NoveltyCharacterization"] if self.characterization else []
        _check_step_dict(detector, self.name, steps)
        self._tmp: tempfile.TemporaryDirectory | None = None

    # -- the OND agent interface ------------------------------------------------------------------------------
    def fit(self, features, labels, *, num_known, rng):
        """Write the training split as files (module docstring, "Training"); no detector step runs here."""
        self.num_known = int(num_known)
        if self._tmp is not None:
            self._tmp.cleanup()
        if self.work_dir is not None:
            self.work_dir.mkdir(parents=True, exist_ok=True)
        self._tmp = tempfile.TemporaryDirectory(prefix="owl_eval_sailon_", dir=self.work_dir)
        self.root = Path(self._tmp.name)
        self.dataset_root = self.root / "data"
        (self.dataset_root / "train").mkdir(parents=True)
        (self.root / "rounds").mkdir()
        self.session_id = str(uuid.UUID(bytes=rng.bytes(16), version=4))
        features = np.asarray(features, dtype=np.float64)
        ids = [f"train/{i:06d}.npy" for i in range(len(features))]
        for sample_id, vector in zip(ids, features):
            np.save(self.dataset_root / sample_id, vector)
        self.train_dataset = self.root / "train.csv"
        self.train_dataset.write_text("".join(f"{i}\n" for i in ids))
        self.train_ground_truth = self.root / "train_single_df.csv"
        with open(self.train_ground_truth, "w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["id", "detection", "classification"])
            writer.writerows([i, 0, int(label)] for i, label in zip(ids, labels))

    def start_trial(self, trial_id, num_samples):
        if not hasattr(self, "root"):
            raise RuntimeError("SailonClientAgent.start_trial before fit: the protocol calls fit first")
        self.test_id = str(trial_id)
        self.num_samples = int(num_samples)
        self.round_id = 0
        self.redlight_image = ""
        self.trial_ids: list[str] = []
        (self.dataset_root / self.test_id).mkdir(parents=True, exist_ok=True)
        get_config = getattr(self.detector, "get_config", None)
        toolset = dict(get_config() or {}) if callable(get_config) else {}
        toolset.update(
            session_id=self.session_id,
            test_id=self.test_id,
            test_type="",
            pre_novelty_batches=self.pre_novelty_batches,
            dataset_root=str(self.dataset_root),
            train_dataset=str(self.train_dataset),
            train_ground_truth=str(self.train_ground_truth),
            known_classes=self.num_known,
        )
        self.detector.execute(toolset, "Initialize")

    def predict_batch(self, batch: OndBatch):
        ids = [f"{self.test_id}/{int(i):06d}.npy" for i in batch.sample_index]
        self.trial_ids += ids
        round_id = self.round_id
        dataset = self.root / "rounds" / f"{self.session_id}.{self.test_id}.{round_id}.csv"
        dataset.write_text("".join(f"{i}\n" for i in ids))
        if self.features == "files":
            for sample_id, vector in zip(ids, batch.features):
                np.save(self.dataset_root / sample_id, np.asarray(vector, dtype=np.float64))
            out = self.detector.execute(
                {"dataset": str(dataset), "dataset_root": str(self.dataset_root), "round_id": round_id},
                "FeatureExtraction",
            )
            if not (isinstance(out, tuple) and len(out) == 2):
                raise AgentOutputError(
                    f"{self._where('FeatureExtraction', round_id)}: returned {type(out).__name__}, expected a "
                    "pair (features_dict, logit_dict)"
                )
            features_dict, logit_dict = out
        else:
            features_dict = {i: np.asarray(v, dtype=np.float64) for i, v in zip(ids, batch.features)}
            logit_dict = {}
        if batch.red_light_index is not None:
            self.redlight_image = f"{self.test_id}/{int(batch.red_light_index):06d}.npy"
        detection = self.detector.execute(
            {
                "features_dict": features_dict,
                "logit_dict": logit_dict,
                "round_id": round_id,
                "redlight_image": self.redlight_image,
            },
            "WorldDetection",
        )
        p_world = self._read("WorldDetection", round_id, detection, ids, 1)[:, 0]
        classification = self.detector.execute(
            {"features_dict": features_dict, "logit_dict": logit_dict, "round_id": round_id},
            "NoveltyClassification",
        )
        p_class = self._read("NoveltyClassification", round_id, classification, ids, self.num_known + 1)
        if self.unknown_column == "last":
            p_class = np.concatenate([p_class[:, -1:], p_class[:, :-1]], axis=1)
        p_class = self._sums_to_one("NoveltyClassification", round_id, classification, ids, p_class)
        if self.adaptation_step:
            self.detector.execute({"round_id": round_id}, self.adaptation_step)
        _remove(dataset)
        self.round_id += 1
        if int(batch.sample_index[-1]) + 1 >= self.num_samples:
            self._end_trial()
        return p_world, p_class

    def _end_trial(self) -> None:
        if self.characterization:
            self.detector.execute({"dataset_ids": list(self.trial_ids)}, "NoveltyCharacterization")
        shutil.rmtree(self.dataset_root / self.test_id, ignore_errors=True)

    # -- reading the returned files ---------------------------------------------------------------------------
    def _where(self, step: str, round_id: int, path: Any = None) -> str:
        text = f"{KEY} ({self.name}) step {step}, trial {self.test_id!r}, round {round_id}"
        return text + (f", file {path}" if path is not None else "")

    def _read(self, step: str, round_id: int, path: Any, ids: list[str], width: int) -> np.ndarray:
        """The rows of the CSV at ``path`` (``id`` and ``width`` numbers in [0, 1]) in the order of ``ids``;
        the file is deleted afterwards, as the client does once it has posted it."""
        if not isinstance(path, (str, os.PathLike)):
            raise AgentOutputError(
                f"{self._where(step, round_id)}: returned {path!r} ({type(path).__name__}), expected the path of "
                "a CSV file"
            )
        where = self._where(step, round_id, path)
        if not os.path.isfile(path):
            raise AgentOutputError(f"{where}: no such file")
        what = "id, P(world changed)" if width == 1 else f"id and K+1 = {width} class scores"
        position = {sample_id: n for n, sample_id in enumerate(ids)}
        out = np.full((len(ids), width), np.nan)
        with open(path, newline="") as f:
            rows = [(n, [cell.strip() for cell in row]) for n, row in enumerate(csv.reader(f), start=1)]
        for line, row in rows:
            if not any(row):
                continue
            if len(row) != width + 1:
                raise AgentOutputError(f"{where}: line {line} has {len(row)} columns, expected {width + 1} ({what})")
            sample_id = row[0]
            if sample_id not in position:
                raise AgentOutputError(
                    f"{where}: line {line} has the id {sample_id!r}, which is not in this round's dataset "
                    f"({ids[0]} ... {ids[-1]})"
                )
            n = position[sample_id]
            if not np.isnan(out[n, 0]):
                raise AgentOutputError(f"{where}: line {line} repeats the id {sample_id!r}")
            for column, cell in enumerate(row[1:], start=2):
                try:
                    value = float(cell)
                except ValueError:
                    value = math.nan
                if not (math.isfinite(value) and 0.0 <= value <= 1.0):
                    raise AgentOutputError(
                        f"{where}: line {line} (id {sample_id!r}) column {column} is {cell!r}, expected a "
                        "probability in [0, 1]"
                    )
                out[n, column - 2] = value
        missing = [sample_id for sample_id, n in position.items() if np.isnan(out[n, 0])]
        if missing:
            shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
            raise AgentOutputError(f"{where}: no row for {len(missing)} of the round's {len(ids)} ids ({shown})")
        _remove(path)
        return out

    def _sums_to_one(self, step: str, round_id: int, path: Any, ids: list[str], scores: np.ndarray) -> np.ndarray:
        sums = scores.sum(axis=1)
        if self.normalize:
            if np.any(sums <= 0):
                n = int(np.argmin(sums))
                raise AgentOutputError(
                    f"{self._where(step, round_id, path)}: the row of id {ids[n]!r} sums to 0; cannot normalize"
                )
        elif np.any(np.abs(sums - 1.0) > self.sum_tolerance):
            n = int(np.argmax(np.abs(sums - 1.0)))
            raise AgentOutputError(
                f"{self._where(step, round_id, path)}: the row of id {ids[n]!r} sums to {sums[n]:.9g}, expected 1 "
                f"within agent.sum_tolerance ({self.sum_tolerance:g}); set agent.normalize=true to rescale"
            )
        off = sums != 1.0
        if np.any(off):
            scores = scores.copy()
            scores[off] /= sums[off, None]
        return scores


# -- checks before any run ------------------------------------------------------------------------------------
def _check_detector(detector: Any) -> str:
    """The detector's class name, once it is known to have ``execute(toolset, step_descriptor)``."""
    if isinstance(detector, Mapping) or detector is None:
        raise ConfigError(
            f"{KEY}: expected your detector object, built from {{_target_: your.module.Detector, ...}}; got "
            f"{detector!r}"
        )
    name = class_name(detector)
    execute = getattr(detector, "execute", None)
    if not callable(execute):
        raise ConfigError(f"{KEY}: {name} has no method execute(toolset, step_descriptor)")
    try:
        signature = inspect.signature(execute)
    except (TypeError, ValueError):
        return name
    try:
        signature.bind(None, None)
    except TypeError:
        raise ConfigError(
            f"{KEY}: {name}.execute({plain(signature)}) cannot be called as execute(toolset, step_descriptor)"
        ) from None
    return name


def _adaptation_step(value: Any, detector: Any) -> str | None:
    """``agent.adaptation_step``: null (not called), one of the two spellings, or ``auto`` (the spelling the
    detector's ``step_dict`` holds; ``NoveltyAdaptation`` without a ``step_dict``; null when it holds neither)."""
    if value in (None, "", "none", "null"):
        return None
    step = as_choice(value, "agent.adaptation_step", (*ADAPTATION_STEPS, "auto"))
    if step != "auto":
        return step
    steps = getattr(detector, "step_dict", None)
    if not isinstance(steps, Mapping):
        return ADAPTATION_STEPS[0]
    return next((s for s in ADAPTATION_STEPS if s in steps), None)


def _check_step_dict(detector: Any, name: str, steps: list[str]) -> None:
    """A detector that dispatches through a ``step_dict`` (as sail-on-client's agents do) holds every step the
    adapter will call."""
    table = getattr(detector, "step_dict", None)
    if not isinstance(table, Mapping):
        return
    hints = {
        "FeatureExtraction": " (or set agent.features=saved)",
        "NoveltyCharacterization": " (or set agent.characterization=false)",
        "NoveltyAdaptation": " (or set agent.adaptation_step=null)",
        "NoveltyAdaption": " (or set agent.adaptation_step=null)",
    }
    for step in steps:
        if step not in table:
            raise ConfigError(
                f"{KEY}: {name}.step_dict has no step {step!r}, which the OND protocol calls{hints.get(step, '')}; "
                f"it has {sorted(map(str, table))}"
            )


def _remove(path: Any) -> None:
    """sail-on-client's ``safe_remove``."""
    if os.path.exists(path):
        os.remove(path)
