"""The shell lines of docs/*.md (and any non-bash shell block of the README), each run as written in a workspace
prepared as the README's lines are (tests/runner/test_readme.py), with the docs' own placeholders filled from the
workspace; the lines that cannot run here are skipped with the reason (tests/runner/test_docs.py's ``SKIP``, whose
inventory test keeps the lists true). In the integration suite (CI's ``integration/commands`` step).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.runner.test_docs import _line_id, _prepare, _run, _skip_reason, shell_lines
from tests.runner.test_readme import make_workspace


# -- shell lines of the docs --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def docs_workspace(tmp_path_factory) -> Path:
    ws = make_workspace(tmp_path_factory.mktemp("docs"))
    (ws / "outputs").mkdir()
    return ws


@pytest.mark.parametrize(("block", "line"), shell_lines(), ids=[_line_id(b, x) for b, x in shell_lines()])
def test_docs_shell_line_runs(block, line, docs_workspace, free_port):
    reason = _skip_reason(line)
    if reason:
        pytest.skip(reason)
    words, env = _prepare(line, docs_workspace)
    proc = _run(words, env, docs_workspace, free_port)
    if proc is not None and words[0] == "owl-eval-compare":
        assert "|" in proc.stdout, proc.stdout  # it printed the table
