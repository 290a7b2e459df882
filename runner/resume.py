"""Resuming an interrupted sweep: a job whose exact config already has a FINISHED run is skipped.

"Exact config" is the ``owl_eval.config_hash`` tag (the resolved config without the tracking node) in
the same experiment. The hash covers the config, not the code: after changing an agent's code, re-run
with ``tracking.skip_finished=false``. A skipped job creates no run; it records the run it reused on the
sweep's parent (tag ``owl_eval.reused.<run_id>``) so the sweep's comparison still counts it.
"""
from __future__ import annotations

import logging

from runner.compare import REUSED_TAG_PREFIX
from runner.tracking import CONFIG_HASH_TAG, RUN_KIND_TAG, TrackingSettings, make_client

log = logging.getLogger(__name__)


def skip_enabled(settings: TrackingSettings, multirun: bool) -> bool:
    """``tracking.skip_finished``: true / false, or null (the default) = skip in sweeps, re-run single jobs."""
    flag = getattr(settings, "skip_finished", None)
    return multirun if flag is None else bool(flag)


def find_finished_run(client, experiment_name: str, config_hash: str):
    """The latest FINISHED job run of this config in the experiment, or None."""
    exp = client.get_experiment_by_name(experiment_name)
    if exp is None:
        return None
    runs = client.search_runs([exp.experiment_id],
                              filter_string=(f"tags.`{CONFIG_HASH_TAG}` = '{config_hash}' and tags.`{RUN_KIND_TAG}` = 'job'"
                                             " and attributes.status = 'FINISHED'"),
                              order_by=["attributes.start_time DESC"], max_results=1)
    return runs[0] if runs else None


def reuse_finished(settings: TrackingSettings, launch_dir: str, config_hash: str, *, parent_run_id: str | None,
                   job_label: str) -> dict[str, float] | None:
    """The metrics of the finished run of this config (and a note on the parent), or None to run the job."""
    client = make_client(settings.resolved_uri(launch_dir))
    found = find_finished_run(client, settings.experiment_name, config_hash)
    if found is None:
        return None
    log.info("skipped %s: config %s already FINISHED in MLflow run %s (%s); tracking.skip_finished=false re-runs it",
             job_label, config_hash, found.info.run_id, found.info.run_name)
    if parent_run_id:
        client.set_tag(parent_run_id, f"{REUSED_TAG_PREFIX}{found.info.run_id}", job_label)
    return dict(found.data.metrics)
