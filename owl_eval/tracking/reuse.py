"""Resuming an interrupted sweep: a job whose exact config already has a FINISHED run, or a run in
flight, is skipped.

"Exact config" is the ``owl_eval.config_hash`` tag (the resolved config without the tracking node) in
the same experiment. The hash covers the config, not the code: after changing an agent's code, re-run
with ``tracking.skip_finished=false``. A skipped job creates no run; it records the run it reused on the
sweep's parent (tag ``owl_eval.reused.<run_id>``) so the sweep's comparison still counts it.

In flight: a RUNNING job run of the same config whose process is alive (``owl_eval.tracking.liveness``: same host,
pid and start time checked; another host's run is assumed alive) is taken too, so the same sweep
launched twice at once runs each config once. The exact race (both launches check before either has
created its run) is settled after creation by :func:`yield_to_earlier_claim`: the later run deletes
itself. Order of claims: start time, then run id.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from owl_eval.tracking.finished_runs import FinishedRun, insert_finished_runs, log_finished_run
from owl_eval.tracking.keys import CONFIG_HASH_TAG, PARENT_TAG, REUSED_TAG_PREFIX, RUN_KIND_TAG
from owl_eval.tracking.liveness import HOST_TAG, PID_TAG, owner_alive, owner_tags
from owl_eval.tracking.settings import TrackingSettings
from owl_eval.tracking.store import MAX_TAGS_PER_BATCH, chunks, filter_literal, make_client

log = logging.getLogger(__name__)


def skip_enabled(settings: TrackingSettings, multirun: bool) -> bool:
    """``tracking.skip_finished``: true / false, or null (the default) = skip in sweeps, re-run single jobs."""
    flag = getattr(settings, "skip_finished", None)
    return multirun if flag is None else bool(flag)


def _claims(client, experiment_id: str, config_hash: str) -> list:
    """Active (not deleted) job runs of this config that are FINISHED or RUNNING, oldest first."""
    query = (
        f"tags.`{CONFIG_HASH_TAG}` = {filter_literal(config_hash, what='owl_eval.config_hash')}"
        f" and tags.`{RUN_KIND_TAG}` = 'job'"
    )  # MLflow's IN works on run ids only: status is checked here
    runs = client.search_runs([experiment_id], filter_string=query, max_results=1000)
    return sorted((r for r in runs if r.info.status in ("FINISHED", "RUNNING")), key=_order)


def _order(run) -> tuple[int, str]:
    return (run.info.start_time or 0, run.info.run_id)


def _live(run) -> bool:
    return run.info.status == "FINISHED" or owner_alive(run.data.tags)


def find_claim(client, experiment_id: str, config_hash: str):
    """The run that has this config: the latest FINISHED one, else the earliest RUNNING one whose process
    is alive, else None."""
    claims = _claims(client, experiment_id, config_hash)
    finished = [r for r in claims if r.info.status == "FINISHED"]
    if finished:
        return finished[-1]
    running = [r for r in claims if _live(r)]
    return running[0] if running else None


REUSED_KIND = "reused"  # owl_eval.kind of a run standing for a reused one under a resumed sweep's parent
REUSED_RUN_TAG = "owl_eval.reused_run"


def _record_on_parent(client, parent_run_id: str | None, run_id: str, job_label: str) -> None:
    if parent_run_id:
        client.set_tag(parent_run_id, f"{REUSED_TAG_PREFIX}{run_id}", job_label)


def stand_in(found, parent_run_id: str, run_name: str) -> FinishedRun:
    """The FINISHED run under a resumed sweep's parent standing for the reused run ``found``, so the parent lists
    every job of the sweep in the MLflow UI: its params, tags and final metric values (step 0) copied, kind
    ``reused`` and ``owl_eval.reused_run`` naming the original (where its series and artifacts are). Comparisons
    count the original once (``owl_eval.tracking.reading.sweep_runs`` skips these)."""
    kept = {k: v for k, v in found.data.tags.items() if not k.startswith("mlflow.") and k != RUN_KIND_TAG}
    # Owned by this process, not the original's (long gone): made with MLflow's calls it is RUNNING while it is
    # filled, and a launch reaping runs of dead processes (a parallel job's start) would otherwise end it KILLED.
    tags = (
        kept
        | owner_tags()
        | {
            RUN_KIND_TAG: REUSED_KIND,
            REUSED_RUN_TAG: found.info.run_id,
            PARENT_TAG: parent_run_id,
            "mlflow.note.content": f"Reused: this config had finished in run {found.info.run_id}; its series and "
            "artifacts are there.",
        }
    )
    return FinishedRun(found.info.experiment_id, run_name, tags, dict(found.data.params), dict(found.data.metrics))


def reuse_finished(
    settings: TrackingSettings,
    launch_dir: str,
    config_hash: str,
    *,
    parent_run_id: str | None,
    job_label: str,
    run_name: str | None = None,
) -> dict[str, float] | None:
    """The metrics of the run that already has this config (FINISHED, or RUNNING in a live process: then
    its metrics so far, possibly none), noted on the parent (and, FINISHED, shown under it as ``run_name``:
    :func:`stand_in`); None to run the job."""
    client = make_client(settings.resolved_uri(launch_dir))
    exp = client.get_experiment_by_name(settings.experiment_name)
    found = find_claim(client, exp.experiment_id, config_hash) if exp is not None else None
    if found is None:
        return None
    log.info("%s", skipped_line(found, config_hash, job_label))
    return reuse_run(client, found, parent_run_id=parent_run_id, job_label=job_label, run_name=run_name)


def finished_by_hash(settings: TrackingSettings, launch_dir: str) -> dict[str, Any]:
    """The experiment's latest FINISHED job run of each config hash, in one search of its finished job runs (a
    resumed sweep's sweeper, before it launches anything); {} when the experiment does not exist yet."""
    from owl_eval.tracking.reading import search_all

    client = make_client(settings.resolved_uri(launch_dir))
    exp = client.get_experiment_by_name(settings.experiment_name)
    if exp is None:
        return {}
    query = f"tags.`{RUN_KIND_TAG}` = 'job' and attributes.status = 'FINISHED'"
    found: dict[str, Any] = {}
    for run in sorted(search_all(client, [exp.experiment_id], query), key=_order):
        digest = run.data.tags.get(CONFIG_HASH_TAG)
        if digest:
            found[digest] = run  # the latest wins, as in find_claim
    return found


