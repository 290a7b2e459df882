"""What a job of a sweep knows of its sweep: the parent run's id and the keys the sweep varies.

The sweep callback (:mod:`owl_eval.runner.sweeps.callbacks`) computes both once, when the sweep starts, in the
launching process; its jobs may run in other processes (joblib's workers, a Ray cluster, Slurm), and the one
channel every launcher carries to them is the environment. The callback writes it (:func:`hand_to_jobs`); a job
reads it once, in its config step (:func:`sweep_context`), and passes the values on.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

PARENT_RUN_ENV = "OWL_EVAL_PARENT_RUN_ID"
SWEPT_KEYS_ENV = "OWL_EVAL_SWEPT_KEYS"  # comma-separated
# A job's number in its sweep where the launcher numbers it otherwise: a resumed sweep launches only the jobs left
# (owl_eval.runner.sweeps.reuse_first), each with ``hydra.job.env_set.OWL_EVAL_JOB_NUM=<its number>``.
JOB_NUM_ENV = "OWL_EVAL_JOB_NUM"


@dataclass(frozen=True)
class SweepContext:
    """A job of a sweep: its number, its own overrides, where the sweep writes, and what the sweep's start handed on
    (the parent run's id, or None for a job on a launcher the environment did not reach: the parent is then found
    by its sweep-folder tag; the keys the sweep varies, which the job's run name shows)."""

    job_num: int
    task_overrides: tuple[str, ...]
    sweep_dir: str
    parent_run_id: str | None
    swept_keys: tuple[str, ...]


def hand_to_jobs(parent_run_id: str, swept_keys: list[str]) -> None:
    """Hand the sweep's parent run and swept keys to its jobs (called once, when the sweep starts)."""
    os.environ[PARENT_RUN_ENV] = parent_run_id
    os.environ[SWEPT_KEYS_ENV] = ",".join(swept_keys)


def withdraw() -> None:
    """The sweep is over: later jobs of this process belong to no sweep."""
    os.environ.pop(PARENT_RUN_ENV, None)
    os.environ.pop(SWEPT_KEYS_ENV, None)


def handed_parent() -> str | None:
    """The parent run id the sweep's start handed on, or None."""
    return os.environ.get(PARENT_RUN_ENV) or None


def handed_swept_keys() -> tuple[str, ...]:
    """The keys the sweep varies, as its start handed them on."""
    return tuple(k for k in os.environ.get(SWEPT_KEYS_ENV, "").split(",") if k)


def sweep_folder(hydra: Any) -> str:
    """The sweep's folder (``hydra.sweep.dir`` of Hydra's node ``hydra``), absolute: what its jobs, its parent run's
    tag and its comparison files are found by."""
    from pathlib import Path

    return str(Path(str(hydra.sweep.dir)).resolve())


def job_number(hc: Any) -> int:
    """The job's number in its sweep: the one the sweeper gave it (:data:`JOB_NUM_ENV`), else the launcher's."""
    given = (hc.job.get("env_set") or {}).get(JOB_NUM_ENV)
    return int(given) if given is not None else int(hc.job.num)


def sweep_context(hc: Any) -> SweepContext | None:
    """The sweep of the job Hydra is running (``hc``: its runtime config, None outside Hydra), or None for a single
    run."""
    from owl_eval.runner.config.hydra_runtime import is_multirun

    if not is_multirun(hc):
        return None
    return SweepContext(
        job_num=job_number(hc),
        task_overrides=tuple(str(o) for o in hc.overrides.task),
        sweep_dir=sweep_folder(hc),
        parent_run_id=handed_parent(),
        swept_keys=handed_swept_keys(),
    )
