"""One job: build everything from config, run the protocol, compute metrics, log to MLflow."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
from omegaconf import DictConfig, OmegaConf

from owl_eval.evaluation import Scored, evaluation_for
from owl_eval.evaluation.selection import select
from owl_eval.runner.build import build_part
from owl_eval.runner.prepare import JobSwitches, job_switches, resolve_config, tracking_settings
from owl_eval.runner.resume import reuse_finished, skip_enabled, yield_to_earlier_claim
from owl_eval.runner.tracking import CONFIG_HASH_TAG, RUN_KIND_TAG, TrackedRun, TrackingSettings, flatten, git_commit

log = logging.getLogger(__name__)

PARENT_RUN_ENV = "OWL_EVAL_PARENT_RUN_ID"
OVERFLOW_LIMIT = 1e300


def hydra_runtime():
    """HydraConfig when running under Hydra (CLI, launchers, tests that set it), else None."""
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.get() if HydraConfig.initialized() else None


def choice_name(cfg: DictConfig, group: str) -> str:
    """The config option chosen for a group (``ond/knn_novelty``), or the class name outside Hydra."""
    hc = hydra_runtime()
    if hc is not None and hc.runtime.choices.get(group):
        return str(hc.runtime.choices[group])
    node = cfg.get(group)
    if node is None:
        return "none"
    return str(node.get("_target_", "unknown")).rsplit(".", 1)[-1]


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
    if hc is None or str(hc.mode) != "RunMode.MULTIRUN":
        return None
    from owl_eval.runner.callbacks import find_sweep_parent

    return find_sweep_parent(settings, launch_dir, str(Path(hc.sweep.dir).resolve()))


def run_job(cfg: DictConfig) -> dict[str, float]:
    """Run one evaluation as configured and log it; returns the scalar metrics (for sweepers).

    BLAS is held to one thread for the whole job: parallel launchers (joblib, Ray) limit threads in
    their workers anyway, and a different thread count may change the last bits of a matrix product,
    so pinning it keeps the numbers identical on every launcher.
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        return _run_job(cfg)


@dataclass
class PreparedJob:
    """Everything a job needs, built and checked before any MLflow run exists."""

    resolved: dict
    settings: TrackingSettings
    switches: JobSwitches
    protocol: Any
    domain: Any
    agent: Any
    baseline: Any
    evaluation: Any  # owl_eval.evaluation.Evaluation of the protocol
    metric_options: Any  # its typed options (owl_eval.evaluation.options)
    names: dict


def prepare_job(cfg: DictConfig) -> PreparedJob:
    """Resolve and type-check the config, build the parts and let the protocol check them (the agent's
    interface, the domain's data, the metric settings). Any problem is one error naming the key, and
    no run is created: only an agent that crashes mid-run leaves a FAILED run."""
    resolved = resolve_config(cfg)
    settings = tracking_settings(cfg)
    switches = job_switches(cfg)
    protocol = build_part(cfg, "protocol")
    domain = build_part(cfg, "domain")
    agent = build_part(cfg, "agent")
    baseline = build_part(cfg, "baseline") if cfg.get("baseline") else None
    protocol.check(domain=domain, agent=agent, baseline=baseline)
    names = {g: choice_name(cfg, g) for g in ("protocol", "domain", "agent", "baseline")}
    # the figures name the agent under test (the trajectory scenes' titles)
    evaluation = evaluation_for(protocol.name, {**protocol.evaluation_context(), "agent": names["agent"]})
    metric_options = evaluation.options(resolved.get("metrics") or {})
    return PreparedJob(
        resolved, settings, switches, protocol, domain, agent, baseline, evaluation, metric_options, names
    )


