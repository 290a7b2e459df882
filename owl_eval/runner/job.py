"""One job, whatever its record comes from: prepare -> record -> score -> log.

1. **prepare** (no MLflow yet): compose and type-check the config, build and check what makes the record,
   type the metric settings. Any problem is one error naming the key, and no run is created.
2. **record**: run the protocol's driver over the agents (``owl-eval``, :func:`owl_eval.runner.app.prepare_live`)
   or read results produced elsewhere (``owl-eval-evaluate``, :func:`owl_eval.runner.evaluate.prepare_source`).
3. **score** the record with the protocol's evaluation, and **log** metrics, figures and the record.

Both commands are this one skeleton (:func:`execute`) with a different :class:`PreparedJob`. A record step that
fails (a crashing agent, Ctrl-C) leaves a FAILED or KILLED run holding the metrics of what was completed
(the driver hands it over on the exception: :func:`owl_eval.protocols.base.keep_partial`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
from omegaconf import DictConfig, OmegaConf

from owl_eval.evaluation import Evaluation, Scored
from owl_eval.evaluation.options import MetricOptions
from owl_eval.evaluation.selection import select
from owl_eval.metrics.results import MetricResults
from owl_eval.protocols.base import Record, partial_record
from owl_eval.runner.hydra_env import hydra_runtime, is_multirun
from owl_eval.runner.prepare import JobSwitches
from owl_eval.runner.resume import reuse_finished, skip_enabled, yield_to_earlier_claim
from owl_eval.runner.tracking import CONFIG_HASH_TAG, RUN_KIND_TAG, TrackedRun, TrackingSettings, flatten, git_commit

log = logging.getLogger(__name__)

PARENT_RUN_ENV = "OWL_EVAL_PARENT_RUN_ID"
OVERFLOW_LIMIT = 1e300


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
    setup_key: str = "time/setup_s"  # what the seconds until the run starts are logged as
    record_key: str | None = "time/protocol_s"  # what the record step's seconds are logged as
    resumable: bool = True  # a resumed sweep skips a config that already has a finished run
    final_tags: Callable[[Any], dict[str, str]] = lambda record: {}  # tags the record tells
    parts: dict[str, Any] = field(default_factory=dict)  # what was built (driver, domain, agents), for tests


def config_hash(cfg: DictConfig) -> str:
    """Hash of everything that changes a number: the config without the tracking node, interpolations
    left unresolved, so a job's own output directory (``${hydra:runtime.output_dir}/...``) does not make
    two runs of one config look different (a re-run sweep must recognise its finished jobs)."""
    unresolved = cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=False))  # a DictConfig gives a dict
    content = {k: v for k, v in unresolved.items() if k != "tracking"}
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:16]


def find_parent_run(settings: TrackingSettings, launch_dir: str) -> str | None:
    """The sweep's parent run: from the environment (set by the sweep callback), else by the sweep-dir tag."""
    parent = os.environ.get(PARENT_RUN_ENV)
    if parent:
        return parent
    hc = hydra_runtime()
    if not is_multirun(hc):
        return None
    from owl_eval.runner.callbacks import find_sweep_parent

    return find_sweep_parent(settings, launch_dir, str(Path(hc.sweep.dir).resolve()))


