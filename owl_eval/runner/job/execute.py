"""One job, whatever its record comes from, read top to bottom in :func:`execute`:

1. **read the config** once (:func:`owl_eval.runner.job.config.read_job_config`) and check that the store can be
   written;
2. **prepare**, in the job's own process (:mod:`owl_eval.runner.process.worker`): build and check what makes the
   record (``owl-eval``: :func:`owl_eval.runner.job.live.prepare_live`; ``owl-eval-evaluate``:
   :func:`owl_eval.runner.job.source.prepare_source`) and type the metric settings. Any problem is one error naming
   the key, and no run is created;
3. **open the run** here (:mod:`owl_eval.tracking`), unless a resumed sweep finds the job done;
4. **record and score**, in the job's process (:mod:`owl_eval.runner.job.scoring`);
5. **log** metrics, figures and the record.

A record step that fails (a crashing agent, Ctrl-C) leaves a FAILED or KILLED run holding the metrics of what was
completed (the driver hands it over on the exception: :func:`owl_eval.protocols.base.keep_partial`). A job's
process that is killed cannot hand anything over: after each completed unit it saves the record so far into the
job's scratch folder (:class:`~owl_eval.runner.job.scoring.ProgressSaver`), and this process scores and logs the
latest save.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from owl_eval.metrics.keys import MetricKey
from owl_eval.runner.job.config import JobConfig, read_job_config
from owl_eval.runner.job.prepared import JobHeader, PreparedJob, job_header
from owl_eval.runner.job.scoring import (
    PROGRESS_FILE,
    Outcome,
    no_exit,
    record_and_score,
    scored_partial,
    scored_saved,
)
from owl_eval.runner.process.worker import ForkedWorker, InlineWorker, carried_by, fork_wanted, inline_reason
from owl_eval.tracking.keys import CONFIG_HASH_TAG, RUN_KIND_TAG
from owl_eval.tracking.redaction import remember, scrub, scrub_values
from owl_eval.tracking.reuse import reuse_finished, skip_enabled, yield_to_earlier_claim
from owl_eval.tracking.runs import StartedRun, TrackedRun, flatten, git_commit
from owl_eval.tracking.settings import redacted
from owl_eval.tracking.store import warm_store
from owl_eval.tracking.sweep_parent import find_sweep_parent

log = logging.getLogger(__name__)

Prepare = Callable[[DictConfig, JobConfig], PreparedJob]
JobProcess = ForkedWorker | InlineWorker


def execute(
    cfg: DictConfig, prepare: Prepare, *, in_process: bool = False, started: list[StartedRun] | None = None
) -> dict[str, float]:
    """Prepare, record, score and log one job; returns the scalar metrics (for sweepers). ``started`` gets the run
    this job opens (the command line prints its summary, FAILED too).

    The prepare, record and score steps run in a child process (in this one with ``in_process``, or where forking
    is not wanted), the MLflow run is owned by this process, so a job whose agent dies (``os._exit``, a segfault,
    the OOM killer) still ends its run FAILED with the reason."""
    clock = time.perf_counter()
    job = read_job_config(cfg)  # a bad value or interpolation is reported before any work starts
    job.settings.check_writable(job.launch_dir)  # a read-only store or artifact folder, before any run is made
    with job_process(cfg, job, prepare, in_process=in_process) as (process, scratch):
        header: JobHeader = process.prepared()
        run = open_run(job, header, started)
        if not isinstance(run, TrackedRun):
            return run  # the metrics of the run that already had this job
        with run:
            try:
                log_config(run, job, header)
                outcome = finished_outcome(process, header, run, scratch)
                timings = {header.setup_key: run.opened_after(clock)} | outcome.timings
                log_outcome(run, outcome, timings)
                run.log_timings({**timings, MetricKey("total_s", timing=True): time.perf_counter() - clock})
            finally:
                if job.job_log is not None:
                    run.attach_log(job.job_log)
        return dict(outcome.results.values)


@contextlib.contextmanager
def job_process(
    cfg: DictConfig, job: JobConfig, prepare: Prepare, *, in_process: bool
) -> Iterator[tuple[JobProcess, Path]]:
    """The job's process (forked, or this one), preparing the job as it starts; and its scratch folder (the saved
    record and figures, the record so far), both gone at the end.

    BLAS is held to one thread for the record and score steps (:func:`record_and_score`): parallel launchers
    (joblib, Ray) limit threads in their workers anyway, and a different thread count may change the last bits of a
    matrix product, so pinning it keeps the numbers identical on every launcher."""
    scratch = Path(tempfile.mkdtemp(prefix="owl-eval-job-"))
    build = functools.partial(no_exit, prepare, cfg, job)
    carried = functools.partial(scored_partial, scratch=scratch / "partial")
    process: JobProcess
    if fork_wanted(in_process=in_process):
        process = ForkedWorker(
            build,
            functools.partial(record_and_score, scratch=scratch, progress=scratch / PROGRESS_FILE),
            header=functools.partial(job_header, scorer=True),
            carried=carried,
            # a resumed sweep may find the job done: its record step waits until the run exists
            wait_for_go=skip_enabled(job.settings, multirun=job.sweep is not None),
            timeout=job.agent_timeout,
        )
        warm_store(job.settings.resolved_uri(job.launch_dir))  # while the job's process builds the agents
    else:
        if job.agent_timeout is not None:
            log.warning(
                "agent_timeout is not enforced: the job runs in the launching process (%s)",
                inline_reason(in_process=in_process),
            )
        process = InlineWorker(
            build, functools.partial(record_and_score, scratch=scratch), header=job_header, carried=carried
        )
    try:
        yield process, scratch
    finally:
        process.close()
        shutil.rmtree(scratch, ignore_errors=True)


def open_run(job: JobConfig, header: JobHeader, started: list[StartedRun] | None) -> TrackedRun | dict[str, float]:
    """The job's MLflow run, under its sweep's parent; or, when a resumed sweep finds the job's config already
    FINISHED or running, that run's metrics (nothing more is done)."""
    settings, launch_dir = job.settings, job.launch_dir
    parent_run_id = parent_run(job)
    skip = header.resumable and skip_enabled(settings, multirun=job.sweep is not None)
    digest = header.config_hash
    if skip:
        reused = reuse_finished(
            settings, launch_dir, digest, parent_run_id=parent_run_id, job_label=job.label, run_name=header.run_name
        )
        if reused is not None:
            return reused
    tags = {
        RUN_KIND_TAG: header.kind,
        "protocol": header.protocol,
        "experiment": str(job.resolved.get("experiment_name", "")),
        "git_commit": git_commit(launch_dir),
        CONFIG_HASH_TAG: digest,
    } | header.tags
    run = TrackedRun.start(
        settings, run_name=header.run_name, tags=tags, parent_run_id=parent_run_id, launch_dir=launch_dir
    )
    if started is not None and run.started is not None:
        started.append(run.started)
    if skip:
        earlier = yield_to_earlier_claim(settings, launch_dir, run.run_id, digest, job_label=job.label)
        if earlier is not None:
            log.info("skipped %s: the same config is already running in MLflow run %s", job.label, earlier)
            return {}
    log.info("MLflow run %s (%s) in %s", run.run_id, header.run_name, redacted(settings.resolved_uri(launch_dir)))
    return run


