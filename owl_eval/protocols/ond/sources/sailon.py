"""SAIL-ON OND results in sail-on-client's (0.30) local-harness layout.

Per test ``T`` under ``source.path`` (searched recursively, e.g. ``OND/image_classification/``): ground
truth ``T_single_df.csv`` (a header row; column roles from ``source.columns``, by header name or 0-based
position) and optional metadata ``T_metadata.json``; per session ``S`` under ``source.results_path``:
``S.T_detection.csv`` rows ``id,P_world_changed`` and ``S.T_classification.csv`` rows ``id,p_0,...,p_K``
(no header; the unknown column is first for images, last for activity recognition: ``unknown_column``).

Ground-truth classes (``source.class_index``):

* ``package`` (default, what the package's evaluation does: ``topk_accuracy`` indexes the K+1 score columns
  of the classification file with the ground-truth class directly): the class is the 0-based column of
  the scores as written, so ``0..K``. With the unknown column first (images) class 0 is unknown and class
  ``c`` is known class ``c``; with it last (activity recognition) class ``K`` is unknown and class ``c < K``
  is known class ``c + 1``. Anything outside ``0..K`` (e.g. a negative novel class) is an error.
* ``zero_based_known``: known classes are ``0..K-1`` and novel samples negative (what
  ``sail_on_client.evaluate.image_classification.convert_df`` writes); ``c >= 0`` becomes label ``c + 1``,
  a negative class label 0 (unknown).

A sample is novel when the ``novel`` column (if configured; the detection column is then not read, as
the package's activity-recognition evaluation reads only ``novel``) says so, else when its class is the
unknown. ``source.columns.novel=detection`` takes the image ground truth's cumulative flag as per-sample
novelty, as the package's local harness does for images (it gives ``m_ndp`` that column).

Red light (0-based row of the first novel sample): the metadata's ``red_light``, which is a *sample id*
(as in the package's fixtures and in ``file_provider``, which compares it with the ids of the detection
file), mapped to its row; an id that is not a sample of the test is an error naming the metadata file.
Without it, the first 1 of the ground-truth ``detection`` column (the package's ``GT_indx``), else the
first novel sample. Whichever is used must be the first novel sample, or it is an error naming both.
The metadata's ``detection`` key is ignored, as the package ignores it (no code of sail-on-client 0.30
reads it; its fixtures hold values beyond the test length or sample ids there).

Round size: the metadata's ``round_size``, else ``source.round_size``. Class-score rows must sum to 1
within ``source.sum_tolerance`` (or are rescaled with ``source.normalize``).

CSV: every file is read by a CSV parser (:mod:`owl_eval.formats.csv_table`): a field may be quoted and then
hold commas and line breaks (the transcripts' ``text``); the quote character is ``source.quote_char``,
``|`` by default because sail-on-client 0.30's ``LocalHarness.evaluate`` reads the ground truth, detection and
classification files with ``quotechar="|"`` (its file provider reads the ground truth so too; its transcripts
ground truth quotes with ``|``), ``'"'`` for standard CSV. One quote character serves every file here, the
baseline session's included (``LocalHarness.evaluate`` reads that one file with pandas' default ``'"'``). A UTF-8
byte-order mark, CRLF line ends and blank lines are accepted; row numbers in messages are physical lines.

All files come from a link-free listing of the folders (:func:`owl_eval.safe_paths.list_files`: a symbolic
link anywhere under them is one error), test ids and session names pass
:func:`owl_eval.safe_paths.check_name`, and every malformed value is one :class:`SourceFormatError` naming
the file, row and column (or a :class:`ConfigError` naming the ``source.*`` key).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Literal, overload

import numpy as np

from owl_eval.errors import ConfigError
from owl_eval.protocols.ond.metrics import OndTrial
from owl_eval.protocols.ond.record import OndRecord
from owl_eval.protocols.ond.sources.sailon_results import read_classification, read_detection
from owl_eval.protocols.ond.sources.sailon_truth import (
    CLASS_INDEX,
    MAX_CLASS,
    ROLES,
    Truth,
    labels,
    read_truth,
    red_light,
)
from owl_eval.safe_paths import check_name, list_files, read_bytes, read_text
from owl_eval.sources import SourceData, SourceFormatError
from owl_eval.typed import as_bool, as_choice, as_float, as_int, check_keys

GT_SUFFIX = "_single_df.csv"
META_SUFFIX = "_metadata.json"
DETECTION_SUFFIX = "_detection.csv"
CLASSIFICATION_SUFFIX = "_classification.csv"
DEFAULT_COLUMNS = {"id": "id", "detection": "detection", "class": "classification", "novel": None}


class SailonSource:
    def __init__(
        self,
        path: str,
        results_path: str | None = None,
        session: str | None = None,
        baseline_session: str | None = None,
        columns: dict | None = None,
        unknown_column: str = "first",
        class_index: str = "package",
        round_size: int | None = None,
        condition: str = "system",
        normalize: bool = False,
        sum_tolerance: float = 1e-6,
        quote_char: str = "|",
        **unknown,
    ):
        if unknown:  # a typo such as +source.sesion=S1: name the key and the valid ones
            check_keys(unknown, [p for p in inspect.signature(SailonSource).parameters if p != "unknown"], "source")
        if path is None or not str(path) or str(path) == "???":
            raise SourceFormatError("source.path: expected the directory holding the <test_id>_single_df.csv files")
        self.path = Path(str(path)).expanduser()
        self.results_path = Path(str(results_path)).expanduser() if results_path not in (None, "") else None
        self.session = _session_name(session, "source.session")
        self.baseline_session = _session_name(baseline_session, "source.baseline_session")
        self.columns = _columns(columns)
        self.unknown_column = as_choice(unknown_column, "source.unknown_column", ("first", "last"))
        self.class_index = as_choice(class_index, "source.class_index", CLASS_INDEX)
        self.round_size = (
            None if round_size is None else as_int(round_size, "source.round_size", minimum=1, maximum=MAX_CLASS)
        )
        self.condition = as_choice(condition, "source.condition", ("system", "given"))
        self.normalize = as_bool(normalize, "source.normalize")
        self.sum_tolerance = as_float(sum_tolerance, "source.sum_tolerance", minimum=0.0, maximum=1.0)
        self.quote_char = _quote_char(quote_char)
        self._listings: dict[str, dict[str, list[Path]]] = {}

    # -- discovery -------------------------------------------------------------------------------------
    def _listing(self, which: str) -> dict[str, list[Path]]:
        """Every file under the ground-truth (``path``) or results folder by file name, listed once,
        without following links."""
        root = self.path if which == "path" or self.results_path is None else self.results_path
        key = str(root)
        if key not in self._listings:
            by_name: dict[str, list[Path]] = {}
            for file in list_files(root, what=f"source.{which} folder").values():
                by_name.setdefault(file.name, []).append(file)
            self._listings[key] = by_name
        return self._listings[key]

    @overload
    def _find(self, which: str, name: str, *, required: Literal[True] = True) -> Path: ...
    @overload
    def _find(self, which: str, name: str, *, required: bool) -> Path | None: ...
    def _find(self, which: str, name: str, *, required: bool = True) -> Path | None:
        found = self._listing(which).get(name, [])
        if len(found) > 1:
            raise SourceFormatError(
                f"{name}: found {len(found)} times under source.{which} ({', '.join(map(str, found[:3]))}); "
                "keep one, or point source.path / source.results_path at one of them"
            )
        if not found and required:
            root = self.path if which == "path" or self.results_path is None else self.results_path
            raise SourceFormatError(f"{name}: file not found under {root} (searched recursively)")
        return found[0] if found else None

    def test_ids(self) -> list[str]:
        ids = []
        for name, paths in self._listing("path").items():
            if name.endswith(GT_SUFFIX):
                ids.append(check_name(name[: -len(GT_SUFFIX)], what="test id", where=str(paths[0])))
        if not ids:
            raise SourceFormatError(f"source.path: no *{GT_SUFFIX} ground-truth files under {self.path}")
        return sorted(ids)

    def sessions(self, test_id: str) -> list[str]:
        suffix = f".{test_id}{DETECTION_SUFFIX}"
        return sorted(
            check_name(name[: -len(suffix)], what="session name", where=str(paths[0]))
            for name, paths in self._listing("results_path").items()
            if name.endswith(suffix)
        )

    def _check_session(self, session: str, key: str, test_ids: list[str]) -> None:
        """A configured session must have result files; otherwise say which sessions exist."""
        if any(f"{session}.{t}{DETECTION_SUFFIX}" in self._listing("results_path") for t in test_ids):
            return
        known = sorted({s for t in test_ids for s in self.sessions(t)})
        raise ConfigError(
            f"{key}: no result files '{session}.<test_id>{DETECTION_SUFFIX}' for session {session!r} "
            f"under {self.results_path or self.path}; sessions found: {known or 'none'}"
        )

    # -- reading ----------------------------------------------------------------------------------------
    def load(self) -> SourceData:
        test_ids = self.test_ids()
        session = self.session or self._only_session(test_ids[0])
        self._check_session(session, "source.session", test_ids)
        if self.baseline_session:
            self._check_session(self.baseline_session, "source.baseline_session", test_ids)
        trials: list[OndTrial] = []
        baseline: list[OndTrial] | None = [] if self.baseline_session else None
        width: tuple[int, Path] | None = None  # K+1 and the file that set it
        for test_id in test_ids:
            truth = self._read_truth(test_id)
            trial, scores_path = self._read_session(session, test_id, truth)
            n_columns = trial.p_class.shape[1]
            width = width or (n_columns, scores_path)
            if n_columns != width[0]:
                raise SourceFormatError(
                    f"{scores_path}: {n_columns} class-score columns, but {width[1]} has {width[0]}; "
                    "every test must score the same K+1 classes"
                )
            trials.append(trial)
            if baseline is not None and self.baseline_session:  # set together
                base, base_path = self._read_session(self.baseline_session, test_id, truth)
                if base.p_class.shape[1] != n_columns:
                    raise SourceFormatError(
                        f"{base_path}: {base.p_class.shape[1]} class-score columns, but {scores_path} "
                        f"(session {session!r}) has {n_columns}"
                    )
                baseline.append(base)
        assert width is not None  # test_ids() is never empty
        num_known = width[0] - 1
        record = OndRecord(
            condition=self.condition,
            known_classes=np.arange(num_known),
            novel_classes=np.zeros(0, np.int64),
            class_names=tuple(str(c) for c in range(num_known)),
            trials=trials,
            baseline_trials=baseline,
        )
        return SourceData(
            protocol="ond",
            record=record,
            tags={
                "condition": self.condition,
                "source": "sailon",
                "session": session,
                "tests": str(len(trials)),
                "baseline_session": self.baseline_session or "none",
                "class_index": self.class_index,
            },
        )

    def _only_session(self, test_id: str) -> str:
        sessions = self.sessions(test_id)
        if len(sessions) != 1:
            raise ConfigError(
                f"source.session: give the session name; found {sessions or 'no'} result files "
                f"'<session>.{test_id}{DETECTION_SUFFIX}' under {self.results_path or self.path}"
            )
        return sessions[0]

    def _read_truth(self, test_id: str) -> Truth:
        path = self._find("path", f"{test_id}{GT_SUFFIX}")
        meta_path = self._find("path", f"{test_id}{META_SUFFIX}", required=False)
        metadata = None if meta_path is None else (meta_path, read_text(meta_path, what="metadata file"))
        text = read_text(path, what="ground-truth file")
        return read_truth(test_id, path, text, self.columns, metadata, quote_char=self.quote_char)

    def _read_session(self, session: str, test_id: str, truth: Truth) -> tuple[OndTrial, Path]:
        det_path = self._find("results_path", f"{session}.{test_id}{DETECTION_SUFFIX}")
        cls_path = self._find("results_path", f"{session}.{test_id}{CLASSIFICATION_SUFFIX}")
        world = read_detection(
            det_path, read_bytes(det_path, what="detection file"), truth.ids, truth.path, quote_char=self.quote_char
        )
        scores = read_classification(
            cls_path,
            read_bytes(cls_path, what="classification file"),
            truth.ids,
            truth.path,
            unknown_column=self.unknown_column,
            sum_tolerance=self.sum_tolerance,
            normalize=self.normalize,
            quote_char=self.quote_char,
        )
        gt_class, gt_novel = labels(
            truth,
            scores.shape[1],
            class_index=self.class_index,
            unknown_column=self.unknown_column,
            scores_path=cls_path,
        )
        round_size = truth.round_size or self.round_size
        if round_size is None:
            raise ConfigError(
                f"source.round_size: {truth.metadata_path or f'{test_id}{META_SUFFIX}'} gives no round_size "
                "for test " + repr(test_id) + "; set source.round_size"
            )
        trial = OndTrial(
            gt_class=gt_class,
            gt_novel=gt_novel,
            red_light=red_light(truth, gt_novel),
            p_world_changed=world,
            p_class=scores,
            batch_size=round_size,
            trial_id=test_id,
        )
        return trial, cls_path


def _session_name(value, key: str) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ConfigError(f"{key}: expected a session name, got {value!r} ({type(value).__name__})")
    return check_name(str(value), what="session name", where=key)


def _quote_char(value) -> str:
    """``source.quote_char``: one character that is not a comma, a line break, a space or a tab."""
    if not isinstance(value, str) or len(value) != 1 or value in ",\r\n \t":
        raise ConfigError(
            f"source.quote_char: expected one character that quotes fields (sail-on-client's files use '|'; "
            f"standard CSV uses '\"'), got {value!r}"
        )
    return value


def _columns(columns) -> dict:
    """``source.columns``: role -> header name or 0-based position; ``detection``/``novel`` may be null."""
    given = dict(columns or {})
    check_keys(given, ROLES, "source.columns")
    merged = DEFAULT_COLUMNS | given
    for role, spec in merged.items():
        key = f"source.columns.{role}"
        if spec is None or spec == "":
            if role in ("id", "class"):
                raise ConfigError(f"{key}: required (a header name or a 0-based column position)")
            merged[role] = None
        elif isinstance(spec, int) and not isinstance(spec, bool):
            merged[role] = as_int(spec, key, minimum=0, maximum=MAX_CLASS)
        elif not isinstance(spec, str):
            raise ConfigError(f"{key}: expected a header name or a 0-based column position, got {spec!r}")
    return merged
