"""One job, whatever its record comes from: prepare -> record -> score -> log.

1. **prepare** (no MLflow yet): compose and type-check the config, build and check what makes the record,
   type the metric settings. Any problem is one error naming the key, and no run is created.
2. **record**: run the protocol's driver over the agents (``owl-eval``, :func:`owl_eval.runner.job.live.prepare_live`)
   or read results produced elsewhere (``owl-eval-evaluate``, :func:`owl_eval.runner.job.source.prepare_source`).
3. **score** the record with the protocol's evaluation, and **log** metrics, figures and the record.

Both commands are this one skeleton (:func:`execute`) with a different :class:`PreparedJob`. A record step that
fails (a crashing agent, Ctrl-C) leaves a FAILED or KILLED run holding the metrics of what was completed
(the driver hands it over on the exception: :func:`owl_eval.protocols.base.keep_partial`).

A job's process that is killed cannot hand anything over: after each completed unit (an OND trial, a continual
task, a trajectory batch; lifelong RL's log is on disk already) it saves the record so far into the job's scratch
folder (:class:`ProgressSaver`), and this process scores and logs the latest one (:func:`_scored_saved`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pickle
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
from omegaconf import DictConfig, OmegaConf

from owl_eval.datasets.provenance import DataInput
from owl_eval.evaluation import Evaluation, Scored
from owl_eval.evaluation.options import MetricOptions
from owl_eval.evaluation.selection import select
from owl_eval.metrics.keys import MetricKey
from owl_eval.metrics.results import MetricResults
from owl_eval.protocols.base import PARTIAL_ATTRIBUTE, Record, RecordOnDisk, partial_record, set_progress_sink
from owl_eval.runner.config.hydra_runtime import hydra_runtime, is_multirun
from owl_eval.runner.job.config import JobSwitches, tracking_settings
from owl_eval.tracking.redaction import redacted_override, remember, scrub, scrub_values
from owl_eval.tracking.reuse import reuse_finished, skip_enabled, yield_to_earlier_claim
from owl_eval.tracking.runs import CONFIG_HASH_TAG, RUN_KIND_TAG, TrackedRun, TrackingSettings, flatten, git_commit
from owl_eval.tracking.settings import redacted
from owl_eval.runner.process.worker import ForkedWorker, InlineWorker, carried_by, fork_wanted, inline_reason
from owl_eval.typed import as_float

log = logging.getLogger(__name__)

PARENT_RUN_ENV = "OWL_EVAL_PARENT_RUN_ID"
OVERFLOW_LIMIT = 1e300
PROGRESS_FILE = "progress.pkl"  # the record so far, in the job's scratch folder
# Saving the record so far may take this share of the record step's time, beyond SAVE_ALLOWANCE_S: past it, a
# completed unit is saved with a later one (see ProgressSaver)
SAVE_SHARE = 0.02
SAVE_ALLOWANCE_S = 0.5


@dataclass
class PreparedJob:
    """Everything a job needs, built and checked before any MLflow run exists."""

    kind: str  # the run's run_kind tag: "job" (agents run) or "evaluate" (a source read)
    resolved: dict
    settings: TrackingSettings
    switches: JobSwitches
    evaluation: Evaluation
    metric_options: MetricOptions
    tags: dict[str, str]
    run_name: str
    record: Callable[[], Record]  # the record step
    setup_key: MetricKey = MetricKey("setup_s", timing=True)  # the seconds until the run starts (time/setup_s)
    record_key: MetricKey | None = MetricKey("protocol_s", timing=True)  # the record step's seconds (time/protocol_s)
    resumable: bool = True  # a resumed sweep skips a config that already has a finished run
    final_tags: Callable[[Any], dict[str, str]] = lambda record: {}  # tags the record tells
    parts: dict[str, Any] = field(default_factory=dict)  # what was built (driver, domain, agents), for tests
    inputs: tuple[DataInput, ...] = ()  # the data sets the domain read (owl_eval.datasets.provenance)


@dataclass(frozen=True)
class JobHeader:
    """What the MLflow side needs of a prepared job: plain values, handed over from the job's process."""

    kind: str
    protocol: str
    resolved: dict
    tags: dict[str, str]
    run_name: str
    setup_key: MetricKey
    resumable: bool
    inputs: tuple[DataInput, ...] = ()
    scorer: bytes | None = None  # a PartialScorer (cloudpickle), to score a saved record so far here


