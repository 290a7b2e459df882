"""One job: build everything from config, run the protocol, compute metrics, log to MLflow."""
from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig, OmegaConf

from runner.build import build_part, plain
from runner.resume import reuse_finished, skip_enabled
from runner.selection import select
from runner.tracking import CONFIG_HASH_TAG, RUN_KIND_TAG, TrackedRun, TrackingSettings, flatten, git_commit

log = logging.getLogger(__name__)

PARENT_RUN_ENV = "OWL_EVAL_PARENT_RUN_ID"


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
    unresolved = OmegaConf.to_container(cfg, resolve=False)
    content = {k: v for k, v in unresolved.items() if k != "tracking"}
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:16]


def tracking_settings(cfg: DictConfig) -> TrackingSettings:
    node = plain(cfg.tracking)
    node.pop("_target_", None)
    return TrackingSettings(**node)


def find_parent_run(settings: TrackingSettings, launch_dir: str) -> str | None:
    """The sweep's parent run: from the environment (set by the sweep callback), else by the sweep-dir tag."""
    parent = os.environ.get(PARENT_RUN_ENV)
    if parent:
        return parent
    hc = hydra_runtime()
    if hc is None or str(hc.mode) != "RunMode.MULTIRUN":
        return None
    from runner.callbacks import find_sweep_parent

    return find_sweep_parent(settings, launch_dir, str(Path(hc.sweep.dir).resolve()))


def user_facing(job, cfg: DictConfig):
    """Run ``job(cfg)``; in a single (non-sweep) CLI run, a bad config, bad data, a bad agent output or a
    missing extra ends with one ``error: ...`` line instead of a traceback. The traceback still goes to
    the job's log file and to the FAILED MLflow run's ``error.txt``; ``HYDRA_FULL_ERROR=1`` shows it."""
    import sys

    try:
        return job(cfg)
    except (ValueError, ImportError) as exc:
        hc = hydra_runtime()
        if os.environ.get("HYDRA_FULL_ERROR") == "1" or (hc is not None and str(hc.mode) == "RunMode.MULTIRUN"):
            raise
        log.error("%s: %s", type(exc).__name__, exc, exc_info=True)
        sys.exit(f"error: {exc}")


def run_job(cfg: DictConfig) -> dict[str, float]:
    """Run one evaluation as configured and log it; returns the scalar metrics (for sweepers).

    BLAS is held to one thread for the whole job: parallel launchers (joblib, Ray) limit threads in
    their workers anyway, and a different thread count may change the last bits of a matrix product,
    so pinning it keeps the numbers identical on every launcher.
    """
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        return _run_job(cfg)


