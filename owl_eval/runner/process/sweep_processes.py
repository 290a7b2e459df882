"""The worker processes a launcher keeps after its sweep: stopped when the sweep ends, before the command returns.

Two launchers keep workers alive past their last job, for reuse by a next sweep that a command line never runs:

- ``hydra/launcher=joblib``: loky's reusable executor keeps its idle workers for 300 s (its ``idle_worker_timeout``)
  and stops them only from an exit handler of the interpreter;
- ``hydra/launcher=ray`` without ``ray.init.address``: ``ray.init()`` starts a local Ray cluster (GCS, raylet,
  workers) that stops when the driver disconnects.

:func:`stop_sweep_processes` ends both explicitly when the sweep ends (``on_multirun_end``), so no process of the
sweep outlives the command however the interpreter is then torn down. It never imports Ray or joblib: a launcher
that was not used has not imported them. A Ray cluster the sweep only joined (``hydra.launcher.ray.init.address``)
is left running: ``ray.shutdown()`` stops the processes of a cluster this driver started and only disconnects
from one it joined.
"""

from __future__ import annotations

import logging
import sys

log = logging.getLogger(__name__)


def stop_sweep_processes() -> None:
    """Stop loky's idle workers and disconnect from Ray (stopping a local cluster this process started)."""
    _stop_loky_workers()
    _stop_local_ray()


def _stop_loky_workers() -> None:
    """Shut loky's reusable executor down, waiting for its workers to exit."""
    module = sys.modules.get("joblib.externals.loky.reusable_executor")
    executor = getattr(module, "_executor", None) if module is not None else None
    if executor is None:
        return
    try:
        executor.shutdown(wait=True)
    except Exception as exc:  # noqa: BLE001 - the sweep's results are in; the interpreter's exit handler remains
        log.warning("could not stop joblib's worker processes: %s", exc)


def _stop_local_ray() -> None:
    """``ray.shutdown()`` when this process is connected to Ray."""
    ray = sys.modules.get("ray")
    if ray is None or not getattr(ray, "is_initialized", lambda: False)():
        return
    try:
        ray.shutdown()
    except Exception as exc:  # noqa: BLE001 - as above: Ray's own exit handler remains
        log.warning("could not stop the Ray processes of this sweep: %s", exc)