def job_header(job: PreparedJob, *, scorer: bool = False) -> JobHeader:
    """The plain values of ``job``; with ``scorer``, what scores a record so far too (see :class:`PartialScorer`)."""
    return JobHeader(
        job.kind,
        job.evaluation.name,
        job.resolved,
        job.tags,
        job.run_name,
        job.setup_key,
        job.resumable,
        job.inputs,
        _partial_scorer(job) if scorer else None,
    )


@dataclass
class PartialScorer:
    """What scoring a record needs of a :class:`PreparedJob` (no agents, no data): handed to the launching process
    with the header, so that it scores the record so far of a job's process that was killed."""

    evaluation: Evaluation
    metric_options: MetricOptions
    settings: TrackingSettings
    final_tags: Callable[[Any], dict[str, str]]


def _partial_scorer(job: PreparedJob) -> bytes | None:
    import cloudpickle  # type: ignore[import-untyped]  # final_tags is a closure: the standard pickle refuses it

    try:
        return cloudpickle.dumps(PartialScorer(job.evaluation, job.metric_options, job.settings, job.final_tags))
    except Exception as exc:  # noqa: BLE001 - only the rescue of a killed job's work depends on it
        log.warning("a killed job's completed part could not be scored: %s: %s", type(exc).__name__, exc)
        return None


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


def agent_timeout(cfg: DictConfig) -> float | None:
    """``agent_timeout``: seconds the record step (the agents' work, then its scoring) may take, or null (off)."""
    value = cfg.get("agent_timeout")
    return None if value is None else as_float(value, "agent_timeout", minimum=0, open_minimum=True)


def config_hash(cfg: DictConfig, inputs: Sequence[DataInput] = ()) -> str:
    """Hash of everything that changes a number: the config as resolved (an ``${oc.env:...}`` or any other
    interpolation counts by the value it gives now, so a re-run under another environment is not taken for the
    same job) without the tracking node, and the digests of the data the domain read (``inputs``): a run made on
    data that has changed since is never reused. The one exception is what Hydra says about where the job runs
    (``${hydra:runtime.output_dir}/...``): it is hashed as written, so a re-run sweep, whose jobs get new
    folders, recognises its finished jobs."""
    content = {k: v for k, v in identity(cfg).items() if k not in ("tracking", "agent_timeout")}  # no number changes
    if inputs:
        content["owl_eval.data"] = [[i.name, i.digest] for i in inputs]
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:16]


def identity(cfg: DictConfig) -> dict[str, Any]:
    """``cfg`` resolved, except that every ``${hydra:...}`` interpolation is kept as its text (escaped before
    resolving, so an interpolation that refers to one gets that text too). Where the escaping cannot be resolved
    (an ``${hydra:...}`` nested inside another resolver's argument), the fully resolved config: a job is then
    re-run rather than ever taken for another."""
    from omegaconf.errors import OmegaConfBaseException

    unresolved = OmegaConf.to_container(cfg, resolve=False)
    masked = OmegaConf.create(_escape_hydra(unresolved))
    try:
        return cast(dict[str, Any], OmegaConf.to_container(masked, resolve=True))
    except OmegaConfBaseException:
        return cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True))


