"""Socket paths that fit, whatever the temp folder.

A Unix socket's path holds at most 107 bytes on Linux (103 on macOS). Two libraries a sweep uses put their
sockets under the temp folder (``$TMPDIR``), which a CI system, a long user name or a test runner can make long:

- ``multiprocessing`` (a forkserver, as Python 3.14 starts by default on Linux, or a ``Manager``):
  ``<tmp>/pymp-XXXXXXXX/listener-XXXXXXXX``, in its process-wide temp folder (``multiprocessing.util.get_temp_dir``);
- Ray, when the launcher starts a local cluster: ``<tmp>/ray/session_<date>_<time>_<pid>/sockets/plasma_store``.

With a temp folder too long for them, binding fails (``OSError: AF_UNIX path too long``). :func:`fit_socket_paths`
then gives each a private folder (mode 0700, made by ``tempfile.mkdtemp``) under the first short, writable system
temp folder (``/tmp``, ``/var/tmp``, ``/dev/shm``); everything else stays in the user's temp folder. A
``RAY_TMPDIR`` the user set is kept. The folders go when the process exits (multiprocessing's own exit finalizer;
an ``atexit`` function for Ray's, which runs after Ray's own shutdown as it was registered before ``ray.init``).
"""

from __future__ import annotations

import atexit
import importlib
import os
import shutil
import sys
import tempfile
from typing import Any

SUN_PATH_MAX = 103 if sys.platform == "darwin" else 107  # bytes of a socket path, its final NUL excluded
# what each library appends to its temp folder (a 7-digit pid in Ray's session name)
MULTIPROCESSING_SUFFIX = len("/pymp-xxxxxxxx/listener-xxxxxxxx")
RAY_SUFFIX = len("/ray/session_2026-01-01_00-00-00_000000_1234567/sockets/plasma_store")
SHORT_BASES = ("/tmp", "/var/tmp", "/dev/shm")


def fits(folder: str, suffix: int) -> bool:
    """Whether a socket path of ``suffix`` bytes under ``folder`` fits."""
    return len(os.fsencode(folder)) + suffix <= SUN_PATH_MAX


def short_base(suffix: int) -> str | None:
    """The first system temp folder that is writable and short enough for ``suffix``, or None."""
    for base in SHORT_BASES:
        if (
            os.path.isdir(base)
            and os.access(base, os.W_OK | os.X_OK)
            and fits(base, suffix + len("/owl-eval-xxxxxxxx"))
        ):
            return base
    return None


def fit_socket_paths() -> None:
    """Give multiprocessing and Ray a short temp folder when the current one is too long for their sockets."""
    _fit_multiprocessing()
    _fit_ray()


def _fit_multiprocessing() -> None:
    """Point multiprocessing's process-wide temp folder at a short one; forked children (the job's process,
    loky's workers) inherit it."""
    process: Any = importlib.import_module("multiprocessing.process")  # its _config: untyped on purpose
    util: Any = importlib.import_module("multiprocessing.util")
    config = process.current_process()._config
    current = config.get("tempdir")
    if fits(current or tempfile.gettempdir(), MULTIPROCESSING_SUFFIX - (len("/pymp-xxxxxxxx") if current else 0)):
        return
    base = short_base(MULTIPROCESSING_SUFFIX)
    if base is None:
        return
    config.pop("tempdir", None)  # an earlier, too long one is still removed by its own exit finalizer
    saved = tempfile.tempdir
    tempfile.tempdir = base
    try:
        util.get_temp_dir()  # makes <base>/pymp-XXXXXXXX (0700) and its exit finalizer, as multiprocessing does
    finally:
        tempfile.tempdir = saved


def _fit_ray() -> None:
    """Set ``RAY_TMPDIR`` to a private short folder when Ray's default temp folder is too long."""
    if "RAY_TMPDIR" in os.environ:
        return
    default = os.environ.get("TMPDIR", "/tmp") if sys.platform.startswith("linux") else tempfile.gettempdir()
    if fits(default, RAY_SUFFIX):
        return
    base = short_base(RAY_SUFFIX)
    if base is None:
        return
    folder = tempfile.mkdtemp(prefix="owl-eval-", dir=base)
    atexit.register(shutil.rmtree, folder, True)
    os.environ["RAY_TMPDIR"] = folder
