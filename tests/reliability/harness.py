"""The reliability catalogue's harness: run the real command line on bad input and check that it fails
the way a user can trust. The command line runs in the test process through the function the console scripts
call (``tests/inprocess.py``: the same code path, without a new interpreter's start-up per case);
``OWL_EVAL_TEST_SUBPROCESS=1`` runs every case as a real ``python -m`` subprocess instead, and the cases marked
``subprocess`` always do.

Every case asserts (``assert_clean_failure``): exit code != 0; exactly one stderr line, starting
``error:``, that names what is wrong (the file / row / column or the config key the case expects); no
``Traceback`` on stdout or stderr; no MLflow run created (the store's ``runs`` table has the same rows);
no file written outside the store (every other file under the workspace, inputs included, is unchanged).
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from tests.inprocess import run_module

PROJECT_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Workspace:
    """A launch directory with a store in ``store/`` and user inputs anywhere else under ``root``."""

    root: Path
    store: Path
    in_process: bool | None = None  # False: every run_cli here is a real subprocess (the `subprocess` marker)

    @property
    def db(self) -> Path:
        return self.store / "mlflow.db"

    def overrides(self) -> list[str]:
        """Send runs (and Hydra's job folder) into the store, so anything written elsewhere is a leak."""
        return [
            f"tracking.store_dir={self.store}",
            f"hydra.run.dir={self.store}/hydra",
            f"hydra.sweep.dir={self.store}/hydra_sweep",
            "progress=false",
            "tracking.uri=null",
        ]

    def run_count(self) -> int:
        with sqlite3.connect(self.db) as con:
            return con.execute("select count(*) from runs").fetchone()[0]

    def snapshot(self) -> dict[str, tuple[int, int]]:
        """Size and mtime of every entry outside the store (links not followed)."""
        out = {}
        for folder, dirs, files in os.walk(self.root, followlinks=False):
            here = Path(folder)
            dirs[:] = [d for d in dirs if here / d != self.store]
            for name in dirs + files:
                st = os.lstat(here / name)
                out[str((here / name).relative_to(self.root))] = (st.st_size, st.st_mtime_ns)
        return out


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str
    runs_before: int
    runs_after: int
    changed_outside_store: list[str]


def run_cli(
    module: str,
    args: list[str],
    ws: Workspace,
    *,
    env: dict | None = None,
    timeout: float = 120,
    in_process: bool | None = None,
) -> CliResult:
    """``python -m <module> <args> <workspace overrides>`` launched from the workspace root: in this process,
    through the function the console scripts call (``tests/inprocess.py``), unless ``in_process`` is False or
    ``OWL_EVAL_TEST_SUBPROCESS=1`` is set (then a real ``python -m``)."""
    before = ws.snapshot()
    runs_before = ws.run_count()
    proc = run_module(
        module,
        [*_defaults_not_set_by(ws.overrides(), args), *args],
        cwd=ws.root,
        env={"MLFLOW_DISABLE_TELEMETRY": "true", "PYTHONPATH": str(PROJECT_ROOT)} | (env or {}),
        unset=("MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", "HYDRA_FULL_ERROR"),
        timeout=timeout,
        in_process=ws.in_process if in_process is None else in_process,
    )
    after = ws.snapshot()
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    return CliResult(proc.returncode, proc.stdout, proc.stderr, runs_before, ws.run_count(), changed)


def _defaults_not_set_by(defaults: list[str], args: list[str]) -> list[str]:
    """The workspace's overrides except those whose key the case sets itself (``progress=2``): the command line
    refuses one key given twice with different values."""
    given = {a.lstrip("+~").split("=", 1)[0] for a in args}
    return [d for d in defaults if d.split("=", 1)[0] not in given]


def assert_clean_failure(result: CliResult, *mentions: str) -> str:
    """The checks every catalogue case makes; ``mentions`` must all appear in the one error line.
    Returns the error line."""
    context = f"\n--- stdout ---\n{result.stdout[-3000:]}\n--- stderr ---\n{result.stderr[-3000:]}"
    assert result.returncode != 0, "expected a failure" + context
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), "expected exactly one 'error:' line on stderr" + context
    assert "Traceback" not in result.stdout and "Traceback" not in result.stderr, context
    for text in mentions:
        assert text in lines[0], f"the error line should mention {text!r}" + context
    assert result.runs_after == result.runs_before, (
        f"a run was created ({result.runs_before} -> {result.runs_after})" + context
    )
    assert not result.changed_outside_store, f"written outside the store: {result.changed_outside_store}" + context
    return lines[0]
