"""Hydra callback that gives a multirun one parent MLflow run, with a nested child run per job.

on_multirun_start creates the parent and hands its id to the jobs (environment variable, inherited by
joblib/loky and submitit workers and a Ray cluster the launcher starts; jobs on an existing Ray cluster or
elsewhere find it by the sweep-dir tag). on_job_end marks the parent FAILED when a job failed (the basic
sweeper skips on_multirun_end then); on_multirun_end logs the comparison of the jobs over seeds
(``owl_eval.comparison``) to the parent and ends it FINISHED. Hydra turns callback exceptions into warnings, so
the logic lives in plain functions that tests call directly. When the launcher itself dies mid-sweep,
``abort_open_sweep`` (called by the CLI) ends the parent FAILED; if even that never runs (kill -9), the
next launch into the store ends it KILLED (``owl_eval.tracking.liveness``).
"""

from __future__ import annotations

import contextlib
import logging
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from owl_eval.comparison.grouping import swept_keys
from owl_eval.comparison.sweep_end import compare_sweep, print_sweep_end
from owl_eval.errors import ConfigError, LaunchAborted
from owl_eval.runner.config.resolvers import register_resolvers
from owl_eval.runner.config.sweep_context import hand_to_jobs, handed_parent, sweep_folder, withdraw
from owl_eval.tracking.settings import TrackingSettings
from owl_eval.tracking.sweep_parent import end_sweep_parent, find_sweep_parent, mark_parent, start_sweep_parent

try:
    from hydra.experimental.callback import Callback
except ImportError:  # pragma: no cover
    Callback = object  # type: ignore[misc,assignment]  # a fallback base class for a Hydra without callbacks

log = logging.getLogger(__name__)

# Launchers pickle the Hydra context (holding this callback) into their workers, so importing this module
# there registers ${owl_eval.unique:} before a worker resolves its job directory.
register_resolvers()

# The sweep parent this process opened (on_multirun_start) and has not closed yet: abort_open_sweep's target.
_open_sweep: dict[str, Any] = {}


def _settings(config: DictConfig) -> TrackingSettings:
    return TrackingSettings.from_config(OmegaConf.to_container(config.tracking, resolve=True))


def abort_open_sweep(reason: str, status: str = "FAILED", *, delete_if_empty: bool = False) -> None:
    """End the sweep parent this process opened, when the launcher itself crashed (a killed joblib worker
    raises TerminatedWorkerError in the launching process, and Hydra never calls on_multirun_end): tag
    ``error`` = ``reason``, status FAILED (or ``status``, e.g. KILLED for Ctrl-C). A no-op when this process
    has no open sweep; calling it twice does nothing more. ``delete_if_empty``: a sweep stopped by a config
    or input error before any job created a run leaves no run at all (the parent is deleted)."""
    if not _open_sweep:
        return
    sweep = dict(_open_sweep)
    _open_sweep.clear()
    withdraw()
    _finish_stand_ins()
    from owl_eval.runner.config.error_files import note_sweep_folder, noted_sweep_folder

    launched = noted_sweep_folder()
    if launched:  # its jobs (which scrub it) may never have run on this file system
        from owl_eval.tracking.redaction import scrub_file

        scrub_file(Path(launched) / "multirun.yaml")
    note_sweep_folder(None)
    try:
        end_sweep_parent(
            sweep["settings"],
            sweep["launch_dir"],
            sweep["run_id"],
            reason,
            status=status,
            delete_if_empty=delete_if_empty,
        )
    except Exception as exc:  # noqa: BLE001 - already failing; the next launch's reaper is the fallback
        log.warning("could not end sweep parent run %s: %s", sweep["run_id"], exc)


def hide_secrets(config: DictConfig, *, files: bool = True) -> None:
    """Keep the secrets of tracking URIs (``tracking.uri``, the command line's overrides) out of what Hydra writes:
    its log handlers (the console, the job's ``<job name>.log``) scrub every line from now on, and, with ``files``,
    the files Hydra wrote before calling the job (``.hydra/config.yaml``, ``hydra.yaml``, ``overrides.yaml``, a
    sweep's ``multirun.yaml``) are rewritten without them (:mod:`owl_eval.tracking.redaction`). Never fails a job."""
    from owl_eval.tracking.redaction import remember, remember_configured, scrub_file, scrub_logging

    try:
        remember_configured([str(o) for o in OmegaConf.select(config, "hydra.overrides.task", default=None) or []])
        with_uri = OmegaConf.select(config, "tracking.uri", default=None, throw_on_resolution_failure=False)
        remember(str(with_uri) if with_uri else None)
        scrub_logging()
        if not files:
            return
        for path in _hydra_files(config):
            scrub_file(path)
    except Exception as exc:  # noqa: BLE001 - Hydra would turn it into a warning; the job goes on
        log.debug("could not scrub the files Hydra wrote: %s", exc)


