"""Your own data at full size: a 1,000,000-sample, 128-feature float32 data set (a folder of .npy files, 512 MB,
100 classes of 10,000 samples), read memory-mapped by ``domain=dataset`` and ``domain=split_dataset``.

Prints, for each run, the wall time and the peak resident memory of the whole command (the job's forked process
included), next to the reference: ``numpy.load(..., mmap_mode="r")`` plus one pass over every row (what any run that
checks the features for NaN and hashes the files must read at least once).

- OND: ``agent=ond/sklearn`` with a ``sklearn.naive_bayes.GaussianNB`` classifier and max-softmax novelty;
- continual: ``domain=split_dataset`` over the same file, 50 tasks of 2 classes, ``agent=continual/sklearn``.

Usage: python benchmarks/own_data_full_size.py [DATA_DIR]   (the data is made there once: 512 MB of disk)
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

N, D, C = 1_000_000, 128, 100


def make(folder: Path) -> None:
    """X.npy (float32, class means 0.05 apart along a random direction per class) and y.npy (int64)."""
    if (folder / "X.npy").is_file() and (folder / "y.npy").is_file():
        return
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(C), N // C)
    rng.shuffle(y)
    centres = rng.normal(size=(C, D)).astype(np.float32)
    X = np.lib.format.open_memmap(folder / "X.npy", mode="w+", dtype=np.float32, shape=(N, D))
    step = 100_000
    for start in range(0, N, step):
        rows = y[start : start + step]
        X[start : start + step] = centres[rows] + rng.normal(size=(len(rows), D)).astype(np.float32)
    X.flush()
    del X
    np.save(folder / "y.npy", y)


def measured(cmd: list[str], cwd: Path) -> tuple[float, float, str]:
    """(seconds, peak resident MiB of the command and its waited-for descendants, last output lines)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)  # this child's own rusage (its reaped children's peak included)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - start
    if proc.returncode:
        sys.exit(f"failed ({proc.returncode}): {' '.join(cmd)}\n{out[-3000:]}")
    return seconds, usage.ru_maxrss / 1024, "\n".join(out.strip().splitlines()[-3:])


REFERENCE = """
import numpy as np, sys
X = np.load(sys.argv[1] + "/X.npy", mmap_mode="r")
total = 0.0
for start in range(0, X.shape[0], 65536):
    total += float(np.asarray(X[start:start + 65536]).sum())
print(total)
"""


def main(data_dir: str | None = None) -> None:
    folder = Path(data_dir or Path(tempfile.gettempdir()) / "owl-eval-full-size")
    make(folder)
    work = Path(tempfile.mkdtemp(prefix="owl-eval-bench-"))
    common = [f"tracking.store_dir={work / 'store'}", "progress=false", "figures=false"]
    runs = {
        "reference: np.load(mmap_mode='r') + one pass": [sys.executable, "-c", REFERENCE, str(folder)],
        "OND, domain=dataset, ond/sklearn GaussianNB": [
            sys.executable,
            "-m",
            "owl_eval",
            "+experiment=ond_system_detection",
            "domain=dataset",
            f"domain.path={folder}",
            "agent=ond/sklearn",
            "~agent.classifier._args_",
            "agent.classifier._target_=sklearn.naive_bayes.GaussianNB",
            "agent.novelty=max_softmax",
            "baseline=none",
            *common,
        ],
        "continual, domain=split_dataset, 50 tasks x 2 classes, continual/sklearn": [
            sys.executable,
            "-m",
            "owl_eval",
            "+experiment=continual_split_digits",
            "domain=split_dataset",
            f"domain.path={folder}",
            "domain.classes_per_task=2",
            "agent=continual/sklearn",
            "agent.epochs=1",
            *common,
        ],
    }
    print(f"data: {folder} ({N:,} x {D} float32, {C} classes, {N * D * 4 / 2**20:.0f} MiB); {os.cpu_count()} cores")
    reference = None
    for name, cmd in runs.items():
        seconds, peak, tail = measured(cmd, work)
        reference = reference or (seconds, peak)
        print(
            f"{name}\n  wall {seconds:7.1f} s ({seconds / reference[0]:5.1f} x reference)   "
            f"peak memory {peak:7.0f} MiB ({peak / reference[1]:4.1f} x reference)"
        )
        if tail and not name.startswith("reference"):
            print("  " + tail.replace("\n", "\n  "))


if __name__ == "__main__":
    main(*sys.argv[1:2])