def reuse_run(client, found, *, parent_run_id: str | None, job_label: str, run_name: str | None) -> dict[str, float]:
    """Take ``found`` (the run that has this job's config) for the job: noted on the sweep's parent and, FINISHED
    and ``run_name`` given, shown under it (:func:`stand_in`); its metrics."""
    return reuse_runs(client, [Reuse(found, job_label, run_name)], parent_run_id=parent_run_id)[0]


@dataclass(frozen=True)
class Reuse:
    """A job taken by a run that already has its config: ``found``, for the job named ``job_label`` (its overrides),
    shown under the sweep's parent as ``run_name`` (None: not shown)."""

    found: Any
    job_label: str
    run_name: str | None


def reuse_runs(client, reuses: Sequence[Reuse], *, parent_run_id: str | None) -> list[dict[str, float]]:
    """:func:`reuse_run` for several jobs of one sweep (:func:`note_reused`, then :func:`show_stand_ins`); their
    metrics, in order."""
    note_reused(client, reuses, parent_run_id=parent_run_id)
    show_stand_ins(client, reuses, parent_run_id=parent_run_id)
    return [dict(r.found.data.metrics) for r in reuses]


def note_reused(client, reuses: Sequence[Reuse], *, parent_run_id: str | None) -> None:
    """The runs taken for the jobs, noted on the sweep's parent (what its comparison counts), in as few batches as
    MLflow allows."""
    if not parent_run_id or not reuses:
        return
    from mlflow.entities import RunTag

    tags = [RunTag(f"{REUSED_TAG_PREFIX}{r.found.info.run_id}", r.job_label) for r in reuses]
    for chunk in chunks(tags, MAX_TAGS_PER_BATCH):
        client.log_batch(parent_run_id, tags=chunk)


def show_stand_ins(client, reuses: Sequence[Reuse], *, parent_run_id: str | None) -> None:
    """A stand-in (:func:`stand_in`) under the sweep's parent for each FINISHED reused run that has a run name: all
    in one transaction where the store allows it, else each with MLflow's calls
    (:mod:`owl_eval.tracking.finished_runs`)."""
    if not parent_run_id:
        return
    runs = [
        stand_in(r.found, parent_run_id, r.run_name)
        for r in reuses
        if r.run_name is not None and r.found.info.status == "FINISHED"
    ]
    if runs and insert_finished_runs(client, runs) is None:
        for run in runs:
            log_finished_run(client, run)


def skipped_line(found, config_hash: str, job_label: str) -> str:
    """What the log says of a job skipped because ``found`` has its config."""
    if found.info.status == "FINISHED":
        return (
            f"skipped {job_label}: config {config_hash} already FINISHED in MLflow run {found.info.run_id} "
            f"({found.info.run_name}); tracking.skip_finished=false re-runs it"
        )
    tags = found.data.tags
    return (
        f"skipped {job_label}: config {config_hash} is running in run {found.info.run_id} ({found.info.run_name}, "
        f"process {tags.get(PID_TAG, '?')} on {tags.get(HOST_TAG, '?')}); tracking.skip_finished=false runs it anyway"
    )


def yield_to_earlier_claim(
    settings: TrackingSettings, launch_dir: str, run_id: str, config_hash: str, *, job_label: str = "job"
) -> str | None:
    """Settle the race of two launches that both found no claim and both created a run of this config.

    Call right after creating the run (``run_id``). If another active job run of the same config, FINISHED
    or RUNNING in a live process, was created earlier (start time, then run id), this run is ended KILLED
    and deleted, the other run is recorded on this run's sweep parent, and its id is returned: the caller
    stops without running. Otherwise None: this run is the config's claim, go on.
    """
    client = make_client(settings.resolved_uri(launch_dir))
    mine = client.get_run(run_id)
    claims = _claims(client, mine.info.experiment_id, config_hash)
    earlier = [r for r in claims if r.info.run_id != run_id and _order(r) < _order(mine) and _live(r)]
    if not earlier:
        return None
    finished = [r for r in earlier if r.info.status == "FINISHED"]
    winner = finished[-1] if finished else earlier[0]
    client.set_terminated(run_id, status="KILLED")
    client.delete_run(run_id)
    _record_on_parent(client, mine.data.tags.get(PARENT_TAG), winner.info.run_id, job_label)
    log.info(
        "run %s deleted: config %s was claimed first by run %s (%s)",
        run_id,
        config_hash,
        winner.info.run_id,
        winner.info.status,
    )
    return winner.info.run_id
