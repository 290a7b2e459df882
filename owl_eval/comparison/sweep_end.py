"""The end of a sweep (called by the sweep callback, :mod:`owl_eval.runner.sweeps.callbacks`): compare the sweep's
finished jobs, log the comparison to its parent run, write the same files into the sweep's folder and print where
they are, a line per pair of agents and how to open the parent run."""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from owl_eval.comparison import text
from owl_eval.comparison.model import Comparison
from owl_eval.comparison.outputs import VIEW_KEY_PREFIX, log_to_parent, write_files
from owl_eval.comparison.store import SWEEP_PARAMS_PARAM, load, sweep_selection
from owl_eval.tracking.keys import shared_view_path
from owl_eval.tracking.reading import reused_ids, reused_runs, runs_by_id
from owl_eval.tracking.runs import TrackedRun
from owl_eval.tracking.settings import TrackingSettings
from owl_eval.tracking.store import make_client

log = logging.getLogger(__name__)

LOCAL_UI = "http://127.0.0.1:5000"  # where `mlflow ui` serves a local store by default


def compare_sweep(
    settings: TrackingSettings,
    launch_dir: str,
    parent_run_id: str,
    overrides: Sequence[str],
    sweeper_params: Mapping | None = None,
    *,
    figures: bool = True,
) -> Comparison:
    """Compare a sweep's finished jobs and log the comparison to its parent run (figures only with ``figures``, the
    sweep's own setting). An empty comparison when no job finished.

    ``sweeper_params``: ``hydra.sweeper.params`` (sweeps declared in an experiment file); logged to the parent as
    ``sweep.params`` so that ``owl-eval-compare --sweep`` groups the same way.
    """
    client = make_client(settings.resolved_uri(launch_dir))
    if sweeper_params is not None:
        sweeper_params = {
            str(k): [str(x) for x in v] if isinstance(v, Sequence) and not isinstance(v, str) else str(v)
            for k, v in sweeper_params.items()
        }
        if SWEEP_PARAMS_PARAM not in client.get_run(parent_run_id).data.params:
            client.log_param(parent_run_id, SWEEP_PARAMS_PARAM, json.dumps(sweeper_params, sort_keys=True)[:6000])
    unfinished = wait_for_reused_running(client, parent_run_id)
    runs, keys = sweep_selection(client, parent_run_id, overrides=list(overrides), sweeper_params=sweeper_params)
    if not runs:
        return Comparison([], unfinished=unfinished)
    comparison = load(client, runs, keys, title=f"owl-eval sweep {parent_run_id}")
    comparison = dataclasses.replace(comparison, unfinished=unfinished)
    log_to_parent(TrackedRun(client, parent_run_id), comparison, with_figures=figures)
    return comparison


def print_sweep_end(
    settings: TrackingSettings,
    launch_dir: str,
    run_id: str,
    comparison: Comparison,
    sweep_dir: Path,
    *,
    figures: bool = True,
) -> Path | None:
    """Write the comparison's files into the sweep's folder and print :func:`owl_eval.comparison.text.console_block`.
    Returns the folder's ``report.html``, or None when no job finished."""
    from owl_eval.runner.cli.summary import open_command
    from owl_eval.tracking.settings import redacted

    uri = settings.resolved_uri(launch_dir)
    if not comparison.rows:
        still = "".join(f"\n  not finished yet, running in another launch: {line}" for line in comparison.unfinished)
        print(f"no finished job to compare; sweep run: {run_id}{still}", flush=True)
        return None
    write_files(sweep_dir, comparison, with_figures=figures)
    client = make_client(uri)
    experiment_id = client.get_run(run_id).info.experiment_id
    view = shared_view_path(experiment_id, f"{VIEW_KEY_PREFIX}{run_id}")
    base = redacted(uri).rstrip("/") if uri.startswith(("http://", "https://")) else LOCAL_UI  # no password shown
    open_lines = (
        f"its runs with the headline metrics as columns: {base}/{view}\n{open_command(uri, experiment_id, run_id)}"
    )
    block = text.console_block(
        comparison.rows,
        comparison.verdicts,
        str(sweep_dir),
        run_id,
        open_lines,
        reused_line=reused_text(client, run_id),
        unfinished=comparison.unfinished,
    )
    print(block, flush=True)
    return sweep_dir / "report.html"


def reused_text(client, parent_run_id: str) -> str:
    """``reused 2 runs from 2026-11-28 04:12 ...``: the finished runs of earlier launches that this sweep counted
    instead of running their configs again (local time of their start), or "" when it reused none."""
    runs = reused_runs(client, client.get_run(parent_run_id))
    if not runs:
        return ""
    starts = sorted(r.info.start_time or 0 for r in runs)
    when = [time.strftime("%Y-%m-%d %H:%M", time.localtime(ms / 1000)) for ms in (starts[0], starts[-1])]
    span = when[0] if when[0] == when[1] else f"{when[0]} to {when[1]}"
    noun = "run" if len(runs) == 1 else "runs"
    return f"reused {len(runs)} finished {noun} from {span} (same config; tracking.skip_finished=false runs them again)"


# How long a sweep's end waits for the jobs it found running in another launch (the same sweep started twice)
WAIT_FOR_RUNNING_SECONDS = 600.0


def wait_for_reused_running(client, parent_run_id: str, *, bound: float | None = None) -> list[str]:
    """Wait (at most ``bound`` s, default :data:`WAIT_FOR_RUNNING_SECONDS`) for the runs this sweep reused while
    they were RUNNING in another launch, so that its comparison counts them; returns one line per run still not
    finished then (its job, run and owner), which the comparison names as not counted. A run whose owner has died
    is not waited for (it will never finish; the next launch marks it KILLED)."""
    from owl_eval.tracking.liveness import HOST_TAG, PID_TAG, owner_alive

    parent = client.get_run(parent_run_id)
    jobs = reused_ids(parent)
    deadline = time.monotonic() + (WAIT_FOR_RUNNING_SECONDS if bound is None else bound)
    told = False
    ids = list(jobs)
    while True:
        # one search for those of the runs still running, not a request per run nor a read of every reused run
        running = runs_by_id(client, parent.info.experiment_id, ids, status="RUNNING") if ids else []
        ids = [r.info.run_id for r in running]
        waiting = [r for r in running if owner_alive(r.data.tags)]
        if not waiting or time.monotonic() >= deadline:
            break
        if not told:
            log.warning(
                "waiting up to %.0f s for %d job(s) of this sweep running in another launch: %s",
                deadline - time.monotonic(),
                len(waiting),
                ", ".join(f"{jobs[r.info.run_id]} (run {r.info.run_id})" for r in waiting),
            )
            told = True
        time.sleep(1.0)
    return [
        f"{jobs[r.info.run_id]}: run {r.info.run_id}, process {r.data.tags.get(PID_TAG, '?')} on "
        f"{r.data.tags.get(HOST_TAG, '?')}"
        for r in running
    ]
