"""The README's promises: its agent example runs as written, its config snippet composes."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from owl_eval.domains.classification import DigitsDomain
from owl_eval.protocols.ond import OndProtocol

README = Path(__file__).resolve().parents[2] / "README.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_agent_example_runs_and_beats_chance():
    code = next(b for b in _blocks("python") if "class NearestMeanAgent" in b)
    namespace: dict = {}
    exec(compile(code, "README-agent", "exec"), namespace)
    agent = namespace["NearestMeanAgent"]()
    record = OndProtocol(num_trials=3, condition="given").run(domain=DigitsDomain(), agent=agent,
                                                              rng=np.random.default_rng(0), progress=False)
    known = np.concatenate([t.gt_class[t.gt_class > 0] for t in record.trials])
    predicted = np.concatenate([np.argmax(t.p_class[t.gt_class > 0], 1) for t in record.trials])
    # 6 known classes: chance is 1/6 on known samples.
    assert np.mean(predicted == known) > 0.5


def test_readme_names_the_commands_that_exist():
    text = README.read_text()
    for experiment in re.findall(r"\+experiment=([a-z_]+)", text):
        assert (README.parent / "owl_eval" / "conf" / "experiment" / f"{experiment}.yaml").is_file(), experiment


def _bash_line(containing: str) -> str:
    return next(line for b in _blocks("bash") for line in b.splitlines() if containing in line and not line.startswith("#"))


def test_readme_custom_agent_command_runs_and_detects_novelty(tmp_path):
    """The README's agent, saved as my_agents.py, run with the README's own command line: it finishes and
    detects the change in every novel trial (M2 = 100 %), as the README says."""
    import os
    import shlex
    import subprocess
    import sys

    from mlflow.tracking import MlflowClient

    (tmp_path / "my_agents.py").write_text(next(b for b in _blocks("python") if "class NearestMeanAgent" in b))
    words = shlex.split(_bash_line("+agent._target_=my_agents.NearestMeanAgent"))
    assert words[:3] == ["python", "-m", "owl_eval"]
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID")}
    env["PYTHONPATH"] = str(README.parent)
    proc = subprocess.run([sys.executable, *words[1:], f"tracking.store_dir={tmp_path / 'store'}", "figures=false",
                           "progress=false"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}")
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert run.info.status == "FINISHED"
    assert run.data.metrics["m2_cdt_pct"] == 100.0 and run.data.metrics["top1"] > 0.5


def test_readme_artifact_download_line_fetches_the_record_and_leaves_no_stray_store(tmp_path):
    import os
    import subprocess

    from owl_eval.runner.app import run

    (tmp_path / "outputs").mkdir()
    run(["+experiment=ond_given_detection", f"tracking.store_dir={tmp_path / 'outputs'}", "protocol.num_trials=2",
         "figures=false", "progress=false"], output_dir=tmp_path / "job")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'outputs' / 'mlflow.db'}")
    (found,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    line = _bash_line("mlflow artifacts download").replace("<run_id>", found.info.run_id)
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID")}
    proc = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert (tmp_path / "downloaded" / "record" / "ond_record.npz").is_file()
    assert not (tmp_path / "mlflow.db").exists()
    # ... and the README's next line re-scores the downloaded record at another threshold.
    import sys

    rescore = _bash_line("source.path=downloaded/record").split(" #")[0].replace("python ", f"{sys.executable} ", 1)
    env["PYTHONPATH"] = str(README.parent)
    proc = subprocess.run(["bash", "-c", rescore + " progress=false"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert [r.data.params.get("metrics.threshold") for r in runs if r.data.tags.get("source") == "record"] == ["0.7"]
