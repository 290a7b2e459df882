"""``hydra/launcher=ray`` on a local Ray cluster gives the numbers of the basic launcher, bit for bit.

A one-node cluster is started with ``ray start --head --block`` on the loopback interface, a 6-job sweep runs on
it (2 agents x 3 seeds), the same sweep runs on the basic launcher, and the two are read back from the SQLite
file: same runs (6 jobs + 1 parent), same params, every metric value and series equal, children nested under
their parent, all FINISHED. Jobs on an existing cluster do not inherit the driver's environment: they find the
sweep's parent run by its sweep-dir tag, which is checked too.

Opt-in: needs the ``ray`` extra (hydra-ray-launcher, ray[default]); skipped otherwise. ``.ci/full`` runs it in its own
environment (``.ci/ray``, see docs/SWEEPS.md) with ``-n 0 -m ray``.

The cluster is bound to 127.0.0.1: ``--node-ip-address=127.0.0.1`` alone is not enough on Linux (Ray replaces a
loopback address by the machine's own, and its gRPC servers then listen on every interface), so the cluster and
the driver get ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, Ray's switch for a local-only cluster (on Linux it is on
by default): every process of the cluster then listens on 127.0.0.1 only, which the test checks while the sweep
runs. Token authentication is on, with a fresh token in the environment (``RAY_AUTH_TOKEN``), so nothing is
written to ``~/.ray``; the cluster's files are in a temporary directory of their own, not ``/tmp/ray``. At
teardown the ``ray start`` process is asked to stop (SIGTERM: Ray drains the node and stops its processes), and
every process the cluster started is checked to be gone.

A second sweep runs without ``ray.init.address``: the launcher starts a local cluster of its own, under a temp
folder too long for Ray's socket paths; it succeeds, and none of its processes is running a few seconds after
the command returns (``owl_eval.runner.process.short_tmp``, ``owl_eval.runner.process.sweep_processes``).
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest

from tests.conftest import stop_process_group
from tests.runner.test_sweeps import AGENTS, comparable, jobs_by_config, only_parent, same_history, snapshot, sweep

pytest.importorskip("hydra_plugins.hydra_ray_launcher", reason="the ray extra (hydra-ray-launcher) is not installed")

pytestmark = [pytest.mark.ray, pytest.mark.slow]
PROJECT_ROOT = Path(__file__).resolve().parents[2]
TINY = ["protocol.num_trials=2", "figures=false", "progress=false"]
SEEDS = "0,1,2"  # 2 agents x 3 seeds = 6 jobs


# -- processes and their sockets, read from /proc ------------------------------------------------------------
def _parents() -> dict[int, int]:
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            found[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    return found


def descendants(root: int) -> set[int]:
    """``root`` and every process below it, now."""
    parents = _parents()
    tree, added = {root}, True
    while added:
        below = {pid for pid, ppid in parents.items() if ppid in tree} - tree
        tree |= below
        added = bool(below)
    return tree & (set(parents) | {root})


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def _listening() -> dict[int, str]:
    """Socket inode -> local address (``ip:port``) of every listening TCP socket of this network namespace."""
    found = {}
    for name, width in (("tcp", 8), ("tcp6", 32)):
        try:
            lines = Path(f"/proc/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] != "0A":  # TCP_LISTEN
                continue
            host, port = fields[1].split(":")
            raw = b"".join(bytes.fromhex(host[i : i + 8])[::-1] for i in range(0, width, 8))
            address = ipaddress.ip_address(raw)
            if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
                address = address.ipv4_mapped
            found[int(fields[9])] = f"{address}:{int(port, 16)}"
    return found


def listening_addresses(pids: set[int]) -> dict[str, str]:
    """Address -> command line, for every TCP socket the processes ``pids`` listen on."""
    sockets = _listening()
    found = {}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:  # the process has ended
            continue
        for fd in fds:
            try:
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
            except OSError:  # closed since
                continue
            if link.startswith("socket:[") and int(link[8:-1]) in sockets:
                found[sockets[int(link[8:-1])]] = _cmdline(pid)[:100]
    return found


def is_loopback(address: str) -> bool:
    return ipaddress.ip_address(address.rsplit(":", 1)[0]).is_loopback


def free_ports(count: int) -> list[int]:
    """``count`` different free TCP ports on the loopback interface."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def test_listening_addresses_sees_every_interface():
    """The check the sweep test relies on: a socket on all interfaces is seen, and is not loopback."""
    with socket.socket() as everywhere, socket.socket() as loopback, socket.socket(socket.AF_INET6) as everywhere6:
        everywhere.bind(("0.0.0.0", 0))
        loopback.bind(("127.0.0.1", 0))
        everywhere6.bind(("::", 0))
        for s in (everywhere, loopback, everywhere6):
            s.listen()
        found = listening_addresses({os.getpid()})
        expected = {
            f"0.0.0.0:{everywhere.getsockname()[1]}": False,
            f"127.0.0.1:{loopback.getsockname()[1]}": True,
            f":::{everywhere6.getsockname()[1]}": False,
        }
        assert {a: is_loopback(a) for a in found if a in expected} == expected


