"""The tree stays as ``ruff check`` and ``ruff format`` leave it (settings in pyproject.toml; ruff is pinned in the
``dev`` extra, since formatting changes between ruff versions)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _ruff(*args: str) -> subprocess.CompletedProcess:
    pytest.importorskip("ruff", reason="ruff is in the dev extra: pip install -e '.[dev]'")
    return subprocess.run([sys.executable, "-m", "ruff", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_ruff_lint_is_clean():
    proc = _ruff("check", ".", "--output-format", "concise")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format_is_clean():
    proc = _ruff("format", "--check", ".")
    assert proc.returncode == 0, proc.stdout + proc.stderr
