"""A job's record step and its scoring, in the job's process: the record made (:func:`record_and_score`), saved as it
grows (:class:`ProgressSaver`), scored by the protocol's evaluation, saved and drawn into a scratch folder, ready
for MLflow (:class:`Outcome`). What a failed or killed record step completed is scored too
(:func:`scored_partial`, :func:`scored_saved`)."""

from __future__ import annotations

import logging
import os
import pickle
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from owl_eval.evaluation import Scored
from owl_eval.evaluation.selection import select
from owl_eval.metrics.keys import MetricKey
from owl_eval.metrics.results import MetricResults
from owl_eval.protocols.base import PARTIAL_ATTRIBUTE, Record, RecordOnDisk, partial_record, set_progress_sink
from owl_eval.runner.job.prepared import JobHeader, PreparedJob, Scorer

log = logging.getLogger(__name__)

OVERFLOW_LIMIT = 1e300
PROGRESS_FILE = "progress.pkl"  # the record so far, in the job's scratch folder
# Saving the record so far may take this share of the record step's time, beyond SAVE_ALLOWANCE_S: past it, a
# completed unit is saved with a later one (see ProgressSaver)
SAVE_SHARE = 0.02
SAVE_ALLOWANCE_S = 0.5


class ProgressSaver:
    """The progress sink of a job's process (:func:`owl_eval.protocols.base.set_progress_sink`): the record so far
    pickled to ``path`` after each completed unit, atomically (a temporary file, then ``os.replace``), so the latest
    complete save is what a kill leaves.

    Saving costs time in proportion to the record's size, so it is held to a budget: in all, at most
    :data:`SAVE_ALLOWANCE_S` plus :data:`SAVE_SHARE` of the time since the record step started. Within it (a
    record of a few MB, saved in milliseconds) every unit is saved and a kill loses only the unit in progress;
    past it (a large record whose save takes t seconds), a unit waits for the next save, and a kill loses the
    unit in progress plus those completed in the last ~t / SAVE_SHARE seconds."""

    def __init__(self, path: Path):
        self.path = path
        self.started = time.perf_counter()
        self.spent = 0.0  # seconds spent saving
        self.broken = False

    def __call__(self, completed: Callable[[], Any | None]) -> None:
        now = time.perf_counter()
        if self.broken or self.spent > SAVE_ALLOWANCE_S + SAVE_SHARE * (now - self.started):
            return
        try:
            record = completed()
            if record is None:
                return
            temporary = self.path.with_name(self.path.name + ".tmp")
            with open(temporary, "wb") as fh:
                pickle.dump(record, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(temporary, self.path)
        except Exception as exc:  # noqa: BLE001 - saving is a safety net: it never stops the job
            self.broken = True
            log.warning(
                "the record so far is not saved (%s: %s): a killed job keeps no metrics", type(exc).__name__, exc
            )
        finally:
            self.spent += time.perf_counter() - now


@dataclass
class Outcome:
    """A scored record ready to log: its metrics, the seconds its steps took, the folders holding the saved
    record and the figures' PNG files, and the tags the record tells."""

    results: MetricResults
    timings: dict[MetricKey, float]
    record_dir: Path | None = None
    figure_dir: Path | None = None
    tags: dict[str, str] = field(default_factory=dict)


def no_exit(step: Callable[..., Any], *args: Any) -> Any:
    """``step(*args)``; a ``SystemExit`` from inside (an agent calling ``sys.exit``) is the agent's crash."""
    try:
        return step(*args)
    except SystemExit as exc:
        error = AgentExit(
            f"the agent ended the job with sys.exit({exc.code!r}); an agent returns its output or raises an error"
        )
        partial = partial_record(exc)
        if partial is not None:
            setattr(error, PARTIAL_ATTRIBUTE, partial)
        raise error from exc


class AgentExit(RuntimeError):
    """An agent (or a library it called) called ``sys.exit()`` during the job."""


def record_and_score(job: PreparedJob, scratch: Path, *, progress: Path | None = None) -> Outcome:
    """The record step, then its scoring: the metrics, the record saved and the figures drawn into ``scratch``.
    With ``progress``, the record so far is saved there after each completed unit (:class:`ProgressSaver`)."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        clock = time.perf_counter()
        set_progress_sink(ProgressSaver(progress) if progress is not None else None)
        try:
            record = no_exit(job.record_step.make)
        finally:
            set_progress_sink(None)
        record_seconds = time.perf_counter() - clock
        outcome = score_record(job.scorer, record, scratch, figures=job.config.switches.figures)
    outcome.tags = job.scorer.record_tags(record)
    if job.record_key:
        outcome.timings = {job.record_key: record_seconds} | outcome.timings
    return outcome


def scored_partial(job: PreparedJob, exc: BaseException, scratch: Path) -> Outcome | None:
    """The completed part of a record step that raised ``exc``, scored (no figures), or None."""
    partial = partial_record(exc)
    if partial is None:
        return None
    outcome = score_record(job.scorer, partial, scratch, figures=False)
    outcome.tags = job.scorer.record_tags(partial)  # what the completed part tells (e.g. which task series were logged)
    return outcome


def scored_saved(header: JobHeader, scratch: Path) -> Outcome | None:
    """The record so far that a killed job's process saved (:class:`ProgressSaver`), scored here, or None."""
    saved = scratch / PROGRESS_FILE
    if header.scorer is None or not saved.is_file():
        return None
    from threadpoolctl import threadpool_limits

    try:
        scorer: Scorer = pickle.loads(header.scorer)
        with open(saved, "rb") as fh:
            record = pickle.load(fh)  # written by the job's own process, in this folder only
        if isinstance(record, RecordOnDisk):
            record = record.load()
        if record is None:
            return None
        with threadpool_limits(limits=1):
            outcome = score_record(scorer, record, scratch / "saved", figures=False)
        outcome.tags = scorer.record_tags(record)
        return outcome
    except Exception as exc:  # noqa: BLE001 - the job's own error is the one to report
        log.warning("the completed part of the killed job could not be scored: %s: %s", type(exc).__name__, exc)
        return None


def score_record(scorer: Scorer, record: Record, scratch: Path, *, figures: bool) -> Outcome:
    """A complete or partial record scored by the job's evaluation with its checked options; the record saved
    (``tracking.log_record``) and the figures drawn as PNG files under ``scratch``, ready for MLflow."""
    timings: dict[MetricKey, float] = {}
    clock = time.perf_counter()
    scored = scorer.evaluation.score(record, scorer.metric_options, figures=figures)
    results = select(finite_only(scored.results), scorer.evaluation.name, scorer.metric_options.names)
    timings[MetricKey("metrics_s", timing=True)] = time.perf_counter() - clock
    record_dir = figure_dir = None
    if scorer.log_record:
        record_dir = scratch / "record"
        record_dir.mkdir(parents=True, exist_ok=True)
        record.save(record_dir)
        seal_record(record_dir)
    if figures:
        clock = time.perf_counter()
        made = scorer.evaluation.figures(Scored(results, scored.figure_data), scorer.metric_options)
        figure_dir = scratch / "plots"
        figure_dir.mkdir(parents=True, exist_ok=True)
        import matplotlib.pyplot as plt

        for name, fig in made.items():
            try:
                fig.savefig(figure_dir / f"{name}.png")
            finally:
                plt.close(fig)
        timings[MetricKey("figures_s", timing=True)] = time.perf_counter() - clock
    return Outcome(results, timings, record_dir, figure_dir)


def seal_record(record_dir: Path) -> None:
    """The record's checksums (:mod:`owl_eval.formats.checksums`), for a plugin's record whose ``save`` does not
    write them (the built-in protocols' do): every logged record is checked when it is re-scored."""
    from owl_eval.formats.checksums import CHECKSUMS_FILE, seal

    if not (record_dir / CHECKSUMS_FILE).is_file():
        seal(record_dir)


def finite_only(results: MetricResults) -> MetricResults:
    """A value that is not a finite number of sensible size (an overflow on extreme inputs: predictions of
    1e308 give inf or a clipped 1.8e308) is N/A with the reason, never logged as a measurement."""
    for name, value in list(results.values.items()):
        number = float(value)
        if not np.isfinite(number) or abs(number) >= OVERFLOW_LIMIT:
            del results.values[name]
            results.na[name] = (
                f"not a finite number ({number!r}): the computation overflowed; check the inputs for extreme values"
            )
    return results