def _run_job(cfg: DictConfig) -> dict[str, float]:
    started = time.perf_counter()
    hc = hydra_runtime()
    launch_dir = hc.runtime.cwd if hc is not None else os.getcwd()
    job = prepare_job(cfg)
    settings, protocol, seed = job.settings, job.protocol, job.switches.seed
    multirun = hc is not None and str(hc.mode) == "RunMode.MULTIRUN"
    parent_run_id = find_parent_run(settings, launch_dir)
    skip = skip_enabled(settings, multirun=multirun)
    job_label = " ".join(hc.overrides.task) if hc is not None else "job"
    if skip:
        # Resuming a sweep: a config that already has a FINISHED (or running) run is not run again.
        reused = reuse_finished(
            settings, launch_dir, config_hash(cfg), parent_run_id=parent_run_id, job_label=job_label
        )
        if reused is not None:
            return reused
    names = job.names
    tags = (
        {
            RUN_KIND_TAG: "job",
            "protocol": protocol.name,
            "domain": getattr(job.domain, "name", names["domain"]),
            "agent": names["agent"],
            "baseline": names["baseline"] if job.baseline is not None else "none",
            "seed": str(seed),
            "experiment": str(cfg.get("experiment_name", "")),
            "git_commit": git_commit(launch_dir),
            CONFIG_HASH_TAG: config_hash(cfg),
        }
        | protocol.tags()
        | getattr(job.domain, "tags", dict)()
    )  # domain settings that change the numbers (windows)
    from owl_eval.runner.callbacks import job_run_name

    run_name = job_run_name(
        agent=names["agent"],
        seed=seed,
        condition=tags.get("condition"),
        job_num=hc.job.num if multirun else None,
        task_overrides=list(hc.overrides.task) if multirun else (),
    )
    run = TrackedRun.start(settings, run_name=run_name, tags=tags, parent_run_id=parent_run_id, launch_dir=launch_dir)
    if skip:
        earlier = yield_to_earlier_claim(settings, launch_dir, run.run_id, config_hash(cfg), job_label=job_label)
        if earlier is not None:
            log.info("skipped %s: the same config is already running in MLflow run %s", job_label, earlier)
            return {}
    log.info("MLflow run %s (%s) in %s", run.run_id, run_name, settings.resolved_uri(launch_dir))
    setup_seconds = time.perf_counter() - started
    with run:
        try:
            run.log_params(flatten(job.resolved))
            run.log_text(OmegaConf.to_yaml(cfg, resolve=True), "config/config.yaml")
            rng = np.random.default_rng(seed)
            t0 = time.perf_counter()
            try:
                record = protocol.run(
                    domain=job.domain, agent=job.agent, baseline=job.baseline, rng=rng, progress=job.switches.progress
                )
            except BaseException:
                # A crash or Ctrl-C: what was completed is scored and logged before the run ends.
                partial = protocol.record_so_far()
                if partial is not None:
                    run.set_tags({"partial_record": "true"})
                    log_outcome(run, job.evaluation, partial, job.metric_options, settings, figures=False)
                raise
            run_seconds = time.perf_counter() - t0
            run.set_tags(protocol.tags())  # what actually happened (e.g. which references were reused)
            timings: dict[str, float] = {}
            results = log_outcome(
                run, job.evaluation, record, job.metric_options, settings, figures=job.switches.figures, timings=timings
            )
            run.log_metrics(
                {
                    "time/setup_s": setup_seconds,
                    "time/protocol_s": run_seconds,
                    **timings,
                    "time/total_s": time.perf_counter() - started,
                }
            )
        finally:
            _attach_job_log(run)
    return dict(results.values)


def log_outcome(
    run: TrackedRun,
    evaluation,
    record,
    options,
    settings: TrackingSettings,
    *,
    figures: bool,
    timings: dict[str, float] | None = None,
):
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


def finite_only(results):
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


def run(
    overrides: list[str] | tuple[str, ...] = (), *, output_dir: str | os.PathLike | None = None
) -> dict[str, float]:
    """Python API: compose the packaged config with command-line style overrides and run one job.

    ``run(["+experiment=ond_given_detection", "seed=3"])`` is ``python -m owl_eval +experiment=... seed=3``
    without a subprocess (no sweep; use the CLI with ``-m`` for that).
    """
    return run_composed("config", overrides, run_job, output_dir=output_dir)


def run_composed(config_name: str, overrides, job, *, output_dir=None):
    """Compose ``owl_eval/conf/<config_name>.yaml`` with overrides, set up Hydra's runtime info, call ``job(cfg)``."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from owl_eval.paths import CONFIG_DIR
    from owl_eval.runner.resolvers import register_resolvers

    register_resolvers()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name, overrides=list(overrides), return_hydra_config=True)
    out = Path(output_dir) if output_dir else Path.cwd() / "outputs" / "api" / time.strftime("%Y-%m-%d_%H-%M-%S")
    out.mkdir(parents=True, exist_ok=True)
    with open_dict(cfg):
        cfg.hydra.runtime.cwd = os.getcwd()
        cfg.hydra.runtime.output_dir = str(out.resolve())
        cfg.hydra.job.name = "api"
    HydraConfig.instance().set_config(cfg)
    try:
        job_cfg = cfg.copy()
        with open_dict(job_cfg):
            del job_cfg["hydra"]
        return job(job_cfg)
    finally:
        HydraConfig.instance().cfg = None
