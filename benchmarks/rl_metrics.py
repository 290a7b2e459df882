"""Benchmark: lifelong-RL metrics on a 100,000-episode l2logger log (~1,500 blocks) plus 5 STE logs, ours
against l2metrics 3.1 on the same logs in the same run.

Writes the logs in the l2logger layout to a temporary directory, then times (median of ``--repeats`` runs,
wall and CPU time):

- ours: ``read_log`` of the main log alone, and the whole evaluation: ``read_log`` of the main log and of
  the 5 STE logs as ``owl-eval-evaluate +source=l2logger`` reads them, then ``evaluate_log`` (reading is
  included, as l2metrics' ``MetricsReport`` reads its log);
- l2metrics 3.1: ``MetricsReport(log_dir=...)`` (which reads the main log) and ``.calculate()`` (which
  loads the STE data), with ``transfer_method="both", maintenance_method="both"``. Its STE logs are stored
  under a temporary ``$L2DATA`` by ``l2metrics.util.store_ste_data`` first, outside the timing (that step
  is l2metrics' one-off setup, printed separately).

Then it prints the ratio l2metrics / ours and the worst relative difference of the lifetime metrics both
compute. l2metrics 3.1 needs numpy<2 (and pandas); when it cannot be imported here, it is run in a second
interpreter that has it, given by ``--l2metrics-python`` or ``$L2METRICS_PYTHON``: this script is started
there with ``--l2metrics-worker`` (it then imports only l2metrics, times it as above on the same log
folders, and prints its times and lifetime metrics as one JSON line). Process start-up and imports are
outside the timing on both sides. A second interpreter, e.g.::

    python3 -m venv /tmp/venv-l2m && /tmp/venv-l2m/bin/pip install "l2metrics==3.1.*" "numpy<2" pandas

    python benchmarks/rl_metrics.py [--episodes 100000] [--blocks 1500] [--repeats 3]
                                    [--l2metrics-python /tmp/venv-l2m/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from timing import median_time  # this folder is on the path: the script's own

ROOT = Path(__file__).resolve().parents[1]
TASKS = ["cartpole_easy", "cartpole_hard", "minigrid_maze", "atari_pong", "reacher_long"]


def make_log(n_episodes: int, n_blocks: int, rng: np.random.Generator):
    """Alternating train/test blocks over several tasks; learning curves with noise, test blocks shorter."""
    weights = np.where(np.arange(n_blocks) % 2 == 0, 3.0, 1.0) * rng.uniform(0.6, 1.4, n_blocks)
    lengths = np.maximum(3, np.round(weights / weights.sum() * n_episodes)).astype(np.int64)
    lengths[-1] += n_episodes - lengths.sum()
    block = np.repeat(np.arange(n_blocks), lengths)
    is_train = np.arange(n_blocks) % 2 == 0
    half = np.arange(n_blocks) // 2
    # train tasks rotate 0,1,2,3,4; evaluations rotate at half that pace (2,2,3,3,...) so tasks are evaluated
    # before their first training (forward transfer) and several times between trainings (maintenance)
    task_idx = np.where(is_train, half % len(TASKS), (half // 2 + 2) % len(TASKS))
    pos = np.arange(n_episodes) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    frac = pos / np.repeat(lengths, lengths)
    skill = np.repeat(np.cumsum(is_train) / 50.0, lengths)
    reward = skill + np.where(np.repeat(is_train, lengths), frac, 0.0) + rng.normal(0, 0.3, n_episodes)
    tasks = np.array(TASKS, dtype=object)[np.repeat(task_idx, lengths)]
    btype = np.where(np.repeat(is_train, lengths), "train", "test").astype(object)
    params = np.array([json.dumps({"variant": t.split("_")[1]}) for t in TASKS], dtype=object)[
        np.repeat(task_idx, lengths)
    ]
    from owl_eval.formats.l2logger import EpisodeLog

    return EpisodeLog.from_columns(
        block_num=block,
        block_type=btype,
        task_name=tasks,
        task_params=params,
        reward=reward,
        episode_step_count=rng.integers(10, 500, n_episodes).astype(float),
        metrics_columns=["reward"],
    )


def make_ste(task: str, rng: np.random.Generator):
    from owl_eval.formats.l2logger import EpisodeLog

    n_train, n_test = 2000, 100
    reward = np.concatenate([np.linspace(0, 2, n_train) + rng.normal(0, 0.3, n_train), 2 + rng.normal(0, 0.3, n_test)])
    btype = np.array(["train"] * n_train + ["test"] * n_test, dtype=object)
    return EpisodeLog.from_columns(
        block_num=np.repeat([0, 1], [n_train, n_test]),
        block_type=btype,
        task_name=task,
        reward=reward,
        metrics_columns=["reward"],
    )


def l2metrics_worker(log_dir: str, ste_dirs: list[str], repeats: int) -> dict:
    """Time l2metrics 3.1 on ``log_dir`` (STE data from ``ste_dirs``) in this interpreter; imports nothing of ours."""
    with tempfile.TemporaryDirectory() as l2data:
        os.environ["L2DATA"] = l2data
        import l2metrics
        import pandas
        from l2metrics import util
        from l2metrics.report import MetricsReport

        t0 = time.perf_counter()
        for d in ste_dirs:
            util.store_ste_data(Path(d))
        store = time.perf_counter() - t0
        reports = []

        def run_l2():
            r = MetricsReport(log_dir=Path(log_dir), transfer_method="both", maintenance_method="both")
            r.calculate()
            reports.append(r)

        wall, cpu = median_time(run_l2, repeats)
        lifetime = {k: float(v) for k, v in reports[-1].lifetime_metrics_df.iloc[0].items()}
    versions = {
        "l2metrics": getattr(l2metrics, "__version__", None) or _version("l2metrics"),
        "pandas": pandas.__version__,
        "numpy": np.__version__,
    }
    return {"wall": wall, "cpu": cpu, "store_ste": store, "lifetime": lifetime, "versions": versions}


def _version(dist: str) -> str:
    from importlib.metadata import version

    return version(dist)


def run_l2metrics(log_dir, ste_dirs, repeats: int, python: str | None) -> dict | None:
    """l2metrics' timing: in this interpreter when it imports here, else in ``python``; None when neither."""
    try:
        import l2metrics  # noqa: F401  (only to know whether it is there)
    except ImportError:
        if not python:
            return None
    else:
        if not python:
            return l2metrics_worker(str(log_dir), [str(d) for d in ste_dirs], repeats)
    cmd = [python, __file__, "--l2metrics-worker", "--log-dir", str(log_dir), "--repeats", str(repeats)]
    cmd += [arg for d in ste_dirs for arg in ("--ste-dir", str(d))]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the other interpreter's own packages
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        sys.exit(f"l2metrics in {python} failed (exit {done.returncode}):\n{done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=100_000)
    ap.add_argument("--blocks", type=int, default=1500)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument(
        "--l2metrics-python",
        default=os.environ.get("L2METRICS_PYTHON"),
        help="interpreter with l2metrics 3.1 installed (default: $L2METRICS_PYTHON; else this one, if it has it)",
    )
    ap.add_argument("--l2metrics-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--log-dir", help=argparse.SUPPRESS)
    ap.add_argument("--ste-dir", action="append", default=[], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.l2metrics_worker:
        print(json.dumps(l2metrics_worker(args.log_dir, args.ste_dir, args.repeats)))
        return

    sys.path.insert(0, str(ROOT))
    from owl_eval.formats.l2logger import read_log, write_log
    from owl_eval.protocols.lifelong_rl.metrics import evaluate_log

    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        log_dir = write_log(
            make_log(args.episodes, args.blocks, rng),
            Path(tmp) / "logs",
            "bench",
            {"scenario_type": "custom", "complexity": "2-intermediate", "difficulty": "2-medium"},
        )
        ste_dirs = [write_log(make_ste(t, rng), Path(tmp) / "ste", f"ste_{t}", {"scenario_type": "ste"}) for t in TASKS]
        n = len(read_log(log_dir))
        print(f"log: {n} episodes, {args.blocks} blocks, {len(TASKS)} tasks, {len(ste_dirs)} STE logs")
        if hasattr(os, "getloadavg"):
            print("load average (1, 5, 15 min): {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))

        rw, rc = median_time(lambda: read_log(log_dir), args.repeats)
        print(f"ours: read_log (main log, every column):              median wall {rw:.3f} s, cpu {rc:.3f} s")

        def read(d):  # as `owl-eval-evaluate +source=l2logger` reads a log (every column; complete rows with a reward)
            return read_log(d, perf_measure="reward")

        def read_all():
            return read(log_dir), [read(d) for d in ste_dirs]

        def read_and_evaluate():  # metrics read no files: the logs are read first, as the evaluation does
            log, ste = read_all()
            return evaluate_log(log, ste_logs=ste)

        aw, ac = median_time(read_all, args.repeats)
        print(f"ours: reading as the evaluation does (main + STE logs):   median wall {aw:.3f} s, cpu {ac:.3f} s")

        ew, ec = median_time(read_and_evaluate, args.repeats)
        print(f"ours: whole evaluation (reading + metrics):             median wall {ew:.3f} s, cpu {ec:.3f} s")
        res = read_and_evaluate()
        print("lifetime:", {k: (round(v, 4) if isinstance(v, float) else v) for k, v in res["lifetime"].items()})

        ref = run_l2metrics(log_dir, ste_dirs, args.repeats, args.l2metrics_python)
        if ref is None:
            print(
                "l2metrics is not importable here and no --l2metrics-python / $L2METRICS_PYTHON was given: "
                "reference timing skipped"
            )
            return
        lw, lc = ref["wall"], ref["cpu"]
        where = args.l2metrics_python or sys.executable
        print(f"l2metrics: {ref['versions']} in {where}; store_ste_data (setup, not timed) {ref['store_ste']:.2f} s")
        print(f"l2metrics: MetricsReport + calculate (reading + metrics): median wall {lw:.3f} s, cpu {lc:.3f} s")
        print(f"ratio l2metrics / ours (whole evaluation): wall {lw / ew:.1f}x, cpu {lc / ec:.1f}x  (target >= 50x)")
        common = [k for k, v in ref["lifetime"].items() if isinstance(res["lifetime"].get(k), float)]
        worst = max(
            abs(ref["lifetime"][k] - res["lifetime"][k]) / max(abs(ref["lifetime"][k]), 1e-12)
            for k in common
            if not (np.isnan(ref["lifetime"][k]) and np.isnan(res["lifetime"][k]))
        )
        print(f"lifetime metrics in common with l2metrics: {len(common)}; worst relative difference {worst:.2e}")


if __name__ == "__main__":
    main()
