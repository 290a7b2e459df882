"""The README's shell lines, each run as written in a workspace of its own (``outputs/mlflow.db`` there), with small
sizes appended (tests/runner/test_readme.py's ``SMALL``, its inputs written first: ``INPUTS``); the custom agent's
line in a new interpreter (``python -m`` puts the working folder on the import path); the record download and
re-scoring lines in turn. In the integration suite (CI's ``integration/commands`` step): the commands take minutes
in all; ``tests/runner/test_readme.py`` keeps the checks that every line is taken and the tables still match.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.runner.test_readme import (
    README,
    _bash_line,
    _blocks,
    _environment,
    _line_id,
    _prepared,
    _run_with_record,
    bash_lines,
    lines_run_here,
    make_workspace,
    run_line,
)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    return make_workspace(tmp_path_factory.mktemp("readme"))


@pytest.mark.parametrize("line", lines_run_here(bash_lines()), ids=_line_id)
def test_readme_line_runs(line, workspace):
    words, env = _prepared(line, workspace)
    proc = run_line(words, workspace, env)
    assert proc.returncode == 0, f"{shlex.join(words)}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]


def test_readme_custom_agent_command_runs_and_detects_novelty(tmp_path):
    """The README's agent, saved as my_agents.py, run with the README's own command line: it finishes and
    detects the change in every novel trial (M2 = 100 %), as the README says."""
    from mlflow.tracking import MlflowClient

    (tmp_path / "my_agents.py").write_text(next(b for b in _blocks("python") if "class NearestMeanAgent" in b))
    words = shlex.split(_bash_line("+agent._target_=my_agents.NearestMeanAgent"), comments=True)
    assert words[:3] == ["python", "-m", "owl_eval"]
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID")}
    env["PYTHONPATH"] = str(README.parent)
    proc = subprocess.run(
        [sys.executable, *words[1:], f"tracking.store_dir={tmp_path / 'store'}", "figures=false", "progress=false"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.info.status == "FINISHED"
    assert run.data.metrics["m2_cdt_pct"] == 100.0 and run.data.metrics["top1"] > 0.5


def test_readme_artifact_download_line_fetches_the_record_and_leaves_no_stray_store(tmp_path):
    from mlflow.tracking import MlflowClient

    (tmp_path / "outputs").mkdir()
    run_id = _run_with_record(tmp_path)
    line = _bash_line("mlflow artifacts download").replace("<run_id>", run_id)
    env = _environment(tmp_path)
    proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "downloaded" / "record" / "ond_record.npz").is_file()
    assert not (tmp_path / "mlflow.db").exists()
    # ... and the README's next line re-scores the downloaded record at another threshold.
    rescore = _bash_line("source.path=downloaded/record").split(" #")[0]
    proc = run_line([*shlex.split(rescore, comments=True), "progress=false"], tmp_path, env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert [r.data.params.get("metrics.threshold") for r in runs if r.data.tags.get("source") == "record"] == ["0.7"]
