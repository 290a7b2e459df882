"""``mypy`` finds no error in owl_eval and hydra_plugins (settings in pyproject.toml's ``[tool.mypy]``; mypy is
pinned in the ``dev`` extra, since each release finds different errors). In the integration suite (``.ci/full``;
``.ci/run`` runs mypy beside the fast set): a whole minute without mypy's cache (``.mypy_cache``), as in a fresh
clone."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_is_clean():
    pytest.importorskip("mypy", reason="mypy is in the dev extra: pip install -e '.[dev]'")
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
