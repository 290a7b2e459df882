"""Time owl_eval.stats.stratified_bootstrap_ci (IQM, 2000 replicates) on 10 runs x 5 tasks against a plain-loop
version of the same bootstrap (per replicate, per task: draw the runs, then the IQM of the resample).

    python benchmarks/stats_bootstrap.py [--runs 10] [--tasks 5] [--reps 2000]

Prints the median wall and CPU time of 3 calls of each, and the ratio (CPU times: the machine is shared).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import median_time  # noqa: E402

from owl_eval.stats import stratified_bootstrap_ci  # noqa: E402


def loop_bootstrap(scores: np.ndarray, reps: int, seed: int) -> tuple[float, float]:
    """The same stratified percentile bootstrap of the IQM, one replicate and one task at a time (the same
    run indices drawn, so both give the same interval)."""
    runs, tasks = scores.shape
    indices = np.random.default_rng(seed).integers(0, runs, size=(reps, runs, tasks))
    values = []
    for r in range(reps):
        pooled = []
        for m in range(tasks):
            for n in indices[r, :, m]:
                pooled.append(float(scores[n, m]))
        pooled.sort()
        cut = int(0.25 * len(pooled))
        middle = pooled[cut : len(pooled) - cut]
        values.append(sum(middle) / len(middle))
    low, high = np.percentile(values, [2.5, 97.5])
    return float(low), float(high)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=5)
    parser.add_argument("--reps", type=int, default=2000)
    args = parser.parse_args()
    scores = np.random.default_rng(0).normal(size=(args.runs, args.tasks))

    vec_wall, vec_cpu = median_time(lambda: stratified_bootstrap_ci(scores, "iqm", reps=args.reps, rng=0))
    loop_wall, loop_cpu = median_time(lambda: loop_bootstrap(scores, args.reps, 0))
    ci = stratified_bootstrap_ci(scores, "iqm", reps=args.reps, rng=0)
    low, high = loop_bootstrap(scores, args.reps, 0)
    print(f"stratified bootstrap of the IQM, {args.reps} replicates, {args.runs} runs x {args.tasks} tasks")
    print(
        f"  owl_eval.stats (vectorised): {vec_wall * 1e3:8.1f} ms wall, {vec_cpu * 1e3:8.1f} ms CPU  CI [{ci.low:.4f}, {ci.high:.4f}]"
    )
    print(
        f"  plain loop:                  {loop_wall * 1e3:8.1f} ms wall, {loop_cpu * 1e3:8.1f} ms CPU  "
        f"CI [{low:.4f}, {high:.4f}]"
    )
    print(f"  ratio (loop / vectorised):   {loop_wall / vec_wall:8.1f} x wall, {loop_cpu / vec_cpu:8.1f} x CPU")


if __name__ == "__main__":
    main()