def _escape_hydra(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _escape_hydra(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_escape_hydra(v) for v in node]
    if isinstance(node, str):
        return node.replace("${hydra:", "\\${hydra:")
    return node


def find_parent_run(settings: TrackingSettings, launch_dir: str) -> str | None:
    """The sweep's parent run: from the environment (set by the sweep callback), else by the sweep-dir tag."""
    parent = os.environ.get(PARENT_RUN_ENV)
    if parent:
        return parent
    hc = hydra_runtime()
    if not is_multirun(hc):
        return None
    from owl_eval.runner.sweeps.callbacks import find_sweep_parent

    return find_sweep_parent(settings, launch_dir, str(Path(hc.sweep.dir).resolve()))


def execute(
    cfg: DictConfig, prepare: Callable[[DictConfig], PreparedJob], *, in_process: bool = False
) -> dict[str, float]:
    """Prepare, record, score and log one job; returns the scalar metrics (for sweepers).

    The prepare, record and score steps run in a child process (:mod:`owl_eval.runner.process.worker`; in this one
    with ``in_process``, or where forking is not wanted), the MLflow run is owned by this process, so a job
    whose agent dies (``os._exit``, a segfault, the OOM killer) still ends its run FAILED with the reason.

    BLAS is held to one thread for the record and score steps: parallel launchers (joblib, Ray) limit threads in
    their workers anyway, and a different thread count may change the last bits of a matrix product, so
    pinning it keeps the numbers identical on every launcher.
    """
    started = time.perf_counter()
    hc = hydra_runtime()
    launch_dir = hc.runtime.cwd if hc is not None else os.getcwd()
    settings = tracking_settings(cfg)  # a bad tracking node or interpolation is reported before any work starts
    settings.check_writable(launch_dir)  # a read-only store or artifact folder, before any run is made
    timeout = agent_timeout(cfg)
    scratch = Path(tempfile.mkdtemp(prefix="owl-eval-job-"))

    def carried(job: PreparedJob, exc: BaseException) -> Outcome | None:
        return _scored_partial(job, exc, scratch / "partial")

    worker: ForkedWorker | InlineWorker
    if fork_wanted(in_process=in_process):
        # a resumed sweep may find the job done: its record step waits until the run exists; else it goes ahead
        wait = skip_enabled(settings, multirun=is_multirun(hc))
        worker = ForkedWorker(
            lambda: _no_exit(prepare, cfg),
            lambda job: record_and_score(job, scratch, progress=scratch / PROGRESS_FILE),
            header=lambda job: job_header(job, scorer=True),
            carried=carried,
            wait_for_go=wait,
            timeout=timeout,
        )
    else:
        if timeout is not None:
            log.warning(
                "agent_timeout is not enforced: the job runs in the launching process (%s)",
                inline_reason(in_process=in_process),
            )
        worker = InlineWorker(
            lambda: _no_exit(prepare, cfg),
            lambda job: record_and_score(job, scratch),
            header=job_header,
            carried=carried,
        )
    try:
        if isinstance(worker, ForkedWorker):
            warm_tracking(settings.resolved_uri(launch_dir))  # while the child builds the agents
        return _execute(cfg, worker, settings, started, launch_dir, scratch)
    finally:
        worker.close()
        shutil.rmtree(scratch, ignore_errors=True)


def _execute(
    cfg: DictConfig, worker, settings: TrackingSettings, started: float, launch_dir: str, scratch: Path
) -> dict[str, float]:
    hc = hydra_runtime()
    header: JobHeader = worker.prepared()
    multirun = is_multirun(hc)
    parent_run_id = find_parent_run(settings, launch_dir)
    skip = header.resumable and skip_enabled(settings, multirun=multirun)
    job_label = " ".join(redacted_override(o) for o in hc.overrides.task) if hc is not None else "job"  # a tag
    digest = config_hash(cfg, header.inputs)
    if skip:
        # Resuming a sweep: a config that already has a FINISHED (or running) run is not run again.
        reused = reuse_finished(
            settings, launch_dir, digest, parent_run_id=parent_run_id, job_label=job_label, run_name=header.run_name
        )
        if reused is not None:
            return reused
    tags = {
        RUN_KIND_TAG: header.kind,
        "protocol": header.protocol,
        "experiment": str(cfg.get("experiment_name", "")),
        "git_commit": git_commit(launch_dir),
        CONFIG_HASH_TAG: digest,
    } | header.tags
    run = TrackedRun.start(
        settings, run_name=header.run_name, tags=tags, parent_run_id=parent_run_id, launch_dir=launch_dir
    )
    if skip:
        earlier = yield_to_earlier_claim(settings, launch_dir, run.run_id, digest, job_label=job_label)
        if earlier is not None:
            log.info("skipped %s: the same config is already running in MLflow run %s", job_label, earlier)
            return {}
    log.info("MLflow run %s (%s) in %s", run.run_id, header.run_name, redacted(settings.resolved_uri(launch_dir)))
    setup_seconds = time.perf_counter() - started
    with run:
        try:
            # tracking.uri's password (and any other secret of a URI) as ***, in the params and the config artifact
            remember(str(OmegaConf.select(cfg, "tracking.uri") or "") or None)
            run.log_params({key: scrub(value) for key, value in flatten(header.resolved).items()})
            resolved = scrub_values(header.resolved)  # the config as the job resolved it, not resolved again
            run.log_text(OmegaConf.to_yaml(OmegaConf.create(resolved)), "config/config.yaml")
            run.log_inputs(header.inputs)
            try:
                outcome: Outcome = worker.result()
            except BaseException as exc:
                # A crash or Ctrl-C: what was completed was scored, and is logged before the run ends.
                partial = carried_by(exc)
                if partial is None:  # the job's process was killed: what it saved as it went
                    partial = _scored_saved(header, scratch)
                if partial is not None:
                    run.set_tags({"partial_record": "true"} | partial.tags)
                    log_outcome(run, partial)
                raise
            run.set_tags(outcome.tags)  # what actually happened (e.g. which references were reused)
            timings = {header.setup_key: setup_seconds} | outcome.timings
            log_outcome(run, outcome, timings)
            run.log_timings({**timings, MetricKey("total_s", timing=True): time.perf_counter() - started})
        finally:
            _attach_job_log(run)
    return dict(outcome.results.values)


def warm_tracking(uri: str) -> None:
    """Import MLflow's SQL store (~0.9 s) if ``uri`` needs it, so that it loads while the job's process works."""
    if uri.split(":", 1)[0].split("+", 1)[0] in ("sqlite", "postgresql", "mysql", "mssql"):
        import mlflow.store.tracking.sqlalchemy_store  # noqa: F401
        import mlflow.tracking  # noqa: F401


def _no_exit(step: Callable[..., Any], *args: Any) -> Any:
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
            record = _no_exit(job.record)
        finally:
            set_progress_sink(None)
        record_seconds = time.perf_counter() - clock
        outcome = score_record(job, record, scratch, figures=job.switches.figures)
    outcome.tags = job.final_tags(record)
    if job.record_key:
        outcome.timings = {job.record_key: record_seconds} | outcome.timings
    return outcome


def _scored_partial(job: PreparedJob, exc: BaseException, scratch: Path) -> Outcome | None:
    """The completed part of a record step that raised ``exc``, scored (no figures), or None."""
    partial = partial_record(exc)
    if partial is None:
        return None
    outcome = score_record(job, partial, scratch, figures=False)
    outcome.tags = job.final_tags(partial)  # what the completed part tells (e.g. which task series were logged)
    return outcome


def _scored_saved(header: JobHeader, scratch: Path) -> Outcome | None:
    """The record so far that a killed job's process saved (:class:`ProgressSaver`), scored here, or None."""
    saved = scratch / PROGRESS_FILE
    if header.scorer is None or not saved.is_file():
        return None
    from threadpoolctl import threadpool_limits

    try:
        scorer: PartialScorer = pickle.loads(header.scorer)
        with open(saved, "rb") as fh:
            record = pickle.load(fh)  # written by the job's own process, in this folder only
        if isinstance(record, RecordOnDisk):
            record = record.load()
        if record is None:
            return None
        with threadpool_limits(limits=1):
            outcome = score_record(scorer, record, scratch / "saved", figures=False)
        outcome.tags = scorer.final_tags(record)
        return outcome
    except Exception as exc:  # noqa: BLE001 - the job's own error is the one to report
        log.warning("the completed part of the killed job could not be scored: %s: %s", type(exc).__name__, exc)
        return None


def score_record(job: PreparedJob | PartialScorer, record: Record, scratch: Path, *, figures: bool) -> Outcome:
    """A complete or partial record scored by the job's evaluation with its checked options; the record saved
    (``tracking.log_record``) and the figures drawn as PNG files under ``scratch``, ready for MLflow."""
    timings: dict[MetricKey, float] = {}
    clock = time.perf_counter()
    scored = job.evaluation.score(record, job.metric_options, figures=figures)
    results = select(finite_only(scored.results), job.evaluation.name, job.metric_options.names)
    timings[MetricKey("metrics_s", timing=True)] = time.perf_counter() - clock
    record_dir = figure_dir = None
    if job.settings.log_record:
        record_dir = scratch / "record"
        record_dir.mkdir(parents=True, exist_ok=True)
        record.save(record_dir)
        seal_record(record_dir)
    if figures:
        clock = time.perf_counter()
        made = job.evaluation.figures(Scored(results, scored.figure_data), job.metric_options)
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


def log_outcome(run: TrackedRun, outcome: Outcome, timings: dict[MetricKey, float] | None = None) -> None:
    """Metrics, the record and the figures of a scored record into ``run``; ``timings`` gets the seconds the
    scoring took and those spent logging to MLflow."""
    clock = time.perf_counter()
    run.log_results(outcome.results)
    if outcome.record_dir is not None:
        run.log_artifact(outcome.record_dir, "record")
    if outcome.figure_dir is not None:
        run.log_artifact(outcome.figure_dir, "plots")
    if timings is not None:
        timings.update(outcome.timings)
        timings[MetricKey("mlflow_logging_s", timing=True)] = time.perf_counter() - clock


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


def _attach_job_log(run: TrackedRun) -> None:
    hc = hydra_runtime()
    if hc is None:
        return
    for handler in logging.getLogger().handlers:
        if hasattr(handler, "flush"):
            handler.flush()
    job_log = Path(hc.runtime.output_dir) / f"{hc.job.name}.log"
    if job_log.is_file():
        run.log_artifact(job_log, "logs")