# -- the cluster ----------------------------------------------------------------------------------------------
@pytest.fixture()
def ray_cluster(tmp_path, start_background):
    """A one-node Ray cluster on 127.0.0.1 in the foreground (``--block``); yields its address, the environment
    a driver needs to reach it, the ``ray start`` process and the time it took to start."""
    ray = shutil.which("ray", path=str(Path(sys.executable).parent)) or shutil.which("ray")
    if ray is None:
        pytest.skip("the ray command is not on PATH")
    # Ray's socket paths must stay under 107 characters: a short directory of its own, not pytest's tmp_path
    temp_dir = Path(tempfile.mkdtemp(prefix="owl-ray-", dir="/tmp"))
    # fixed defaults (10001, 8265, 52365, 44217, 44227) could be taken by another cluster on this machine
    gcs, client, dashboard, agent, autoscaler_metrics, dashboard_metrics = free_ports(6)
    env = {
        **os.environ,
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),  # Ray's own format (256 bits, hex)
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # a local-only cluster: every server on 127.0.0.1
        "RAY_USAGE_STATS_ENABLED": "0",
        "AUTOSCALER_METRIC_PORT": str(autoscaler_metrics),
        "DASHBOARD_METRIC_PORT": str(dashboard_metrics),
    }
    started = time.monotonic()
    proc = start_background(
        [
            ray,
            "start",
            "--head",
            "--block",
            f"--port={gcs}",
            "--node-ip-address=127.0.0.1",
            f"--ray-client-server-port={client}",
            "--num-cpus=2",
            "--include-dashboard=false",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dashboard}",
            f"--dashboard-agent-listen-port={agent}",
            f"--temp-dir={temp_dir}",
            "--disable-usage-stats",
        ],
        log_name="ray.log",
        env=env,
    )
    log = tmp_path / "ray.log"
    deadline = time.monotonic() + 120
    while "Ray runtime started" not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"ray start failed:\n{log.read_text()[-3000:]}")
        time.sleep(0.5)
    startup = time.monotonic() - started
    seen = descendants(proc.pid)
    try:
        yield {
            "address": f"127.0.0.1:{gcs}",
            "env": {k: env[k] for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER")},
            "proc": proc,
            "startup_s": startup,
            "log": log,
        }
    finally:
        # SIGTERM to `ray start` alone: it drains the node and stops what it started (a SIGTERM to the whole
        # group would stop the GCS first, and the drain would wait 30 s for it); the group is killed after that.
        seen |= descendants(proc.pid)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        stop_process_group(proc, grace=10)
        deadline = time.monotonic() + 20
        while (left := {pid for pid in seen if Path(f"/proc/{pid}").exists() and _alive(pid)}) and (
            time.monotonic() < deadline
        ):
            time.sleep(0.5)
        shutil.rmtree(temp_dir, ignore_errors=True)
        assert not left, f"processes of the Ray cluster still running: {[(p, _cmdline(p)) for p in left]}"


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def run_ray_sweep(cluster: dict, store: dict, name: str, sweep_dir: Path, log_dir: Path) -> dict:
    """The sweep on the cluster (a real ``python -m owl_eval`` process); while it runs, which addresses the
    cluster's and the driver's processes listen on, and which job processes were forked inside Ray workers."""
    cmd = [
        sys.executable,
        "-m",
        "owl_eval",
        "-m",
        "+experiment=ond_system_detection",
        f"tracking.uri={store['uri']}",
        f"tracking.artifact_location={store['artifacts']}",
        f"experiment_name={name}",
        f"hydra.sweep.dir={sweep_dir}",
        f"agent={','.join(AGENTS)}",
        f"seed={SEEDS}",
        *TINY,
        "hydra/launcher=ray",
        f"hydra.launcher.ray.init.address={cluster['address']}",
        "+hydra.launcher.ray.init.object_store_memory=null",
    ]
    env = {k: v for k, v in os.environ.items() if k != "OWL_EVAL_PARENT_RUN_ID"}
    env |= {"MLFLOW_DISABLE_TELEMETRY": "true", **cluster["env"]}
    listening: dict[str, str] = {}
    forked: set[int] = set()
    started = time.monotonic()
    with open(log_dir / "ray_sweep.out", "w") as out, open(log_dir / "ray_sweep.err", "w") as err:
        proc = subprocess.Popen(cmd, cwd=PROJECT_ROOT, env=env, stdout=out, stderr=err)
        try:
            while proc.poll() is None:
                if time.monotonic() - started > 600:
                    pytest.fail("the Ray sweep did not end within 600 s")
                pids = descendants(cluster["proc"].pid) | descendants(proc.pid)
                listening |= listening_addresses(pids)
                titles = {pid: _cmdline(pid) for pid in pids}
                parents = _parents()
                # a job's own process: forked by a Ray worker running the launcher's task, so it has its title
                forked |= {
                    pid
                    for pid, title in titles.items()
                    if title.startswith("ray::_run_job") and titles.get(parents.get(pid, 0), "").startswith("ray::")
                }
                time.sleep(0.2)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.wait()
    return {
        "returncode": proc.returncode,
        "stdout": (log_dir / "ray_sweep.out").read_text(),
        "stderr": (log_dir / "ray_sweep.err").read_text(),
        "seconds": time.monotonic() - started,
        "listening": listening,
        "forked": forked,
    }


def test_ray_sweep_matches_basic_launcher_bit_for_bit(ray_cluster, mlflow_store, tmp_path, capsys):
    on_ray, on_basic = f"ray-{uuid.uuid4().hex[:8]}", f"basic-{uuid.uuid4().hex[:8]}"
    ray = run_ray_sweep(ray_cluster, mlflow_store, on_ray, tmp_path / "ray", tmp_path)
    assert ray["returncode"] == 0, ray["stderr"][-4000:]
    # the sweep joined this cluster (ray.init.address): at its end it disconnected and left the cluster running
    assert ray_cluster["proc"].poll() is None, "the sweep stopped the cluster it only joined"
    started = time.monotonic()
    sweep(mlflow_store, on_basic, tmp_path / "basic", f"agent={','.join(AGENTS)}", f"seed={SEEDS}", *TINY)
    basic_seconds = time.monotonic() - started

    # Ray was reached on the loopback interface only, and the parent found by its tag (no inherited env).
    assert ray["listening"], "no listening socket of the cluster was seen"
    assert all(is_loopback(a) for a in ray["listening"]), {
        a: c for a, c in ray["listening"].items() if not is_loopback(a)
    }
    assert "found by its sweep-dir tag" in ray["stdout"] + ray["stderr"]

    runs_r, runs_b = snapshot(mlflow_store, on_ray), snapshot(mlflow_store, on_basic)
    assert len(runs_r) == len(runs_b) == 7  # 6 jobs + 1 parent, nothing lost, nothing doubled
    jobs_r, jobs_b = jobs_by_config(runs_r), jobs_by_config(runs_b)
    assert sorted(jobs_r) == sorted(jobs_b) == sorted((a, s) for a in AGENTS for s in range(3))
    parents = {}
    for label, runs, jobs in (("ray", runs_r, jobs_r), ("basic", runs_b, jobs_b)):
        parent_id, parent = only_parent(runs)
        parents[label] = parent
        assert parent["status"] == "FINISHED", label
        assert all(j["status"] == "FINISHED" and j["tags"]["mlflow.parentRunId"] == parent_id for j in jobs.values())
        assert "mlflow.parentRunId" not in parent["tags"]
    for config, run_b in jobs_b.items():
        params_r, metrics_r = comparable(jobs_r[config])
        params_b, metrics_b = comparable(run_b)
        assert params_r == params_b, config
        assert len(params_b) > 30  # the whole flattened config
        assert sorted(metrics_r) == sorted(metrics_b), config
        assert all(same_history(metrics_r[k], metrics_b[k]) for k in metrics_b), config
        assert len(metrics_b["detail/top1_batch"]) == 20  # the per-batch series is complete (200 samples / 10)
    # The comparison over seeds on the parent: computed from identical children, so identical too.
    _, summary_r = comparable(parents["ray"])
    _, summary_b = comparable(parents["basic"])
    # per agent: <agent>/<headline metric> (rounded means) and <agent>/n_seeds
    expected = {f"{agent.split('/')[1]}/{key}" for agent in AGENTS for key in ("top1", "n_seeds")}
    assert sorted(summary_r) == sorted(summary_b) and expected <= set(summary_b)
    assert all(same_history(summary_r[k], summary_b[k]) for k in summary_b)
    # Each job's work ran in a process forked inside its Ray worker (owl_eval.runner.process.worker), as elsewhere.
    assert ray["forked"], "no job process forked by a Ray worker was seen"
    with capsys.disabled():
        print(
            f"\nray cluster started in {ray_cluster['startup_s']:.1f} s; 6-job sweep: ray {ray['seconds']:.1f} s, "
            f"basic {basic_seconds:.1f} s; {len(ray['forked'])} job processes forked in Ray workers; "
            f"listening: {sorted(ray['listening'])}"
        )


def test_a_ray_sweep_on_a_cluster_it_starts_leaves_no_process_and_fits_its_sockets(mlflow_store, tmp_path):
    """``hydra/launcher=ray`` without ``ray.init.address``: the launcher starts a local cluster (GCS, raylet,
    workers, agents) for the sweep. Under a temp folder too long for Ray's socket paths (100+ characters, where
    ``ray.init`` fails with "AF_UNIX path length cannot exceed 107 bytes") the sweep succeeds, and after the
    command returns none of the processes it started (tests/runner/leftovers.py: its session and descendants,
    those of the cluster included) is running within a few seconds."""
    from tests.runner.leftovers import long_folder, run_watched, still_running

    tmp = long_folder(tmp_path)
    name = f"local-ray-{uuid.uuid4().hex[:8]}"
    cmd = [
        sys.executable,
        "-m",
        "owl_eval",
        "-m",
        "+experiment=ond_system_detection",
        f"tracking.uri={mlflow_store['uri']}",
        f"tracking.artifact_location={mlflow_store['artifacts']}",
        f"experiment_name={name}",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
        "seed=0,1",
        *TINY,
        "hydra/launcher=ray",
        "+hydra.launcher.ray.init.num_cpus=2",
        "+hydra.launcher.ray.init.include_dashboard=false",
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("OWL_EVAL_PARENT_RUN_ID", "RAY_TMPDIR", "RAY_ADDRESS")}
    env |= {
        "TMPDIR": str(tmp),
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),  # nothing written to ~/.ray
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",  # every server of the local cluster on 127.0.0.1
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    watched = run_watched(cmd, cwd=PROJECT_ROOT, env=env, log_dir=tmp_path, timeout=600)
    assert watched.returncode == 0, watched.stderr[-4000:]
    assert "AF_UNIX" not in watched.stderr
    names = " ".join(p.cmdline for p in watched.seen.values())
    assert "raylet" in names and "gcs_server" in names  # the cluster was seen, so its end is checked
    left = still_running(watched, 5.0)
    assert not left, [(p.pid, p.cmdline[:120]) for p in left]
    runs = snapshot(mlflow_store, name)
    assert len(runs) == 3 and all(r["status"] == "FINISHED" for r in runs.values())  # 2 jobs + 1 parent
