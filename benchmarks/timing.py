"""Timing shared by the benchmark scripts (each runs as ``python benchmarks/<name>.py``, so this folder is on the
import path)."""

from __future__ import annotations

import statistics
import time


def median_time(fn, repeats: int = 3) -> tuple[float, float]:
    """Median wall-clock and median CPU seconds of ``repeats`` calls (CPU time is what to compare when
    other jobs share the machine: wall time then grows with the load average)."""
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return statistics.median(wall), statistics.median(cpu)
