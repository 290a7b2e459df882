"""The shell lines of docs/*.md (and any non-bash shell block of the README), each run as written in a workspace
prepared as the README's lines are (tests/runner/test_readme.py), with the docs' own placeholders filled from the
workspace; the lines that cannot run here are skipped with the reason (tests/runner/test_docs.py's ``SKIP``, whose
inventory test keeps the lists true). In the integration suite (CI's ``integration/commands`` step).
"""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from tests.runner.test_docs import PROJECT_ROOT, Block, _skip_reason, shell_lines
from tests.runner.test_readme import OND_SMALL, _environment, _prepared, _serves_health, make_workspace, run_line


# -- shell lines of the docs --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def docs_workspace(tmp_path_factory) -> Path:
    ws = make_workspace(tmp_path_factory.mktemp("docs"))
    (ws / "outputs").mkdir()
    return ws


def _sweep_parent(ws: Path) -> str:
    """A sweep parent run of the workspace store (one small sweep is run when there is none)."""
    from mlflow.tracking import MlflowClient

    store = ws / "outputs" / "mlflow.db"
    if store.exists():
        client = MlflowClient(tracking_uri=f"sqlite:///{store}")
        ids = [e.experiment_id for e in client.search_experiments()]
        parents = client.search_runs(ids, filter_string="tags.`owl_eval.kind` = 'sweep'") if ids else []
        if parents:
            return parents[0].info.run_id
    words = ["python", "-m", "owl_eval", "-m", "+experiment=ond_system_detection", "seed=0,1", *OND_SMALL]
    proc = run_line([*words, "progress=false", "figures=false"], ws, _environment(ws))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return _sweep_parent(ws)


def _filled(line: str, ws: Path) -> str:
    """The docs' own placeholders, filled from the workspace."""
    if "<parent run id>" in line:
        line = line.replace("<parent run id>", _sweep_parent(ws))
    return line


def _line_id(block: Block, line: str) -> str:
    return f"{block.id}:" + re.sub(r"[^\w=+./,-]+", "_", line.split(" #")[0])[:60]


def _prepare(line: str, ws: Path) -> tuple[list[str], dict]:
    """As test_readme.py prepares a README line; a compare of one sweep (``--sweep``) needs no inputs."""
    line = _filled(line, ws)
    if "--sweep" in line:
        return shlex.split(line, comments=True), _environment(ws)
    return _prepared(line, ws)


def _run(words: list[str], env: dict, ws: Path, free_port) -> subprocess.CompletedProcess | None:
    if words[:2] == ["mlflow", "ui"]:
        _serves_health(words, env, ws, free_port)
        return None
    cwd = ws
    if "pytest" in words[:3]:  # the suite does not run itself: the line's tests are collected
        # -n 0: collected in one process (pyproject's addopts would start pytest-xdist workers to collect)
        words, cwd = [*words, "--collect-only", "-q", "-n", "0"], PROJECT_ROOT
    proc = run_line(words, cwd, env)
    assert proc.returncode == 0, f"{shlex.join(words)}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc


@pytest.mark.parametrize(("block", "line"), shell_lines(), ids=[_line_id(b, x) for b, x in shell_lines()])
def test_docs_shell_line_runs(block, line, docs_workspace, free_port):
    reason = _skip_reason(line)
    if reason:
        pytest.skip(reason)
    words, env = _prepare(line, docs_workspace)
    proc = _run(words, env, docs_workspace, free_port)
    if proc is not None and words[0] == "owl-eval-compare":
        assert "|" in proc.stdout, proc.stdout  # it printed the table
