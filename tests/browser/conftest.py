"""Fixtures for driving the MLflow UI: an ``mlflow server`` on a free loopback port and a headless Chromium.

The browser is Debian's ``chromium`` driven by the ``playwright`` package (never ``playwright install``);
both missing means a skip with the reason. Every process started here is stopped by its process group.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS_DIR = PROJECT_ROOT / "outputs" / "test-artifacts"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_group(proc: subprocess.Popen, timeout: float = 30) -> None:
    """SIGTERM the process group this fixture started (server + uvicorn + job runners), SIGKILL what stays."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.killpg(proc.pid, 0)  # anyone left in the group?
        except ProcessLookupError:
            return
        time.sleep(0.5)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=10)


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
        context = p.chromium.launch_persistent_context(str(tmp_path / "chromium-profile"), executable_path=chromium_path,
                                                       headless=True, args=CHROMIUM_ARGS,
                                                       viewport={"width": 1600, "height": 1000})
        try:
            yield context.pages[0] if context.pages else context.new_page()
        finally:
            context.close()


def start_mlflow_server(backend_uri: str, workdir: Path, timeout: float = 120):
    """``mlflow server`` bound to 127.0.0.1 with one worker; returns (process, base url) once /health answers."""
    port = free_port()
    log = open(workdir / "mlflow-server.log", "w")
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    proc = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--backend-store-uri", backend_uri,
                             "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                            cwd=workdir, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
                if response.status == 200:
                    return proc, url, log
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_group(proc)
            log.close()
            pytest.fail(f"mlflow server did not answer /health:\n{(workdir / 'mlflow-server.log').read_text()[-3000:]}")
        time.sleep(1)


@pytest.fixture()
def mlflow_server_factory(tmp_path):
    started = []

    def start(backend_uri: str) -> str:
        proc, url, log = start_mlflow_server(backend_uri, tmp_path)
        started.append((proc, log))
        return url

    yield start
    for proc, log in started:
        stop_group(proc)
        log.close()


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
