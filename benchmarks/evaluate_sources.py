"""Time `owl-eval-evaluate` (`owl_eval.runner.cli.evaluate`) end to end (reading, metrics, MLflow) on results produced elsewhere.

- sailon: 1,000 SAIL-ON OND tests of 1,000 samples (K = 10) in sail-on-client's local-harness layout.
- l2logger: a 100,000-episode l2logger log (~1,500 blocks, 5 tasks) plus 5 STE logs, built by
  ``benchmarks/rl_metrics.py``'s log builder (reading, metrics, figures, MLflow).
Usage: python benchmarks/evaluate_sources.py [num_tests] [samples_per_test] [episodes]
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from owl_eval.evaluation import evaluation_for

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def write_sailon(root: Path, num_tests: int, samples: int, num_known: int = 10, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    root.mkdir(parents=True, exist_ok=True)
    for t in range(num_tests):
        test_id = f"OND.1.1.{t:05d}"
        red = int(rng.integers(samples // 4, samples // 2))
        cls = rng.integers(0, num_known, samples)
        novel = (np.arange(samples) >= red) & (rng.random(samples) < 0.5)
        novel[red] = True
        cls[novel] = -1
        ids = np.char.add(np.char.add("img", np.arange(samples).astype(str)), ".png")
        detection = (np.arange(samples) >= red).astype(int)
        gt = "id,detection,classification\n" + "\n".join(f"{i},{d},{c}" for i, d, c in zip(ids, detection, cls)) + "\n"
        (root / f"{test_id}_single_df.csv").write_text(gt)
        (root / f"{test_id}_metadata.json").write_text(
            json.dumps({"round_size": 100, "detection": red, "red_light": str(ids[red])})
        )
        p_world = np.clip(np.cumsum(rng.random(samples) < 0.01) * 0.3, 0, 1)
        scores = rng.dirichlet(np.ones(num_known + 1), samples)
        (root / f"S.{test_id}_detection.csv").write_text("\n".join(f"{i},{p:.6f}" for i, p in zip(ids, p_world)) + "\n")
        rows = np.round(scores, 8)
        rows[:, 0] = 1 - rows[:, 1:].sum(1)
        (root / f"S.{test_id}_classification.csv").write_text(
            "\n".join(i + "," + ",".join(f"{v:.8f}" for v in r) for i, r in zip(ids, rows)) + "\n"
        )


def bench_l2logger(tmp: Path, episodes: int = 100_000, blocks: int = 1500) -> None:
    import yaml

    from benchmarks.rl_metrics import TASKS, make_log, make_ste
    from owl_eval.formats.l2logger import write_log
    from owl_eval.protocols.lifelong_rl.sources.l2logger import L2LoggerSource
    from owl_eval.runner.api import evaluate

    rng = np.random.default_rng(0)
    log_dir = write_log(make_log(episodes, blocks, rng), tmp / "l2" / "logs", "bench", {"scenario_type": "custom"})
    ste_root = tmp / "l2" / "ste"
    for t in TASKS:
        write_log(make_ste(t, rng), ste_root, f"ste_{t}", {"scenario_type": "ste"})
    start = time.perf_counter()
    data = L2LoggerSource(path=str(log_dir), ste_paths=[str(ste_root)]).load()
    read = time.perf_counter() - start
    settings = yaml.safe_load((ROOT / "owl_eval" / "conf" / "metrics" / "lifelong_rl.yaml").read_text())
    evaluation = evaluation_for(data.protocol)
    options = evaluation.options(settings, record=data.record)
    start = time.perf_counter()
    scored = evaluation.score(data.record, options)  # the metrics and the figures' values, computed once
    results = scored.results
    metrics = time.perf_counter() - start
    start = time.perf_counter()
    evaluation.figures(scored, options)
    figures = time.perf_counter() - start
    points = sum(len(s.steps) for s in results.series.values())
    print(
        f"l2logger: {len(data.record.log)} episodes + {len(data.record.ste_logs)} STE logs: read+validate {read:.2f} s, "
        f"metrics {metrics:.2f} s, figures {figures:.2f} s; MLflow gets {len(results.values)} scalars and "
        f"{points} series points (per-episode reward, raw and processed)"
    )
    args = [
        "+source=l2logger",
        f"source.path={log_dir}",
        f"source.ste_paths=[{ste_root}]",
        f"tracking.store_dir={tmp / 'store'}",
    ]
    evaluate(args, output_dir=tmp / "out_l2_warm")  # the store exists after this (the sailon part may not have run)
    for figures in ("true", "false"):
        start = time.perf_counter()
        evaluate([*args, f"figures={figures}"], output_dir=tmp / f"out_l2_{figures}")
        print(
            f"l2logger: python -m owl_eval.runner.cli.evaluate end to end (read, metrics, {'figures, ' if figures == 'true' else ''}"
            f"MLflow) {time.perf_counter() - start:.2f} s"
        )


def main(num_tests: int = 1000, samples: int = 1000, episodes: int = 100_000) -> None:
    from owl_eval.protocols.ond.sources.sailon import SailonSource
    from owl_eval.runner.api import evaluate

    tmp = Path(tempfile.mkdtemp())
    start = time.perf_counter()
    write_sailon(tmp / "sailon", num_tests, samples)
    print(f"wrote {num_tests} SAIL-ON tests x {samples} samples in {time.perf_counter() - start:.1f} s")
    start = time.perf_counter()
    data = SailonSource(path=str(tmp / "sailon"), sum_tolerance=1e-5).load()
    read = time.perf_counter() - start
    start = time.perf_counter()
    evaluation_for(data.protocol).evaluate(data.record, {"threshold": 0.5, "threshold_grid": True})
    metrics = time.perf_counter() - start
    print(f"sailon: read+validate {read:.2f} s, metrics {metrics:.2f} s")
    evaluate(
        [
            "+source=sailon",
            f"source.path={tmp / 'sailon'}",
            "source.sum_tolerance=1e-5",
            f"tracking.store_dir={tmp / 'store'}",
        ],
        output_dir=tmp / "out",
    )  # creates the store
    start = time.perf_counter()
    evaluate(
        [
            "+source=sailon",
            f"source.path={tmp / 'sailon'}",
            "source.sum_tolerance=1e-5",
            f"tracking.store_dir={tmp / 'store'}",
        ],
        output_dir=tmp / "out2",
    )
    print(
        f"sailon: python -m owl_eval.runner.cli.evaluate end to end (read, metrics, figures, MLflow) {time.perf_counter() - start:.2f} s"
    )
    bench_l2logger(tmp, episodes)


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
