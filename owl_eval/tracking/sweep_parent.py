"""A sweep's parent run in MLflow: created when the sweep starts, found by its jobs, ended when it ends (or fails),
and the runs of its jobs still running (what a stop signal waits for)."""

from __future__ import annotations

import hashlib
import logging
import os
import time
from collections.abc import Mapping

from owl_eval.tracking.keys import PARENT_TAG, RUN_KIND_TAG, SWEEP_DIR_TAG
from owl_eval.tracking.liveness import owner_tags, reap_quietly
from owl_eval.tracking.redaction import redacted_override, scrub
from owl_eval.tracking.settings import TrackingSettings
from owl_eval.tracking.store import delete_run_permanently, filter_literal, get_or_create_experiment, make_client

log = logging.getLogger(__name__)

SWEEP_DIR_DIGEST_TAG = "owl_eval.sweep_dir_sha256"  # searched instead of the dir: no quoting in filters
REAPED_TAG = "owl_eval.reaped"  # on a sweep parent: runs of dead processes it marked KILLED


def sweep_dir_digest(sweep_dir: str) -> str:
    """Hex digest of a sweep directory: the tag jobs search their parent by (any character is safe)."""
    return hashlib.sha256(str(sweep_dir).encode("utf-8", "surrogateescape")).hexdigest()[:32]


def start_sweep_parent(
    settings: TrackingSettings, launch_dir: str, sweep_dir: str, *, experiment: str, overrides: list[str]
) -> str:
    """Create the sweep's parent run; first end KILLED the runs dead processes of this host left RUNNING
    (logged, and listed on the new parent as ``owl_eval.reaped``)."""
    uri = settings.resolved_uri(launch_dir)
    client = make_client(uri)
    experiment_id = get_or_create_experiment(client, settings.experiment_name, settings.resolved_artifact_location(uri))
    reaped = reap_quietly(client, experiment_id, found_by=f"the launch of sweep {sweep_dir} (process {os.getpid()})")
    name = f"sweep-{experiment or 'owl-eval'}-{time.strftime('%Y%m%d-%H%M%S')}"
    tags = {
        RUN_KIND_TAG: "sweep",
        SWEEP_DIR_TAG: sweep_dir[:5000],
        SWEEP_DIR_DIGEST_TAG: sweep_dir_digest(sweep_dir),
        "experiment": experiment or "",
    } | owner_tags()
    if reaped:
        log.warning("runs left RUNNING by dead processes were marked KILLED: %s", ", ".join(reaped))
        tags[REAPED_TAG] = ",".join(reaped)[:5000]
    run = client.create_run(experiment_id, run_name=name, tags=tags)
    shown = [redacted_override(o) for o in overrides]  # tracking.uri="postgresql://u:***@h/db", quotes and all
    client.log_param(run.info.run_id, "sweep.overrides", " ".join(shown)[:6000])
    return run.info.run_id


def find_sweep_parent(
    settings: TrackingSettings, launch_dir: str, sweep_dir: str, *, handed: str | None = None
) -> str | None:
    """The parent run of the sweep writing to ``sweep_dir``: ``handed``, the id the sweep's start handed on, else
    found by its sweep-folder tag (where the start could not hand it on: a job on a remote launcher), or None."""
    if handed:
        return handed
    uri = settings.resolved_uri(launch_dir)
    client = make_client(uri)
    exp = client.get_experiment_by_name(settings.experiment_name)
    if exp is None:
        return None
    digest = filter_literal(sweep_dir_digest(sweep_dir), what="hydra.sweep.dir")
    runs = client.search_runs(
        [exp.experiment_id],
        filter_string=f"tags.`{SWEEP_DIR_DIGEST_TAG}` = {digest}",
        order_by=["attributes.start_time DESC"],
        max_results=1,
    )
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


def end_sweep_parent(
    settings: TrackingSettings, launch_dir: str, run_id: str, reason: str, *, status: str, delete_if_empty: bool
) -> None:
    """End a sweep's parent run that is still RUNNING after the sweep stopped abnormally: tag ``error`` = ``reason``,
    ``status``. With ``delete_if_empty``, a parent no job has a run under is deleted instead (a sweep stopped by a
    config or input error before any job ran leaves no run at all)."""
    client = make_client(settings.resolved_uri(launch_dir))
    parent = client.get_run(run_id)
    # A job that failed has already marked the parent FAILED (on_job_end): an empty parent goes anyway.
    if delete_if_empty and not client.search_runs(
        [parent.info.experiment_id],
        filter_string=f"tags.`{PARENT_TAG}` = {filter_literal(run_id, what='run id')}",
        max_results=1,
    ):
        delete_run_permanently(client, run_id)
        log.info("sweep parent run %s deleted: the sweep stopped before any job ran (%s)", run_id, reason)
        return
    if parent.info.status != "RUNNING":
        return
    client.set_tag(run_id, "error", scrub(str(reason))[:5000])
    client.set_terminated(run_id, status=status)
    log.error("sweep parent run %s ended %s: %s", run_id, status, reason)


def running_jobs(settings: TrackingSettings, launch_dir: str, parent_run_id: str) -> list[Mapping[str, str]]:
    """The tags of the sweep's job runs that are RUNNING (who owns each: ``owl_eval.tracking.liveness``)."""
    client = make_client(settings.resolved_uri(launch_dir))
    parent = client.get_run(parent_run_id)
    query = f"tags.`{PARENT_TAG}` = {filter_literal(parent_run_id, what='run id')} and attributes.status = 'RUNNING'"
    runs = client.search_runs([parent.info.experiment_id], filter_string=query, max_results=1000)
    return [dict(r.data.tags) for r in runs]
