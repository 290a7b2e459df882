"""Integration suite: real services started for the session, outside the default ``testpaths`` (``python -m pytest``
does not run it; ``.ci/team-store`` does).

Fixtures: tests/conftest.py's ``free_port``, ``start_background``, ``mlflow_store``, ``experiment``, ``start_command`` and ``client`` (imported: a conftest outside the rootdir may not
declare ``pytest_plugins``), and ``postgres``: a throwaway PostgreSQL cluster on 127.0.0.1, a free port, trust
authentication, one database ``mlflow``; stopped and its folder removed at the end of the session, failed tests
included. It skips with the reason where PostgreSQL cannot run here (``OWL_EVAL_REQUIRE_POSTGRES=1`` makes that a
failure instead, as in CI).
"""

from __future__ import annotations

import os
import pwd
import re
import shlex
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import (  # noqa: F401  (fixtures for this suite)
    client,
    experiment,
    free_port,
    mlflow_store,
    start_background,
    start_command,
    stop_process_group,
)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
REQUIRE_ENV = "OWL_EVAL_REQUIRE_POSTGRES"


def unavailable(reason: str):
    """Skip with ``reason``, or fail with it where PostgreSQL is required (``OWL_EVAL_REQUIRE_POSTGRES=1``)."""
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1)", pytrace=False)
    pytest.skip(reason)


def postgres_bindir() -> Path | None:
    """The newest Debian-installed PostgreSQL (``/usr/lib/postgresql/<version>/bin``), else ``initdb`` on PATH."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: [int(x) for x in re.findall(r"\d+", p.parent.parent.name)],
    )
    if found:
        return found[-1].parent
    on_path = shutil.which("initdb")
    return Path(on_path).parent if on_path else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(prefix: list[str], args: list[str], what: str, timeout: float = 120) -> None:
    proc = subprocess.run([*prefix, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if proc.returncode != 0:
        raise RuntimeError(f"{what} failed (exit {proc.returncode}): {(proc.stdout + proc.stderr).strip()[-2000:]}")


def _stop(prefix: list[str], bindir: Path, data: Path) -> None:
    """``pg_ctl stop -m fast``; the postmaster killed by its pid if that did not work."""
    if not (data / "postmaster.pid").exists():
        return
    try:
        _run(prefix, [str(bindir / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "-t", "60", "stop"], "pg_ctl stop")
        return
    except (RuntimeError, subprocess.TimeoutExpired):
        pass
    try:
        pid = int((data / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGKILL)  # its backends exit when the postmaster is gone
        time.sleep(1)
    except (OSError, ValueError, IndexError):
        pass


@pytest.fixture(scope="session")
def postgres() -> Iterator[dict]:
    """A PostgreSQL cluster of its own: ``{"uri": postgresql://postgres@127.0.0.1:<port>/mlflow, "port", "version"}``.

    As root, initdb and the server run as the ``postgres`` user (``runuser``; initdb refuses root); as anyone else,
    as that user. The data, socket and log folder is a new temp folder owned by that user; the server listens on
    127.0.0.1 only (its Unix socket in that folder), trusts local connections, and holds one database, ``mlflow``.
    """
    bindir = postgres_bindir()
    if bindir is None:
        unavailable("PostgreSQL is not installed: no /usr/lib/postgresql/<version>/bin/initdb, no initdb on PATH")
    prefix: list[str] = []
    owner: tuple[int, int] | None = None
    if os.geteuid() == 0:
        runuser = shutil.which("runuser")
        try:
            entry = pwd.getpwnam("postgres")
        except KeyError:
            entry = None
        if entry is None or runuser is None:
            unavailable(
                "running as root, and PostgreSQL refuses to run as root: "
                + ("there is no postgres user to run it as" if entry is None else "runuser is not installed")
            )
        prefix, owner = [runuser, "-u", "postgres", "--"], (entry.pw_uid, entry.pw_gid)
    version = bindir.parent.name
    root = Path(tempfile.mkdtemp(prefix="owl-eval-postgres-"))
    data, sockets = root / "data", root / "sockets"
    sockets.mkdir()
    if owner is not None:
        for path in (root, sockets):
            os.chown(path, *owner)
    port = _free_port()
    try:
        _run(
            prefix,
            [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale"],
            "initdb",
        )
        options = f"-c listen_addresses=127.0.0.1 -c port={port} -k {shlex.quote(str(sockets))}"
        _run(
            prefix,
            [str(bindir / "pg_ctl"), "-D", str(data), "-l", str(root / "postgres.log"), "-w", "-t", "60"]
            + ["-o", options, "start"],
            "pg_ctl start",
        )
        _run(
            prefix,
            [str(bindir / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "mlflow"],
            "createdb",
        )
        yield {"uri": f"postgresql://postgres@127.0.0.1:{port}/mlflow", "port": port, "version": version, "root": root}
    finally:
        _stop(prefix, bindir, data)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture()
def timings(record_property):
    """``timings(label, value, unit="s")``: a measurement, printed (seen with ``-s``) and listed at the end of the
    session whatever the output capture."""

    def note(label: str, value: float, unit: str = "s") -> None:
        text = f"{value:.1f} {unit}" if unit else f"{value}"
        record_property(f"measured: {label}", text)
        print(f"measured: {label}: {text}")

    return note


def pytest_terminal_summary(terminalreporter):
    lines = [
        f"{report.nodeid.split('::')[-1]}: {key.removeprefix('measured: ')}: {value}"
        for outcome in ("passed", "failed")
        for report in terminalreporter.stats.get(outcome, [])
        if report.when == "call"
        for key, value in report.user_properties
        if key.startswith("measured: ")
    ]
    if lines:
        terminalreporter.write_sep("-", "measured")
        for line in lines:
            terminalreporter.write_line(line)


# Every test runs on any worker (each has its own workspace and store), the long ones first so that the suite's
# critical path starts at once: the service-backed and long tests outside integration/commands, then the modules
# of LONG_BESIDE (long, one core each), then the command lines. Tests with a time bound have held it beside the others
# (the suite has run this way in every CI landing).
LONG_BESIDE = frozenset(
    {"test_typecheck.py", "test_default_syllabi.py", "test_large_sequences.py", "test_team_secrets.py"}
)


# pyproject's addopts make `python -m pytest` the fast set (-m "not slow"); every test here takes minutes, so here
# that default selects nothing and the whole suite runs. A -m given on the command line still applies.
DEFAULT_MARKEXPR = "not slow"


def marker_expression_given(args: list[str]) -> bool:
    """Whether the command line itself has a ``-m`` (``-m EXPR`` or ``-mEXPR``)."""
    return any(arg == "-m" or (arg.startswith("-m") and not arg.startswith("--")) for arg in args)


def pytest_configure(config):
    if config.option.markexpr == DEFAULT_MARKEXPR and not marker_expression_given(list(config.invocation_params.args)):
        config.option.markexpr = ""


def start_order(item) -> int:
    """When ``item`` starts: 0 the long and service-backed tests, 1 the long ones of :data:`LONG_BESIDE`, 2 the
    command lines (integration/commands)."""
    path = Path(item.path)
    if PROJECT_ROOT / "integration" / "commands" in path.parents:
        return 2
    return 1 if path.name in LONG_BESIDE else 0


def pytest_collection_modifyitems(config, items):
    items.sort(key=start_order)  # stable: each module keeps its order
