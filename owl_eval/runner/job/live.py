"""``owl-eval``'s prepare step: the protocol's driver, the domain and the agents built from the config and checked
together, the metric settings typed; the record step then runs the agents (:class:`AgentsRun`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from omegaconf import DictConfig

from owl_eval.datasets.provenance import provenance_of
from owl_eval.evaluation import evaluation_for
from owl_eval.protocols.base import Record
from owl_eval.runner.config.build import build_part
from owl_eval.runner.job.config import JobConfig, read_job_config
from owl_eval.runner.job.naming import choice_name, job_run_name
from owl_eval.runner.job.prepared import PreparedJob, Scorer

GROUPS = ("protocol", "domain", "agent", "baseline")


@dataclass
class AgentsRun:
    """The record step of ``owl-eval``: the driver runs the agents over the domain, seeded by the job's seed."""

    driver: Any
    domain: Any
    agent: Any
    baseline: Any | None
    seed: int
    progress: bool

    def make(self) -> Record:
        rng = np.random.default_rng(self.seed)
        return self.driver.run(
            domain=self.domain, agent=self.agent, baseline=self.baseline, rng=rng, progress=self.progress
        )


def prepare_live(cfg: DictConfig, job: JobConfig | None = None) -> PreparedJob:
    """Build the driver, domain and agents and let the driver check them (the agent's interface, the domain's data,
    a model's shapes), type the metric settings: any problem is one error naming the key, before any run exists.
    ``job``: the job's config as read (default: read from ``cfg``)."""
    job = job or read_job_config(cfg)
    driver = build_part(cfg, "protocol")
    domain = build_part(cfg, "domain")
    agent = build_part(cfg, "agent")
    baseline = build_part(cfg, "baseline") if cfg.get("baseline") else None
    driver.check(domain=domain, agent=agent, baseline=baseline)
    if callable(getattr(driver, "check_models", None)):  # a plugin's driver need not derive from ProtocolDriver
        driver.check_models(domain=domain, agent=agent, baseline=baseline)  # e.g. a torch module's forward pass
    names = {group: choice_name(job.choices, job.resolved, group) for group in GROUPS}
    # the figures name the agent under test (the trajectory scenes' titles)
    evaluation = evaluation_for(driver.name, {**driver.evaluation_context(), "agent": names["agent"]})
    # the metrics node built by Hydra's instantiate (its _target_, the protocol's options class), checked on the way
    metric_options = evaluation.options(cfg.get("metrics") or {})
    seed = job.switches.seed
    tags = (
        {
            "domain": getattr(domain, "name", names["domain"]),
            "agent": names["agent"],
            "baseline": names["baseline"] if baseline is not None else "none",
            "seed": str(seed),
        }
        | driver.tags()
        | getattr(domain, "tags", dict)()  # domain settings that change the numbers (windows)
    )
    sweep = job.sweep
    run_name = job_run_name(
        agent=names["agent"],
        seed=seed,
        condition=tags.get("condition"),
        job_num=sweep.job_num if sweep else None,
        task_overrides=sweep.task_overrides if sweep else (),
        swept=sweep.swept_keys if sweep else (),
    )
    return PreparedJob(
        kind="job",
        config=job,
        scorer=Scorer(evaluation, metric_options, job.settings.log_record, driver=driver),
        record_step=AgentsRun(driver, domain, agent, baseline, seed, job.switches.progress),
        tags=tags,
        run_name=run_name,
        parts={"protocol": driver, "domain": domain, "agent": agent, "baseline": baseline, "names": names},
        inputs=provenance_of(domain),
    )
