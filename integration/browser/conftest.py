"""Fixtures for driving the MLflow UI: the README's ``mlflow ui`` line on a free loopback port and a headless Chromium.

The browser is Debian's ``chromium`` driven by the ``playwright`` package (never ``playwright install``);
both missing means a skip with the reason. Every process started here is stopped by its process group.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS_DIR = PROJECT_ROOT / "outputs" / "test-artifacts"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture()
def chromium_path() -> str:
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install playwright)")
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("no chromium on PATH (apt-get install chromium)")
    return path


@pytest.fixture()
def browser_page(chromium_path, tmp_path):
    """A fresh headless Chromium page (own user-data dir), 1600x1000."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),
            executable_path=chromium_path,
            headless=True,
            args=CHROMIUM_ARGS,
            viewport={"width": 1600, "height": 1000},
        )
        try:
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()


def readme_ui_command(backend_uri: str, port: int) -> list[str]:
    """The README's ``mlflow ui`` line as a user runs it, pointed at ``backend_uri`` and ``port``."""
    import shlex

    from tests.runner.test_readme import bash_lines

    (line,) = [line for line in bash_lines() if line.startswith("mlflow ui ")]
    words = shlex.split(line, comments=True)
    for flag, value in (("--backend-store-uri", backend_uri), ("--port", str(port))):
        words[words.index(flag) + 1] = value
    return [sys.executable, "-m", "mlflow", *words[1:]]


@pytest.fixture()
def mlflow_server_factory(tmp_path, start_background, free_port):
    """Starts the MLflow UI with the README's own ``mlflow ui`` line (bound to 127.0.0.1, one worker) on a free
    port; returns a function that returns its base URL once /health answers (the UI takes about 30 s to start: the
    test does its own work meanwhile)."""

    def start(backend_uri: str, timeout: float = 120) -> Callable[[], str]:
        env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
        proc = start_background(
            readme_ui_command(backend_uri, free_port), log_name="mlflow-server.log", env=env, cwd=tmp_path
        )
        url = f"http://127.0.0.1:{free_port}"
        deadline = time.monotonic() + timeout

        def ready() -> str:
            while True:
                try:
                    with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                        if response.status == 200:
                            return url
                except OSError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(
                        f"mlflow ui did not answer /health:\n{(tmp_path / 'mlflow-server.log').read_text()[-3000:]}"
                    )
                time.sleep(1)

        return ready

    return start


@pytest.fixture()
def save_screenshot(tmp_path):
    """Screenshot into the test's tmp dir and a copy under outputs/test-artifacts/ (kept after the run)."""

    def save(page, name: str) -> Path:
        path = tmp_path / f"{name}.png"
        page.screenshot(path=str(path), full_page=False)
        ARTIFACTS_DIR.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, ARTIFACTS_DIR / path.name)
        return ARTIFACTS_DIR / path.name

    return save