def _hydra_files(config: DictConfig) -> list[Path]:
    """The files Hydra writes for a job or a sweep: the job's ``<output dir>/.hydra/*.yaml`` (when this is a job),
    the sweep's ``multirun.yaml`` (in a sweep)."""
    found: list[Path] = []
    if str(OmegaConf.select(config, "hydra.mode", default="")) == "RunMode.MULTIRUN":
        with contextlib.suppress(OmegaConfBaseException):
            found.append(Path(sweep_folder(config.hydra)) / "multirun.yaml")
    with contextlib.suppress(OmegaConfBaseException):
        subdir = OmegaConf.select(config, "hydra.output_subdir", default=None)
        output_dir = OmegaConf.select(config, "hydra.runtime.output_dir", default=None)
        if subdir is not None and output_dir:
            found += Path(str(output_dir), str(subdir)).glob("*.yaml")
    return found


def _finish_stand_ins() -> None:
    """Wait for the stand-ins of the jobs owl-eval's sweeper reused (:mod:`owl_eval.runner.sweeps.reuse_first`)."""
    from owl_eval.runner.sweeps.reuse_first import finish_stand_ins

    finish_stand_ins()


class MlflowSweepCallback(Callback):
    def _parent(self, config: DictConfig) -> tuple[TrackingSettings, str, str | None]:
        settings = _settings(config)
        launch_dir = str(config.hydra.runtime.cwd)
        run_id = find_sweep_parent(settings, launch_dir, sweep_folder(config.hydra), handed=handed_parent())
        return settings, launch_dir, run_id

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        from owl_eval.runner.process.short_tmp import fit_socket_paths

        fit_socket_paths()  # the launcher's sockets (a local Ray cluster, a forkserver) fit, whatever $TMPDIR is
        hide_secrets(config, files=False)  # the launcher's "#0 : <overrides>" lines come next
        try:
            settings = _settings(config)
            settings.check_writable(str(config.hydra.runtime.cwd))  # a read-only store: before the parent run
        except ValueError as exc:  # a bad tracking.* value: stop the sweep with one error, not 2 x N warnings
            raise LaunchAborted(exc) from exc
        from owl_eval.runner.config.groups import unknown_sweep_choice

        searchpath = OmegaConf.select(config, "hydra.searchpath") or []
        problem = unknown_sweep_choice(list(config.hydra.overrides.task), list(searchpath))
        if problem:  # before the parent run exists: a typo in a swept option leaves nothing in the store
            raise LaunchAborted(ConfigError(problem))
        try:
            sweep_dir = sweep_folder(config.hydra)
        except OmegaConfBaseException as exc:  # e.g. experiment_name=../.. refused by ${owl_eval.folder:}
            raise LaunchAborted(exc) from exc
        try:
            run_id = start_sweep_parent(
                settings,
                str(config.hydra.runtime.cwd),
                sweep_dir,
                experiment=str(config.get("experiment_name", "")),
                overrides=list(config.hydra.overrides.task),
            )
        except ValueError as exc:  # e.g. no server answers at the tracking URI: one error, no job started
            raise LaunchAborted(exc) from exc
        params = OmegaConf.select(config, "hydra.sweeper.params")
        swept = swept_keys(
            list(OmegaConf.select(config, "hydra.overrides.task") or []),
            cast(dict, OmegaConf.to_container(params, resolve=True)) if params else {},  # a DictConfig
        )
        hand_to_jobs(run_id, swept)
        _open_sweep.update(settings=settings, launch_dir=str(config.hydra.runtime.cwd), run_id=run_id)
        from owl_eval.runner.config.error_files import note_sweep_folder

        note_sweep_folder(sweep_dir)  # where a traceback of the launcher's own goes (error_files.save_traceback)
        log.info("MLflow sweep parent run %s", run_id)

    def on_job_start(self, config: DictConfig, **kwargs: Any) -> None:
        hide_secrets(config)  # Hydra has configured the job's logging and written its .hydra files

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        from hydra.core.utils import JobStatus

        if job_return.status != JobStatus.FAILED:
            return
        settings, launch_dir, run_id = self._parent(config)
        if run_id:
            try:
                mark_parent(settings, launch_dir, run_id, "FAILED")
            except Exception as exc:  # noqa: BLE001 - the store is gone (a lost server): the job's own error says so
                log.warning("could not mark sweep parent run %s FAILED: %s", run_id, exc)

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        hide_secrets(config)  # multirun.yaml again, should no job have run in this process
        settings, launch_dir, run_id = self._parent(config)
        try:
            if run_id:
                self._compare_and_end(config, settings, launch_dir, run_id)
        finally:
            _finish_stand_ins()
            withdraw()
            _open_sweep.clear()
            from owl_eval.runner.config.error_files import note_sweep_folder

            note_sweep_folder(None)
            from owl_eval.runner.process.sweep_processes import stop_sweep_processes

            stop_sweep_processes()  # no worker of the launcher outlives the command

    def _compare_and_end(self, config: DictConfig, settings: TrackingSettings, launch_dir: str, run_id: str) -> None:
        """Compare the sweep's jobs into its parent run, then end the parent FINISHED. A full disk on the way stops
        the command with one error (:class:`LaunchAborted`: Hydra would turn any other exception from a callback
        into a warning and exit 0) saying how to make the comparison again, the parent ended FAILED if it can be."""
        from owl_eval.tracking.faults import disk_full

        try:
            try:
                params = config.hydra.sweeper.get("params")
                figures = bool(config.get("figures", True))
                comparison = compare_sweep(
                    settings,
                    launch_dir,
                    run_id,
                    list(config.hydra.overrides.task),
                    sweeper_params=cast(dict, OmegaConf.to_container(params, resolve=True)) if params else {},
                    figures=figures,
                )
                print_sweep_end(
                    settings, launch_dir, run_id, comparison, Path(sweep_folder(config.hydra)), figures=figures
                )
            except Exception as exc:  # the comparison is a bonus; never lose the sweep's status over it
                if disk_full(exc):
                    raise
                log.exception(
                    "comparison of sweep %s failed; `owl-eval-compare --sweep %s` retries it",
                    run_id,
                    run_id,
                )
            _finish_stand_ins()
            mark_parent(settings, launch_dir, run_id, "FINISHED")
        except Exception as exc:
            if not disk_full(exc):
                raise
            raise LaunchAborted(
                _comparison_lost(exc, settings, launch_dir, run_id, sweep_folder(config.hydra))
            ) from exc


