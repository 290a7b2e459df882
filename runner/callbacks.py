"""Hydra callback that gives a multirun one parent MLflow run, with a nested child run per job.

on_multirun_start creates the parent and hands its id to the jobs (environment variable, inherited by
joblib/loky and submitit workers and a Ray cluster the launcher starts; jobs on an existing Ray cluster or
elsewhere find it by the sweep-dir tag). on_job_end marks the parent FAILED when a job failed (the basic
sweeper skips on_multirun_end then); on_multirun_end logs the comparison of the jobs over seeds
(``runner.compare``) to the parent and ends it FINISHED. Hydra turns callback exceptions into warnings, so
the logic lives in plain functions that tests call directly.
"""
from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from runner.compare import summarize_sweep
from runner.tracking import RUN_KIND_TAG, SWEEP_DIR_TAG, TrackingSettings, get_or_create_experiment, make_client

try:
    from hydra.experimental.callback import Callback
except ImportError:  # pragma: no cover
    Callback = object

log = logging.getLogger(__name__)


def _settings(config: DictConfig) -> TrackingSettings:
    node = OmegaConf.to_container(config.tracking, resolve=True)
    node.pop("_target_", None)
    return TrackingSettings(**node)


def _sweep_dir(config: DictConfig) -> str:
    return str(Path(str(config.hydra.sweep.dir)).resolve())


def start_sweep_parent(settings: TrackingSettings, launch_dir: str, sweep_dir: str, *, experiment: str,
                       overrides: list[str]) -> str:
    uri = settings.resolved_uri(launch_dir)
    client = make_client(uri)
    experiment_id = get_or_create_experiment(client, settings.experiment_name, settings.resolved_artifact_location(uri))
    name = f"sweep-{experiment or 'owl-eval'}-{time.strftime('%Y%m%d-%H%M%S')}"
    run = client.create_run(experiment_id, run_name=name,
                            tags={RUN_KIND_TAG: "sweep", SWEEP_DIR_TAG: sweep_dir, "experiment": experiment or ""})
    client.log_param(run.info.run_id, "sweep.overrides", " ".join(overrides)[:6000])
    return run.info.run_id


def find_sweep_parent(settings: TrackingSettings, launch_dir: str, sweep_dir: str) -> str | None:
    uri = settings.resolved_uri(launch_dir)
    client = make_client(uri)
    exp = client.get_experiment_by_name(settings.experiment_name)
    if exp is None:
        return None
    runs = client.search_runs([exp.experiment_id], filter_string=f"tags.`{SWEEP_DIR_TAG}` = '{sweep_dir}'",
                              order_by=["attributes.start_time DESC"], max_results=1)
    if runs:
        log.info("sweep parent run %s found by its sweep-dir tag", runs[0].info.run_id)
    return runs[0].info.run_id if runs else None


def mark_parent(settings: TrackingSettings, launch_dir: str, run_id: str, status: str) -> None:
    """End the parent with ``status``; FAILED is never overwritten by FINISHED."""
    client = make_client(settings.resolved_uri(launch_dir))
    current = client.get_run(run_id).info.status
    if current == "FAILED" and status != "FAILED":
        return
    client.set_terminated(run_id, status=status)


class MlflowSweepCallback(Callback):
    def __init__(self, env_var: str = "OWL_EVAL_PARENT_RUN_ID"):
        self.env_var = env_var

    def _parent(self, config: DictConfig) -> tuple[TrackingSettings, str, str | None]:
        settings = _settings(config)
        launch_dir = str(config.hydra.runtime.cwd)
        run_id = os.environ.get(self.env_var) or find_sweep_parent(settings, launch_dir, _sweep_dir(config))
        return settings, launch_dir, run_id

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        settings = _settings(config)
        run_id = start_sweep_parent(settings, str(config.hydra.runtime.cwd), _sweep_dir(config),
                                    experiment=str(config.get("experiment_name", "")),
                                    overrides=list(config.hydra.overrides.task))
        os.environ[self.env_var] = run_id
        log.info("MLflow sweep parent run %s", run_id)

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        from hydra.core.utils import JobStatus

        if job_return.status != JobStatus.FAILED:
            return
        settings, launch_dir, run_id = self._parent(config)
        if run_id:
            mark_parent(settings, launch_dir, run_id, "FAILED")

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        settings, launch_dir, run_id = self._parent(config)
        if run_id:
            try:
                summarize_sweep(settings, launch_dir, run_id, list(config.hydra.overrides.task))
            except Exception:  # the comparison is a bonus; never lose the sweep's status over it
                log.exception("comparison of sweep %s failed; `python -m runner.compare --sweep %s` retries it", run_id, run_id)
            mark_parent(settings, launch_dir, run_id, "FINISHED")
        os.environ.pop(self.env_var, None)
