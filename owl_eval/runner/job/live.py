"""``owl-eval``'s job: the agents run over the domain under the protocol's driver, and the record is scored and
logged by the shared skeleton (:mod:`owl_eval.runner.job.execute`); :func:`prepare_live` is its prepare step."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
from omegaconf import DictConfig

from owl_eval.datasets.provenance import provenance_of
from owl_eval.evaluation import evaluation_for
from owl_eval.runner.config.build import build_part
from owl_eval.runner.config.hydra_runtime import hydra_runtime, is_multirun
from owl_eval.runner.job.execute import PreparedJob, config_hash, execute, find_parent_run, log_outcome  # noqa: F401
from owl_eval.runner.job.config import job_switches, resolve_config, tracking_settings
from owl_eval.tracking.runs import logged_as

__all__ = ["config_hash", "find_parent_run", "log_outcome", "prepare_live", "run", "run_job"]


def choice_name(cfg: DictConfig, group: str) -> str:
    """The config option chosen for a group (``ond/knn_novelty``), or the class name outside Hydra."""
    hc = hydra_runtime()
    if hc is not None and hc.runtime.choices.get(group):
        return str(hc.runtime.choices[group])
    node = cfg.get(group)
    if node is None:
        return "none"
    return str(node.get("_target_", "unknown")).rsplit(".", 1)[-1]


def run_job(cfg: DictConfig) -> dict[str, float]:
    """Run one evaluation as configured and log it; returns the scalar metrics (for sweepers)."""
    return execute(cfg, prepare_live)


def prepare_live(cfg: DictConfig) -> PreparedJob:
    """Resolve and type-check the config, build the driver, domain and agents and let the driver check them
    (the agent's interface, the domain's data), type the metric settings: any problem is one error naming the
    key, before any run exists. The record step runs the driver."""
    resolved = resolve_config(cfg)
    settings = tracking_settings(cfg)
    switches = job_switches(cfg)
    driver = build_part(cfg, "protocol")
    domain = build_part(cfg, "domain")
    agent = build_part(cfg, "agent")
    baseline = build_part(cfg, "baseline") if cfg.get("baseline") else None
    driver.check(domain=domain, agent=agent, baseline=baseline)
    if callable(getattr(driver, "check_models", None)):  # a plugin's driver need not derive from ProtocolDriver
        driver.check_models(domain=domain, agent=agent, baseline=baseline)  # e.g. a torch module's forward pass
    names = {g: choice_name(cfg, g) for g in ("protocol", "domain", "agent", "baseline")}
    # the figures name the agent under test (the trajectory scenes' titles)
    evaluation = evaluation_for(driver.name, {**driver.evaluation_context(), "agent": names["agent"]})
    # the metrics node built by Hydra's instantiate (its _target_, the protocol's options class), checked on the way
    metric_options = evaluation.options(cfg.get("metrics") or {})
    tags = (
        {
            "domain": getattr(domain, "name", names["domain"]),
            "agent": names["agent"],
            "baseline": names["baseline"] if baseline is not None else "none",
            "seed": str(switches.seed),
        }
        | driver.tags()
        | getattr(domain, "tags", dict)()  # domain settings that change the numbers (windows)
    )
    hc = hydra_runtime()
    from owl_eval.runner.sweeps.callbacks import job_run_name

    multirun = is_multirun(hc)
    run_name = job_run_name(
        agent=names["agent"],
        seed=switches.seed,
        condition=tags.get("condition"),
        job_num=hc.job.num if multirun else None,
        task_overrides=list(hc.overrides.task) if multirun else (),
    )

    def record() -> Any:
        rng = np.random.default_rng(switches.seed)
        return driver.run(domain=domain, agent=agent, baseline=baseline, rng=rng, progress=switches.progress)

    return PreparedJob(
        kind="job",
        resolved=resolved,
        settings=settings,
        switches=switches,
        evaluation=evaluation,
        metric_options=metric_options,
        tags=tags,
        run_name=run_name,
        record=record,
        final_tags=lambda record: (
            driver.tags()
            | driver.record_tags(record)
            | evaluation.run_tags(
                record, metric_options, record_logged=settings.log_record, logged_as=logged_as(evaluation.name)
            )
        ),
        parts={"protocol": driver, "domain": domain, "agent": agent, "baseline": baseline, "names": names},
        inputs=provenance_of(domain),
    )


def run(
    overrides: list[str] | tuple[str, ...] = (), *, output_dir: str | os.PathLike | None = None
) -> dict[str, float]:
    """Python API: compose the packaged config with command-line style overrides and run one job.

    ``run(["+experiment=ond_given_detection", "seed=3"])`` is ``python -m owl_eval +experiment=... seed=3``
    without a subprocess (no sweep; use the CLI with ``-m`` for that).
    """
    # in this process: a notebook's kernel must not be forked (owl_eval.runner.process.worker)
    return run_composed(
        "config", overrides, lambda cfg: execute(cfg, prepare_live, in_process=True), output_dir=output_dir
    )


def run_composed(config_name: str, overrides, job, *, output_dir=None):
    """Compose ``owl_eval/conf/<config_name>.yaml`` with overrides, set up Hydra's runtime info, call ``job(cfg)``."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from owl_eval.paths import CONFIG_DIR
    from owl_eval.runner.config.build import unknown_key_error
    from owl_eval.runner.config.resolvers import register_resolvers
    from owl_eval.typed import config_node_error

    register_resolvers()
    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            cfg = compose(config_name, overrides=list(overrides), return_hydra_config=True)
    except Exception as exc:  # a key a node lacks (metrics.treshold, protocol.num_trails): the command line's message
        error = config_node_error(exc) or unknown_key_error(exc)
        if error is None:
            raise
        raise error from exc
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
