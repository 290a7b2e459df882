"""Benchmark: lifelong-RL metrics on a 100,000-episode l2logger log (~1,500 blocks) plus STE logs.

Writes the logs in the l2logger layout to a temporary directory and times ``evaluate_log`` including
reading (median of 3 runs; wall and CPU time). If l2metrics is importable in this interpreter it is timed
on the same logs too (l2metrics 3.1 needs numpy<2 and pandas; it keeps STE data under $L2DATA).

    python benchmarks/rl_metrics.py [--episodes 100000] [--blocks 1500] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from owl_eval.formats.l2logger import EpisodeLog, read_log, write_log  # noqa: E402
from owl_eval.metrics.lifelong_rl import evaluate_log  # noqa: E402

TASKS = ["cartpole_easy", "cartpole_hard", "minigrid_maze", "atari_pong", "reacher_long"]


def make_log(n_episodes: int, n_blocks: int, rng: np.random.Generator) -> EpisodeLog:
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
    return EpisodeLog.from_columns(
        block_num=block,
        block_type=btype,
        task_name=tasks,
        task_params=params,
        reward=reward,
        episode_step_count=rng.integers(10, 500, n_episodes).astype(float),
        metrics_columns=["reward"],
    )


def make_ste(task: str, rng: np.random.Generator) -> EpisodeLog:
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", type=int, default=100_000)
    ap.add_argument("--blocks", type=int, default=1500)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
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

        def timed(fn):
            wall, cpu = [], []
            for _ in range(args.repeats):
                t0, c0 = time.perf_counter(), time.process_time()
                fn()
                wall.append(time.perf_counter() - t0)
                cpu.append(time.process_time() - c0)
            return statistics.median(wall), statistics.median(cpu)

        rw, rc = timed(lambda: read_log(log_dir))
        print(f"read_log:                       median wall {rw:.3f} s, cpu {rc:.3f} s")

        def read_and_evaluate():  # metrics read no files: the logs are read first, as the evaluation does
            def read(d):
                return read_log(d, perf_measure="reward", raw=True, columns=["reward"])

            return evaluate_log(read(log_dir), ste_logs=[read(d) for d in ste_dirs])

        ew, ec = timed(read_and_evaluate)
        print(f"evaluate_log (incl. reading):   median wall {ew:.3f} s, cpu {ec:.3f} s  (target < 0.5 s)")
        res = read_and_evaluate()
        print("lifetime:", {k: (round(v, 4) if isinstance(v, float) else v) for k, v in res["lifetime"].items()})
        try:
            import l2metrics  # noqa: F401  (only to know whether it is there)
        except ImportError:
            print("l2metrics is not installed in this interpreter: reference timing skipped")
            return
        os.environ["L2DATA"] = str(Path(tmp) / "l2data")
        from l2metrics import util
        from l2metrics.report import MetricsReport

        for d in ste_dirs:
            util.store_ste_data(Path(d))

        reports = []

        def run_l2():
            r = MetricsReport(log_dir=Path(log_dir), transfer_method="both", maintenance_method="both")
            r.calculate()
            reports.append(r)

        lw, lc = timed(run_l2)
        print(
            f"l2metrics 3.1 MetricsReport:    median wall {lw:.3f} s, cpu {lc:.3f} s  -> ours is {lw / ew:.0f}x faster"
        )
        ref = reports[-1].lifetime_metrics_df.iloc[0]
        worst = max(
            abs(float(ref[k]) - res["lifetime"][k]) / max(1.0, abs(float(ref[k])))
            for k in ref.index
            if isinstance(res["lifetime"].get(k), float)
        )
        print(f"lifetime metrics in common with l2metrics: {len(ref)}; worst relative difference {worst:.2e}")


if __name__ == "__main__":
    main()
