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


def _inputs_of_earlier_lines(block, line: str, ws: Path, free_port) -> None:
    """A line that reads a folder an earlier line of its block writes (``-d rescore/`` then
    ``source.path=rescore/record``) finds it in this worker's workspace: the earlier lines run first when it is
    missing (pytest-xdist may have run them in another worker's workspace, or not yet)."""
    earlier = [x for b, x in shell_lines() if b.id == block.id]
    earlier = earlier[: earlier.index(line)]
    wanted = {value.split("/", 1)[0] for word in line.split() for value in [word.partition("=")[2]] if "/" in value}
    if any(not (ws / w).exists() and any(f"{w}/" in e for e in earlier) for w in wanted if w):
        for previous in earlier:
            if not _skip_reason(previous):
                words, env = _prepare(previous, ws)
                _run(words, env, ws, free_port)


@pytest.mark.parametrize(("block", "line"), shell_lines(), ids=[_line_id(b, x) for b, x in shell_lines()])
def test_docs_shell_line_runs(block, line, docs_workspace, free_port):
    reason = _skip_reason(line)
    if reason:
        pytest.skip(reason)
    _inputs_of_earlier_lines(block, line, docs_workspace, free_port)
    words, env = _prepare(line, docs_workspace)
    proc = _run(words, env, docs_workspace, free_port)
    if proc is not None and words[0] == "owl-eval-compare":
        assert "|" in proc.stdout, proc.stdout  # it printed the table
