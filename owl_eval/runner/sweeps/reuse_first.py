"""A resumed sweep launches only the jobs left: owl-eval's sweeper (``hydra/sweeper=owl_eval``, the default of
owl-eval's config: :mod:`hydra_plugins.owl_eval_sweeper`) is Hydra's basic sweeper whose launcher is wrapped in
:class:`LaunchLeft`.

Before a batch is launched, one search of the store finds its FINISHED job runs
(:func:`owl_eval.tracking.reuse.finished_by_hash`), and each job's config hash is computed from the config Hydra
composed to validate it and the data its domain reads (each distinct domain built once:
:func:`owl_eval.runner.job.planned.planned_hash`). The jobs found are taken as a job would take them (logged, noted
on the sweep's parent, a stand-in run under it, created while the sweep goes on: :func:`finish_stand_ins` waits for
them at its end), without starting a worker; the others are launched together, in one call of the launcher, each
keeping its number in the sweep (its folder and run name) through ``hydra.job.env_set.OWL_EVAL_JOB_NUM``. A job
whose hash cannot be known before it runs, a run still in flight elsewhere and the race of two launches are left to
the job itself (:mod:`owl_eval.tracking.reuse`), as under any other sweeper.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig

from owl_eval.runner.config.sweep_context import JOB_NUM_ENV, handed_parent, handed_swept_keys, sweep_folder
from owl_eval.runner.job.naming import job_run_name
from owl_eval.runner.job.planned import DomainInputs, JobIdentity, job_identity, planned_hash
from owl_eval.tracking.redaction import redacted_override
from owl_eval.tracking.reuse import (
    Reuse,
    finished_by_hash,
    note_reused,
    show_stand_ins,
    skip_enabled,
    skipped_line,
)
from owl_eval.tracking.settings import TrackingSettings
from owl_eval.tracking.store import make_client
from owl_eval.tracking.sweep_parent import find_sweep_parent

log = logging.getLogger(__name__)


@dataclass
class KnownJob:
    """A job of the batch whose identity is known before launching."""

    position: int  # in the batch
    overrides: tuple[str, ...]
    settings: TrackingSettings
    identity: JobIdentity


class LaunchLeft:
    """Hydra's launcher, launching only the jobs of a batch that have no FINISHED run yet (see the module)."""

    def __init__(self, launcher: Any, config: DictConfig) -> None:
        self.launcher = launcher
        self.config = config  # the sweep's config
        # the batch's task configs, as the sweeper composed them to validate it (owl_eval.runner.sweeps.compose)
        self.composed: list[dict[str, Any]] = []
        self.domains: DomainInputs = {}

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[Any]:
        reused = self._reused(job_overrides, initial_job_idx)
        if not reused:
            return self.launcher.launch(job_overrides, initial_job_idx=initial_job_idx)
        left = [i for i in range(len(job_overrides)) if i not in reused]
        launched: Sequence[Any] = []
        if left:
            numbered = [[*job_overrides[i], f"++hydra.job.env_set.{JOB_NUM_ENV}={initial_job_idx + i}"] for i in left]
            launched = self.launcher.launch(numbered, initial_job_idx=initial_job_idx + left[0])
        results = dict(zip(left, launched, strict=True)) | reused
        return [results[i] for i in range(len(job_overrides))]

    def _reused(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> dict[int, Any]:
        """The job returns of the batch's jobs already FINISHED, by position; {} when none is, or when that cannot
        be told here (then every job checks for itself)."""
        composed, self.composed = self.composed, []
        if len(composed) != len(job_overrides):
            return {}
        try:
            known = self._known(job_overrides, composed)
        except Exception as exc:  # noqa: BLE001 - the jobs are launched and each looks for its finished run
            log.warning(
                "finished jobs not looked up before launching (%s: %s): each job checks", type(exc).__name__, exc
            )
            return {}
        return self._take_finished(known, initial_job_idx)

    def _known(self, job_overrides: Sequence[Sequence[str]], composed: list[dict[str, Any]]) -> list[KnownJob]:
        known = []
        for position, (overrides, task) in enumerate(zip(job_overrides, composed, strict=True)):
            identity = job_identity(task)
            if identity is None:
                continue
            settings = TrackingSettings.from_config(identity.tracking)
            if skip_enabled(settings, multirun=True):
                known.append(KnownJob(position, tuple(str(o) for o in overrides), settings, identity))
        return known

    def _take_finished(self, known: list[KnownJob], initial_job_idx: int) -> dict[int, Any]:
        """Per store: its finished job runs (one search); only where there are any, the jobs' hashes (their domains
        built) and the reuse of those found."""
        launch_dir = str(self.config.hydra.runtime.cwd)
        stores: dict[tuple[str, str], list[KnownJob]] = {}
        for job in known:
            stores.setdefault((job.settings.resolved_uri(launch_dir), job.settings.experiment_name), []).append(job)
        reused: dict[int, Any] = {}
        for jobs in stores.values():
            try:
                reused |= self._take_finished_in(jobs, launch_dir, initial_job_idx)
            except Exception as exc:  # noqa: BLE001 - this store's jobs are launched and each looks for itself
                log.warning(
                    "finished jobs not looked up before launching (%s: %s): each job checks", type(exc).__name__, exc
                )
        return reused

    def _take_finished_in(self, jobs: list[KnownJob], launch_dir: str, initial_job_idx: int) -> dict[int, Any]:
        """The jobs of one store that it has FINISHED runs of, reused (nothing is written before they are known)."""
        settings = jobs[0].settings
        found = finished_by_hash(settings, launch_dir)
        if not found:
            return {}
        taken = []
        for job in jobs:
            digest = planned_hash(job.identity, self.domains)
            if digest is not None and digest in found:
                taken.append((job, digest, found[digest]))
        return self._reuse(settings, taken, initial_job_idx)

    def _reuse(
        self, settings: TrackingSettings, taken: list[tuple[KnownJob, str, Any]], initial_job_idx: int
    ) -> dict[int, Any]:
        """The jobs of ``taken`` (job, its hash, the run that has it) taken by their runs: logged, noted on the sweep's
        parent, their stand-ins created meanwhile; their job returns by position."""
        if not taken:
            return {}
        launch_dir = str(self.config.hydra.runtime.cwd)
        swept = handed_swept_keys()
        reuses = []
        for job, digest, run in taken:
            label = " ".join(redacted_override(o) for o in job.overrides)
            tags = run.data.tags
            number = initial_job_idx + job.position
            name = job_run_name(
                agent=tags.get("agent", "agent"),
                seed=tags.get("seed", "?"),
                condition=tags.get("condition"),
                job_num=number,
                task_overrides=job.overrides,
                swept=swept,
            )
            log.info("\t#%d : %s", number, skipped_line(run, digest, label))
            reuses.append(Reuse(run, label, name))
        client = make_client(settings.resolved_uri(launch_dir))
        parent = find_sweep_parent(settings, launch_dir, sweep_folder(self.config.hydra), handed=handed_parent())
        note_reused(client, reuses, parent_run_id=parent)
        _stand_ins_meanwhile(client, reuses, parent)
        return {job.position: _completed(job.overrides, dict(run.data.metrics)) for job, _, run in taken}


# The threads creating the stand-in runs of a sweep's reused jobs, while the sweep goes on (its left jobs, its
# comparison, which counts the reused runs by the parent's notes, not by their stand-ins).
_stand_ins: list[threading.Thread] = []


def _stand_ins_meanwhile(client: Any, reuses: list[Reuse], parent_run_id: str | None) -> None:
    """Create the stand-ins in a thread: a tracking server takes three requests for each, waited for meanwhile (a
    SQL store, one transaction for all: ~0.1 s)."""

    def create() -> None:
        try:
            show_stand_ins(client, reuses, parent_run_id=parent_run_id)
        except Exception as exc:  # noqa: BLE001 - the comparison counts the reused runs anyway
            log.warning(
                "the reused runs are not all shown under the sweep's parent run: %s: %s", type(exc).__name__, exc
            )

    thread = threading.Thread(target=create, name="owl-eval-stand-ins")
    thread.start()
    _stand_ins.append(thread)


def finish_stand_ins() -> None:
    """Wait for the stand-in runs still being created (the sweep's end, before its parent run is ended)."""
    while _stand_ins:
        _stand_ins.pop().join()


def _completed(overrides: Sequence[str], metrics: dict[str, float]) -> Any:
    """What a launcher returns for a job that completed with ``metrics``."""
    from hydra.core.utils import JobReturn, JobStatus

    return JobReturn(overrides=list(overrides), status=JobStatus.COMPLETED, _return_value=metrics)