def parent_run(job: JobConfig) -> str | None:
    """The sweep's parent run: the one its start handed on, else found by the sweep-folder tag; None outside a sweep."""
    if job.sweep is None:
        return None
    return find_sweep_parent(job.settings, job.launch_dir, job.sweep.sweep_dir, handed=job.sweep.parent_run_id)


def log_config(run: TrackedRun, job: JobConfig, header: JobHeader) -> None:
    """The config as the job resolved it, as params and the ``config/config.yaml`` artifact, and the data the
    domain read; every secret of a tracking URI as ``***``."""
    remember(str((job.resolved.get("tracking") or {}).get("uri") or "") or None)
    run.log_params({key: scrub(value) for key, value in flatten(job.resolved).items()})
    run.log_text(OmegaConf.to_yaml(OmegaConf.create(scrub_values(job.resolved))), "config/config.yaml")
    run.log_inputs(header.inputs)


def finished_outcome(process: JobProcess, header: JobHeader, run: TrackedRun, scratch: Path) -> Outcome:
    """The scored record the job's process hands over. When its record step fails (a crash, Ctrl-C, a kill), what
    was completed is logged before the error goes on: scored there, or, the process killed, scored here from what it
    saved as it went."""
    try:
        return process.result()
    except BaseException as exc:
        partial = carried_by(exc)
        if partial is None:
            partial = scored_saved(header, scratch)
        if partial is not None:
            run.set_tags({"partial_record": "true"})
            log_outcome(run, partial)
        raise


def log_outcome(run: TrackedRun, outcome: Outcome, timings: dict[MetricKey, float] | None = None) -> None:
    """Metrics, the record and the figures of a scored record into ``run``; ``timings`` gets the seconds the
    scoring took and those spent logging to MLflow."""
    clock = time.perf_counter()
    run.set_tags(outcome.tags)  # what actually happened (e.g. which references were reused)
    run.log_results(outcome.results)
    if outcome.record_dir is not None:
        run.log_artifact(outcome.record_dir, "record")
    if outcome.figure_dir is not None:
        run.log_artifact(outcome.figure_dir, "plots")
    if timings is not None:
        timings.update(outcome.timings)
        timings[MetricKey("mlflow_logging_s", timing=True)] = time.perf_counter() - clock
