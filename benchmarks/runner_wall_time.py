"""Wall time of `python -m owl_eval +experiment=ond_given_detection`, and where it goes.

Prints: the whole command, the interpreter + imports alone, and the run's own timers (setup incl.
MLflow store and run creation, the protocol (agents over the trials), metrics, figures, MLflow logging).
Usage: python benchmarks/runner_wall_time.py [experiment]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - start


def main(experiment: str = "ond_given_detection") -> None:
    store = Path(tempfile.mkdtemp())
    timed(
        [sys.executable, "-m", "owl_eval", f"+experiment={experiment}", f"tracking.store_dir={store}", "progress=false"]
    )  # creates the store
    total = timed(
        [sys.executable, "-m", "owl_eval", f"+experiment={experiment}", f"tracking.store_dir={store}", "progress=false"]
    )
    imports = timed(
        [
            sys.executable,
            "-c",
            "import mlflow, hydra, sklearn, scipy.stats, matplotlib.pyplot, owl_eval.runner.job.live, owl_eval.protocols.ond.metrics",
        ]
    )
    from mlflow.tracking import MlflowClient

    client = MlflowClient(f"sqlite:///{store / 'mlflow.db'}")
    exp = client.get_experiment_by_name(experiment)
    run = client.search_runs([exp.experiment_id], order_by=["attributes.start_time DESC"], max_results=1)[0]
    timers = {k: v for k, v in run.data.metrics.items() if k.startswith("time/")}
    print(f"{experiment}: whole command {total:.2f} s (store already created)")
    print(f"  interpreter + imports alone: {imports:.2f} s")
    for key in sorted(timers):
        print(f"  {key}: {timers[key]:.3f} s")
    inside = timers.get("time/total_s", 0.0)
    print(f"  outside the job (interpreter, imports, Hydra composition): {total - inside:.2f} s")


if __name__ == "__main__":
    main(*sys.argv[1:])