def execute(cfg: DictConfig, prepare: Callable[[DictConfig], PreparedJob]) -> dict[str, float]:
    """Prepare, record, score and log one job; returns the scalar metrics (for sweepers).

    BLAS is held to one thread for the whole job: parallel launchers (joblib, Ray) limit threads in
    their workers anyway, and a different thread count may change the last bits of a matrix product,
    so pinning it keeps the numbers identical on every launcher.
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        return _execute(cfg, prepare)


def _execute(cfg: DictConfig, prepare: Callable[[DictConfig], PreparedJob]) -> dict[str, float]:
    started = time.perf_counter()
    hc = hydra_runtime()
    launch_dir = hc.runtime.cwd if hc is not None else os.getcwd()
    job = prepare(cfg)
    settings = job.settings
    multirun = is_multirun(hc)
    parent_run_id = find_parent_run(settings, launch_dir)
    skip = job.resumable and skip_enabled(settings, multirun=multirun)
    job_label = " ".join(hc.overrides.task) if hc is not None else "job"
    digest = config_hash(cfg)
    if skip:
        # Resuming a sweep: a config that already has a FINISHED (or running) run is not run again.
        reused = reuse_finished(settings, launch_dir, digest, parent_run_id=parent_run_id, job_label=job_label)
        if reused is not None:
            return reused
    tags = {
        RUN_KIND_TAG: job.kind,
        "protocol": job.evaluation.name,
        "experiment": str(cfg.get("experiment_name", "")),
        "git_commit": git_commit(launch_dir),
        CONFIG_HASH_TAG: digest,
    } | job.tags
    run = TrackedRun.start(
        settings, run_name=job.run_name, tags=tags, parent_run_id=parent_run_id, launch_dir=launch_dir
    )
    if skip:
        earlier = yield_to_earlier_claim(settings, launch_dir, run.run_id, digest, job_label=job_label)
        if earlier is not None:
            log.info("skipped %s: the same config is already running in MLflow run %s", job_label, earlier)
            return {}
    log.info("MLflow run %s (%s) in %s", run.run_id, job.run_name, settings.resolved_uri(launch_dir))
    setup_seconds = time.perf_counter() - started
    with run:
        try:
            run.log_params(flatten(job.resolved))
            run.log_text(OmegaConf.to_yaml(cfg, resolve=True), "config/config.yaml")
            clock = time.perf_counter()
            try:
                record = job.record()
            except BaseException as exc:
                # A crash or Ctrl-C: what was completed is scored and logged before the run ends.
                partial = partial_record(exc)
                if partial is not None:
                    run.set_tags({"partial_record": "true"})
                    log_outcome(run, job.evaluation, partial, job.metric_options, settings, figures=False)
                raise
            record_seconds = time.perf_counter() - clock
            run.set_tags(job.final_tags(record))  # what actually happened (e.g. which references were reused)
            timings: dict[str, float] = {job.setup_key: setup_seconds}
            if job.record_key:
                timings[job.record_key] = record_seconds
            results = log_outcome(
                run, job.evaluation, record, job.metric_options, settings, figures=job.switches.figures, timings=timings
            )
            run.log_metrics({**timings, "time/total_s": time.perf_counter() - started})
        finally:
            _attach_job_log(run)
    return dict(results.values)


def log_outcome(
    run: TrackedRun,
    evaluation: Evaluation,
    record: Record,
    options: MetricOptions,
    settings: TrackingSettings,
    *,
    figures: bool,
    timings: dict[str, float] | None = None,
) -> MetricResults:
    """Metrics (and figures and the record) of a complete or partial record, scored by the protocol's
    ``evaluation`` with its checked ``options``; ``timings`` gets the seconds spent on metrics, figures and
    MLflow logging."""
    timings = {} if timings is None else timings
    clock = time.perf_counter()
    scored = evaluation.score(record, options, figures=figures)
    results = select(finite_only(scored.results), evaluation.name, options.names)
    timings["time/metrics_s"] = time.perf_counter() - clock
    clock = time.perf_counter()
    run.log_results(results)
    if settings.log_record:
        run.log_files(record.save, "record")
    logging_seconds = time.perf_counter() - clock
    if figures:
        clock = time.perf_counter()
        made = evaluation.figures(Scored(results, scored.figure_data), options)
        timings["time/figures_s"] = time.perf_counter() - clock
        clock = time.perf_counter()
        run.log_figures(made)
        logging_seconds += time.perf_counter() - clock
    timings["time/mlflow_logging_s"] = logging_seconds
    return results


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
