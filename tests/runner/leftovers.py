"""Which processes a command started are still running after it returned, read from ``/proc``.

:func:`run_watched` starts the command in a session of its own and, while it runs, records every process of that
session and every descendant of the command (a process that calls ``setsid`` or is re-parented when its parent
exits is still seen, as long as it lived for one poll). After the command returns, :func:`still_running` says
which of them are running (not zombies) after up to ``grace`` seconds. A pid is matched with its start time, so a
new process that reuses a recorded pid is not counted.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

LONG_TMP_CHARS = 100  # pytest's own temp folders under a CI system's or a long user name's temp root come close


def long_folder(under: Path, chars: int = LONG_TMP_CHARS) -> Path:
    """A new folder under ``under`` whose path has at least ``chars`` characters (a temp folder too long for the
    socket paths of multiprocessing and Ray)."""
    pad = max(1, chars - len(str(under)) - 1)
    folder = under / ("t" * min(pad, 200))
    folder.mkdir()
    return folder


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    session: int
    state: str
    started: int  # clock ticks after boot: with the pid, one process
    cmdline: str


def processes() -> dict[int, Proc]:
    """Every process now, by pid."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:  # ended meanwhile
            continue
        fields = stat.rsplit(")", 1)[1].split()
        words = cmdline.replace(b"\0", b" ").decode(errors="replace").strip()
        found[int(entry)] = Proc(int(entry), int(fields[1]), int(fields[3]), fields[0], int(fields[19]), words)
    return found


@dataclass
class Watched:
    returncode: int
    stdout: str
    stderr: str
    seen: dict[int, Proc] = field(default_factory=dict)  # the command's processes, the command's own included


def _below(root: int, now: dict[int, Proc], known: set[int]) -> set[int]:
    """Processes of ``root``'s session, and descendants of ``root`` or of a process already recorded."""
    tree = {pid for pid, p in now.items() if p.session == root} | ({root} & set(now)) | (known & set(now))
    added = True
    while added:
        below = {pid for pid, p in now.items() if p.ppid in tree} - tree
        tree |= below
        added = bool(below)
    return tree


def run_watched(cmd: list[str], *, cwd: Path, env: dict, log_dir: Path, timeout: float = 600) -> Watched:
    """Run ``cmd`` in a new session, recording its processes every 0.1 s until it returns."""
    seen: dict[int, Proc] = {}
    out_path, err_path = log_dir / "watched.out", log_dir / "watched.err"
    with open(out_path, "w") as out, open(err_path, "w") as err:
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=out, stderr=err, start_new_session=True)
        deadline = time.monotonic() + timeout
        try:
            while proc.poll() is None:
                now = processes()
                for pid in _below(proc.pid, now, set(seen)):
                    seen.setdefault(pid, now[pid])
                if time.monotonic() > deadline:
                    raise AssertionError(f"{cmd[:6]} did not end within {timeout} s")
                time.sleep(0.1)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
            proc.wait()
    return Watched(proc.returncode, out_path.read_text(), err_path.read_text(), seen)


def still_running(watched: Watched, grace: float) -> list[Proc]:
    """The recorded processes still running (same pid and start time, not a zombie) ``grace`` seconds after the
    command returned at the latest (earlier once none is left)."""
    deadline = time.monotonic() + grace
    while True:
        now = processes()
        left = [
            now[pid]
            for pid, p in watched.seen.items()
            if pid in now and now[pid].started == p.started and now[pid].state != "Z"
        ]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.2)
