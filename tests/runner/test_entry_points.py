"""The ways a user starts owl-eval: the console scripts named in pyproject.toml, ``python -m owl_eval`` and its
older spelling ``python -m runner``, and the configs shipped as package data (so a wheel runs outside the checkout)."""

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
    assert len(shipped) == 20
    assert set(shipped) <= set(listed)  # and those of an installed plugin protocol
