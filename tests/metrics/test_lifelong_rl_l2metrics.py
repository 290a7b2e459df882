"""Lifetime metrics of ``evaluate_log`` against l2metrics 3.1 itself, on random l2logger logs written both by
l2logger 1.8's own ``DataLogger`` and by our writer, read back by our column-wise reader.

l2metrics 3.1 needs numpy<2, so it runs in a second interpreter: ``$L2METRICS_PYTHON`` (as
``benchmarks/rl_metrics.py``), which must import l2metrics and l2logger; without it the test is skipped.
Random logs: 2-3 tasks, train blocks of 1-14 (shorter than l2metrics' smoothing minimum of 15) or 15-79
episodes, test blocks of 1-11 episodes between them, some train blocks of subtype sleep, task_params JSON
holding a quote and a tab, and one STE log per task. Training curves trend upward, so that no smoothed curve
peaks at its first two episodes: with an even smoothing window those two values are mathematically equal (the
mirrored padding holds the same episodes), l2metrics picks between them by float rounding and we pick the
first (METRICS.md section 4), which moves a time to saturation between 0 and 1. Every lifetime metric l2metrics reports as a number must
equal ours to 1e-6 relative (METRICS.md section 4); where it reports NaN ours must be N/A.
"""

from __future__ import annotations

import json
import math
import os
import subprocess

import numpy as np
import pytest

from owl_eval.formats.l2logger import EpisodeLog, read_log, write_log
from owl_eval.protocols.lifelong_rl.metrics import evaluate_log

# Run in the l2metrics interpreter: write each log with l2logger's DataLogger, then run l2metrics'
# MetricsReport on every main log (STE data stored first under a temporary $L2DATA), print the lifetime values.
WORKER = r"""
import json, os, sys, tempfile, warnings
from pathlib import Path
warnings.filterwarnings("ignore")
spec = json.load(open(sys.argv[1]))
from l2logger import l2logger
def write(rows, base, name, kind):
    logger = l2logger.DataLogger(base, name, {"metrics_columns": ["reward"]}, {"scenario_type": kind})
    for r in rows:
        logger.log_record({**r, "task_params": json.loads(r["task_params"]), "worker_id": "worker-default",
                           "exp_status": "complete"})
    logger.close()
    return logger.scenario_dir
main = write(spec["main"], spec["base"], "main", "custom")
ste = [write(rows, spec["base"] + "/ste", "ste_%d" % i, "ste") for i, rows in enumerate(spec["ste"])]
out = {"l2logger": {"main": main, "ste": ste}, "ours": {}}
from l2metrics import util
from l2metrics.report import MetricsReport
for which, (m, s) in {"l2logger": (main, ste), "ours": (spec["ours_main"], spec["ours_ste"])}.items():
    with tempfile.TemporaryDirectory() as l2data:  # STE data of one writer only
        os.environ["L2DATA"] = l2data
        for d in s:
            util.store_ste_data(Path(d))
        report = MetricsReport(log_dir=Path(m), transfer_method="both", maintenance_method="both")
        report.calculate()
        out[which]["lifetime"] = {k: float(v) for k, v in report.lifetime_metrics_df.iloc[0].items()
                                  if isinstance(v, (int, float))}
print(json.dumps(out))
"""


def _l2metrics_python() -> str:
    python = os.environ.get("L2METRICS_PYTHON")
    if not python:
        pytest.skip("set $L2METRICS_PYTHON to an interpreter with l2metrics 3.1 and l2logger 1.8 (needs numpy<2)")
    done = subprocess.run([python, "-c", "import l2metrics, l2logger"], capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"$L2METRICS_PYTHON={python} cannot import l2metrics and l2logger: {done.stderr.strip()[-200:]}")
    return python


def _rows(blocks):
    rows, exp = [], 0
    for block_num, (block_type, subtype, task, params, rewards) in enumerate(blocks):
        for r in rewards:
            rows.append(
                dict(block_num=block_num, exp_num=exp, block_type=block_type, block_subtype=subtype,
                     task_name=task, task_params=params, reward=float(r))
            )  # fmt: skip
            exp += 1
    return rows


