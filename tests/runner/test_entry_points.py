"""The ways a user starts owl-eval: the console scripts named in pyproject.toml, ``python -m owl_eval`` and its
second name ``python -m runner``, and the configs shipped as package data (so a wheel runs outside the checkout)."""

from __future__ import annotations

import importlib
import subprocess
import sys
import tomllib
from fnmatch import fnmatch
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_console_scripts_point_at_callables():
    scripts = PYPROJECT["project"]["scripts"]
    assert sorted(scripts) == ["owl-eval", "owl-eval-compare", "owl-eval-evaluate"]
    for target in scripts.values():
        module, _, function = target.partition(":")
        assert callable(getattr(importlib.import_module(module), function)), target


def test_every_config_file_is_package_data():
    patterns = PYPROJECT["tool"]["setuptools"]["package-data"]["owl_eval"]
    package = ROOT / "owl_eval"
    folders = [package / "conf", *(package / "protocols").glob("*/conf")]
    files = [p.relative_to(package).as_posix() for folder in folders for p in folder.rglob("*") if p.is_file()]
    assert len(folders) == 5 and len(files) > 50
    assert [f for f in files if not any(fnmatch(f, pattern) for pattern in patterns)] == []


@pytest.mark.parametrize("module", ["owl_eval", "runner"])
def test_python_m_lists_the_packaged_experiments(module):
    proc = subprocess.run(
        [sys.executable, "-m", module, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    # the experiment group lists exactly the experiment YAML files shipped in the protocols' config folders
    shipped = sorted(p.stem for p in (ROOT / "owl_eval").glob("**/conf/experiment/*.yaml"))
    listed = proc.stdout.split("experiment:", 1)[1].split("\n", 1)[0].replace(",", " ").split()
    assert (
        len(shipped) == 23
    )  # 20, then trajectory_files, lifelong_rl_mountaincar_syllabus, lifelong_rl_minigrid_syllabus
    assert set(shipped) <= set(listed)  # and those of an installed plugin protocol


@pytest.mark.slow
def test_a_users_config_dir_adds_agents_and_experiments(tmp_path):
    """``--config-dir ./conf``: the user's agent and experiment YAML sit beside the shipped options; a typo in a
    group lists the user's options too, and a sweep with a typo stops before any run exists."""
    conf = tmp_path / "conf"
    (conf / "agent" / "ond").mkdir(parents=True)
    (conf / "experiment").mkdir()
    (conf / "agent" / "ond" / "mine.yaml").write_text(
        "_target_: owl_eval.protocols.ond.agents.knn_novelty.KnnNoveltyAgent\nk_class: 3\n"
    )
    (conf / "experiment" / "mine.yaml").write_text(
        "# @package _global_\ndefaults:\n  - override /agent: ond/mine\nexperiment_name: mine\n"
        "protocol:\n  num_trials: 2\n"
    )
    from tests.inprocess import run_module

    base = ["--config-dir", str(conf), "progress=false", "figures=false"]
    store = [f"tracking.store_dir={tmp_path / 'store'}", f"hydra.run.dir={tmp_path / 'h'}"]

    def cli(*args):  # python -m owl_eval, in the test process (the --help tests above start the real one)
        return run_module("owl_eval", [*base, *store, *args], cwd=tmp_path, timeout=300)

    ok = cli("+experiment=mine")
    assert ok.returncode == 0, ok.stderr
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}")
    run = client.search_runs([client.get_experiment_by_name("mine").experiment_id])[0]
    assert run.info.status == "FINISHED" and run.data.params["agent.k_class"] == "3"
    assert run.data.tags["agent"] == "ond/mine"
    typo = cli("+experiment=mine", "agent=ond/mien")
    assert typo.returncode == 1 and typo.stderr.count("\n") == 1
    assert typo.stderr.startswith("error: unknown agent option 'ond/mien' in 'agent=ond/mien'")
    assert "ond/mine" in typo.stderr and "ond/knn_novelty" in typo.stderr
    sweep = cli("-m", "+experiment=mine", "agent=ond/mine,ond/mien")
    assert sweep.returncode == 1 and "unknown agent option 'ond/mien'" in sweep.stderr
    assert len(client.search_runs([client.get_experiment_by_name("mine").experiment_id])) == 1  # no new run