def _run_job(cfg: DictConfig) -> dict[str, float]:
    started = time.perf_counter()
    hc = hydra_runtime()
    launch_dir = hc.runtime.cwd if hc is not None else os.getcwd()
    resolved = OmegaConf.to_container(cfg, resolve=True)
    settings = tracking_settings(cfg)
    if skip_enabled(settings, multirun=hc is not None and str(hc.mode) == "RunMode.MULTIRUN"):
        # Resuming a sweep: a config that already has a FINISHED run is not run (or logged) again.
        reused = reuse_finished(settings, launch_dir, config_hash(cfg), parent_run_id=find_parent_run(settings, launch_dir),
                                job_label=" ".join(hc.overrides.task) if hc is not None else "job")
        if reused is not None:
            return reused
    seed = int(cfg.seed)
    protocol = build_part(cfg, "protocol")
    domain = build_part(cfg, "domain")
    agent = build_part(cfg, "agent")
    baseline = build_part(cfg, "baseline") if cfg.get("baseline") else None
    names = {g: choice_name(cfg, g) for g in ("protocol", "domain", "agent", "baseline")}
    tags = {
        RUN_KIND_TAG: "job", "protocol": protocol.name, "domain": getattr(domain, "name", names["domain"]),
        "agent": names["agent"], "baseline": names["baseline"] if baseline is not None else "none",
        "seed": str(seed), "experiment": str(cfg.get("experiment_name", "")),
        "git_commit": git_commit(launch_dir), CONFIG_HASH_TAG: config_hash(cfg),
    } | protocol.tags()
    run_name = f"{names['agent'].rsplit('/', 1)[-1]}-seed{seed}"
    if "condition" in tags:
        run_name = f"{tags['condition']}-{run_name}"
    if hc is not None and str(hc.mode) == "RunMode.MULTIRUN":
        run_name = f"{hc.job.num}-{run_name}"
    run = TrackedRun.start(settings, run_name=run_name, tags=tags,
                           parent_run_id=find_parent_run(settings, launch_dir), launch_dir=launch_dir)
    log.info("MLflow run %s (%s) in %s", run.run_id, run_name, settings.resolved_uri(launch_dir))
    setup_seconds = time.perf_counter() - started
    with run:
        try:
            run.log_params(flatten(resolved))
            run.log_text(OmegaConf.to_yaml(cfg, resolve=True), "config/config.yaml")
            rng = np.random.default_rng(seed)
            t0 = time.perf_counter()
            try:
                record = protocol.run(domain=domain, agent=agent, baseline=baseline, rng=rng,
                                      progress=bool(cfg.get("progress", True)))
            except Exception:
                partial = protocol.record_so_far()
                if partial is not None:
                    run.set_tags({"partial_record": "true"})
                    log_outcome(run, protocol, partial, cfg, settings, figures=False)
                raise
            run_seconds = time.perf_counter() - t0
            run.set_tags(protocol.tags())  # what actually happened (e.g. which references were reused)
            timings: dict[str, float] = {}
            results = log_outcome(run, protocol, record, cfg, settings, figures=bool(cfg.get("figures", True)), timings=timings)
            run.log_metrics({"time/setup_s": setup_seconds, "time/protocol_s": run_seconds, **timings,
                             "time/total_s": time.perf_counter() - started})
        finally:
            _attach_job_log(run)
    return dict(results.values)


def log_outcome(run: TrackedRun, protocol, record, cfg: DictConfig, settings: TrackingSettings, *, figures: bool,
                timings: dict[str, float] | None = None):
    """Metrics (and figures and the record) of a complete or partial record; ``timings`` gets the
    seconds spent on metrics, figures and MLflow logging."""
    timings = {} if timings is None else timings
    clock = time.perf_counter()
    metric_settings = plain(cfg.get("metrics") or {})
    results = protocol.evaluate(record, metric_settings)
    results = select(results, protocol.name, metric_settings.get("names"))
    timings["time/metrics_s"] = time.perf_counter() - clock
    clock = time.perf_counter()
    run.log_results(results)
    if settings.log_record:
        run.log_files(lambda folder: protocol.save_record(record, folder), "record")
    logging_seconds = time.perf_counter() - clock
    if figures:
        clock = time.perf_counter()
        made = protocol.figures(record, results, metric_settings)
        timings["time/figures_s"] = time.perf_counter() - clock
        clock = time.perf_counter()
        run.log_figures(made)
        logging_seconds += time.perf_counter() - clock
    timings["time/mlflow_logging_s"] = logging_seconds
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


def run(overrides: list[str] | tuple[str, ...] = (), *, output_dir: str | os.PathLike | None = None) -> dict[str, float]:
    """Python API: compose the packaged config with command-line style overrides and run one job.

    ``run(["+experiment=ond_given_detection", "seed=3"])`` is ``python -m runner +experiment=... seed=3``
    without a subprocess (no sweep; use the CLI with ``-m`` for that).
    """
    return run_composed("config", overrides, run_job, output_dir=output_dir)


def run_composed(config_name: str, overrides, job, *, output_dir=None):
    """Compose ``conf/<config_name>.yaml`` with overrides, set up Hydra's runtime info, call ``job(cfg)``."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from runner.paths import CONFIG_DIR

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