def _log(rows) -> EpisodeLog:
    def column(key):
        return np.array([r[key] for r in rows], dtype=object)

    return EpisodeLog.from_columns(
        block_num=np.array([r["block_num"] for r in rows]),
        exp_num=np.array([r["exp_num"] for r in rows]),
        block_type=column("block_type"),
        block_subtype=column("block_subtype"),
        task_name=column("task_name"),
        task_params=column("task_params"),
        reward=np.array([r["reward"] for r in rows]),
        metrics_columns=["reward"],
    )


def _random_syllabus(rng):
    tasks = [f"task_{c}" for c in "abc"[: int(rng.integers(2, 4))]]
    params = {t: json.dumps({"name": f'say "{t}"\there', "level": int(rng.integers(3))}) for t in tasks}
    blocks = []
    for i, task in enumerate([*rng.permutation(tasks), *rng.choice(tasks, int(rng.integers(3, 8)))]):
        if i < len(tasks) or rng.random() < 0.6:
            for evaluated in rng.choice(tasks, int(rng.integers(0, len(tasks) + 1)), replace=False):
                blocks.append(("test", "wake", evaluated, params[evaluated], rng.normal(0.5, 0.3, rng.integers(1, 12))))
        n = int(rng.integers(1, 15)) if rng.random() < 0.4 else int(rng.integers(15, 80))
        subtype = "sleep" if rng.random() < 0.15 else "wake"
        blocks.append(("train", subtype, task, params[task], np.cumsum(rng.normal(0.3, 0.5, n))))
    for task in tasks:
        blocks.append(("test", "wake", task, params[task], rng.normal(1.0, 0.3, rng.integers(1, 12))))
    ste = [
        _rows(
            [
                ("train", "wake", t, params[t], np.cumsum(rng.normal(0.3, 0.5, rng.integers(20, 90)))),
                ("test", "wake", t, params[t], rng.normal(1.0, 0.3, 5)),
            ]
        )
        for t in tasks
    ]
    return _rows(blocks), ste


@pytest.mark.parametrize("seed", [1])
def test_lifetime_metrics_equal_l2metrics_on_random_logs(tmp_path, seed):
    python = _l2metrics_python()
    main_rows, ste_rows = _random_syllabus(np.random.default_rng(seed))
    ours_main = write_log(_log(main_rows), tmp_path / "ours", "main", {"scenario_type": "custom"})
    ours_ste = [write_log(_log(r), tmp_path / "ours" / "ste", f"ste_{i}", {"scenario_type": "ste"}) for i, r in enumerate(ste_rows)]  # fmt: skip
    spec = {
        "main": main_rows,
        "ste": ste_rows,
        "base": str(tmp_path / "l2logger"),
        "ours_main": str(ours_main),
        "ours_ste": [str(d) for d in ours_ste],
    }
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    done = subprocess.run(
        [python, "-c", WORKER, str(tmp_path / "spec.json")], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    reference = json.loads(done.stdout.strip().splitlines()[-1])
    written = {"l2logger": reference["l2logger"], "ours": {"main": str(ours_main), "ste": [str(d) for d in ours_ste]}}
    compared = 0
    for writer, dirs in written.items():
        log = read_log(dirs["main"], perf_measure="reward")
        ste = [read_log(d, perf_measure="reward") for d in dirs["ste"]]
        ours = evaluate_log(log, ste_logs=ste)["lifetime"]
        for name, value in reference[writer]["lifetime"].items():
            mine = ours.get(name)
            if math.isnan(value):
                assert not isinstance(mine, float) or math.isnan(mine), (writer, name, mine)
                continue
            assert isinstance(mine, float), (writer, name, value, mine)
            assert mine == pytest.approx(value, rel=1e-6, abs=1e-12), (writer, name)
            compared += 1
    assert compared >= 10, reference
    # the two writers' files read back to the same log
    a, b = read_log(written["l2logger"]["main"]), read_log(written["ours"]["main"])
    for column in ("block_num", "exp_num", "block_type", "block_subtype", "task_name", "task_params", "reward"):
        assert a[column].tolist() == b[column].tolist(), column