def _comparison_lost(exc: BaseException, settings: TrackingSettings, launch_dir: str, run_id: str, sweep_dir: str):
    """The error of a sweep whose end met a full disk (``exc``): which store, the space free, the command that
    makes the comparison again once there is room, and the parent run ended FAILED (or why it could not be). The
    traceback goes to the log files only."""
    from owl_eval.runner.config.error_files import log_to_files
    from owl_eval.tracking.faults import StoreFull, full_disk_message
    from owl_eval.tracking.settings import sqlite_path
    from owl_eval.tracking.store import store_name

    uri = settings.resolved_uri(launch_dir)
    log_to_files(f"the end of sweep {run_id} met a full disk: {exc}", exc)
    where = f"--store-dir {sqlite_path(uri).parent}" if uri.startswith("sqlite:///") else "--uri <tracking.uri>"
    message = (
        f"{full_disk_message(exc, store_name(uri))}; the sweep's comparison was not made: once there is room, "
        f"`owl-eval-compare --sweep {run_id} --out {sweep_dir} {where}` makes it"
    )
    try:
        mark_parent(settings, launch_dir, run_id, "FAILED")
        message += f"; sweep parent run {run_id} ended FAILED"
    except Exception as again:  # noqa: BLE001 - the disk is still full: say so, the next launch ends the run
        log.debug("sweep parent run %s could not be marked FAILED: %s", run_id, again)
        message += f"; sweep parent run {run_id} could not be marked FAILED: the next launch on this host ends it"
    return StoreFull(message)
