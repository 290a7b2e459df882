"""The daily loop's two speed figures (issue 18), each as a whole command, median of several runs:

1. the smallest run, ``python -m owl_eval +experiment=ond_given_detection protocol.num_trials=2``, against
   importing its dependencies alone (``python -c 'import mlflow, hydra, sklearn, matplotlib.pyplot,
   scipy.stats'``): the ratio, target <= 1.3. Measured into a store that exists (a first run in a folder also
   creates the SQLite store: MLflow's schema migrations, printed apart);
2. ``python -m owl_eval --help`` and a config error (``agent=nope``), each target < 2 s.

Usage: python benchmarks/startup.py [repeats]   (run it on a quiet machine: wall time grows with the load)
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

IMPORT_LINE = "import mlflow, hydra, sklearn, matplotlib.pyplot, scipy.stats"
SMALLEST = ["+experiment=ond_given_detection", "protocol.num_trials=2", "progress=false", "figures=true"]


def wall(cmd: list[str], cwd: Path, *, ok: bool = True) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if ok and proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stderr[-2000:]}")
    return seconds


def median(cmd: list[str], cwd: Path, repeats: int, *, ok: bool = True) -> float:
    return statistics.median(wall(cmd, cwd, ok=ok) for _ in range(repeats))


def main(repeats: int = 5) -> None:
    folder = Path(tempfile.mkdtemp(prefix="owl-eval-startup-"))
    python = sys.executable
    first = wall([python, "-m", "owl_eval", *SMALLEST], folder)  # creates the store
    imports = median([python, "-c", IMPORT_LINE], folder, repeats)
    run = median([python, "-m", "owl_eval", *SMALLEST], folder, repeats)
    help_s = median([python, "-m", "owl_eval", "--help"], folder, repeats)
    error_s = median([python, "-m", "owl_eval", "agent=nope"], folder, repeats, ok=False)
    print(f"import line ({IMPORT_LINE}): {imports:.2f} s")
    print(f"smallest run ({' '.join(SMALLEST[:2])}): {run:.2f} s  ratio {run / imports:.2f} (target <= 1.3)")
    print(f"  the first run in a new folder, creating the SQLite store too: {first:.2f} s")
    print(f"--help: {help_s:.2f} s (target < 2)")
    print(f"config error (agent=nope): {error_s:.2f} s (target < 2)")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:2]))
