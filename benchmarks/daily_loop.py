"""The daily loop's figures (issue 31), each a whole command timed from outside, printed with its target and ratio:

a. refusing a bad config value, ``python -m owl_eval +experiment=ond_given_detection protocol.batch_size=oops``
   (target < 1.5 s), and ``python -m owl_eval --help`` (target < 1 s);
b. the smallest run, ``python -m owl_eval +experiment=ond_given_detection protocol.num_trials=2``, in a folder whose
   store exists, against the import line ``python -c 'import mlflow, hydra, sklearn, matplotlib.pyplot,
   scipy.stats'``, run in turn (A B A B ...) so that both see the same load: the median of the pairs' ratios
   (target <= 1.2);
c. re-running a joblib sweep of 40 jobs that are all finished
   (``-m hydra/launcher=joblib +experiment=ond_given_detection seed='range(40)' protocol.num_trials=2
   progress=false figures=false``): launched once to finish its jobs (printed, not the figure), then re-launched
   and timed (target < 10 s), and once under Hydra's basic sweeper (``hydra/sweeper=basic``: every job launched and
   finding its finished run itself), the ratio's reference;
d. the README's test command: measured in a fresh clone, not here (printed: how).

Wall time grows with the machine's load: each figure is printed with the 1-minute load average before and after it,
and with its CPU seconds (user + system of the command and every process it waited for), which the load moves far
less. Quote the median; min and max show the spread.

Usage: python benchmarks/daily_loop.py [--quick] [--repeats N] [--jobs N] [--only abcd] [--folder DIR]
``--quick`` (a few minutes on 2 cores): 3 repeats and a 10-job sweep, whose re-run is a quick look at the per-job
cost, not the 40-job figure.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

IMPORT_LINE = "import mlflow, hydra, sklearn, matplotlib.pyplot, scipy.stats"
EXPERIMENT = "+experiment=ond_given_detection"
CONFIG_ERROR = [EXPERIMENT, "protocol.batch_size=oops"]
SMALLEST = [EXPERIMENT, "protocol.num_trials=2"]
SWEEP = ["-m", "hydra/launcher=joblib", EXPERIMENT, "protocol.num_trials=2", "progress=false", "figures=false"]
TEST_COMMAND = "python -m pytest"

CONFIG_ERROR_TARGET_S = 1.5
HELP_TARGET_S = 1.0
SMALLEST_RATIO_TARGET = 1.2
SWEEP_RERUN_TARGET_S = 10.0
SWEEP_TARGET_JOBS = 40


@dataclass(frozen=True)
class Timing:
    """One finished command: wall seconds, CPU seconds (it and the processes it waited for), its exit code and
    its output (stdout then stderr)."""

    wall: float
    cpu: float
    code: int
    output: str


@dataclass(frozen=True)
class Spread:
    """Median, min and max of a list of figures."""

    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        return cls(statistics.median(values), min(values), max(values))

    def __str__(self) -> str:
        return f"{self.median:.2f} (min {self.low:.2f}, max {self.high:.2f})"


def owl_eval(*args: str) -> list[str]:
    """The command line ``python -m owl_eval ARGS`` with this interpreter."""
    return [sys.executable, "-m", "owl_eval", *args]


def job_environment() -> dict[str, str]:
    """This process's environment, without a sweep parent inherited from a caller (a benchmark run from a job)."""
    env = {**os.environ, "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("OWL_EVAL_PARENT_RUN_ID", None)
    return env


def timed(cmd: list[str], cwd: Path) -> Timing:
    """Run ``cmd`` in ``cwd`` to its end: its wall seconds, and its CPU seconds read from the children's resource
    usage (which counts the job processes it forks and reaps too)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=job_environment(), capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Timing(wall, cpu, proc.returncode, proc.stdout + proc.stderr)


def checked(timing: Timing, cmd: list[str], *, code: int = 0, says: str | None = None) -> Timing:
    """``timing``, after checking the command ended as expected (exit ``code``, ``says`` in its output)."""
    if timing.code != code or (says is not None and says not in timing.output):
        expected = f"exit {code}" + (f" and {says!r} in its output" if says else "")
        raise SystemExit(f"{' '.join(cmd)}: expected {expected}, got exit {timing.code}:\n{timing.output[-3000:]}")
    return timing


def repeated(cmd: list[str], cwd: Path, repeats: int, *, code: int = 0, says: str | None = None) -> list[Timing]:
    """``repeats`` checked runs of ``cmd`` after one warm-up run (files cached, bytecode compiled) not counted."""
    checked(timed(cmd, cwd), cmd, code=code, says=says)
    return [checked(timed(cmd, cwd), cmd, code=code, says=says) for _ in range(repeats)]


def in_turn(a: list[str], b: list[str], cwd: Path, repeats: int) -> list[tuple[Timing, Timing]]:
    """``repeats`` pairs of runs, A then B, after one warm-up pair: a pair's ratio compares the two under the same
    load, where a drifting load would move one median and not the other."""
    checked(timed(a, cwd), a)
    checked(timed(b, cwd), b)
    return [(checked(timed(a, cwd), a), checked(timed(b, cwd), b)) for _ in range(repeats)]


def load() -> str:
    """The 1-minute load average and the number of cores, as printed with each figure."""
    return f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"


def verdict(value: float, target: float, *, at_most: bool = False) -> str:
    """``met`` or ``NOT met`` for ``value`` against ``target`` (strictly below it, or at most it)."""
    met = value <= target if at_most else value < target
    return "met" if met else "NOT met"


def config_error_and_help(folder: Path, repeats: int) -> None:
    """Figure a: the config error and ``--help``, each its own median."""
    print(f"a. config error and --help ({load()})")
    error = repeated(owl_eval(*CONFIG_ERROR), folder, repeats, code=1, says="protocol.batch_size")
    wall = Spread.of([t.wall for t in error])
    print(f"   {' '.join(CONFIG_ERROR)}: wall {wall} s, cpu {Spread.of([t.cpu for t in error])} s")
    print(f"   target < {CONFIG_ERROR_TARGET_S} s: {verdict(wall.median, CONFIG_ERROR_TARGET_S)}")
    shown = repeated(owl_eval("--help"), folder, repeats, says="Configuration groups")
    wall = Spread.of([t.wall for t in shown])
    print(f"   --help: wall {wall} s, cpu {Spread.of([t.cpu for t in shown])} s")
    print(f"   target < {HELP_TARGET_S} s: {verdict(wall.median, HELP_TARGET_S)}   ({load()})")


def smallest_run(folder: Path, repeats: int) -> None:
    """Figure b: the smallest run against the import line, in turn, into a store that exists."""
    print(f"b. smallest run against the import line ({load()})")
    first = checked(timed(owl_eval(*SMALLEST), folder), owl_eval(*SMALLEST))
    print(f"   the first run in a new folder (creates the SQLite store, not the figure): {first.wall:.2f} s")
    pairs = in_turn(owl_eval(*SMALLEST), [sys.executable, "-c", IMPORT_LINE], folder, repeats)
    runs, imports = [a for a, _ in pairs], [b for _, b in pairs]
    ratio = Spread.of([a.wall / b.wall for a, b in pairs])
    print(
        f"   {' '.join(SMALLEST)}: wall {Spread.of([t.wall for t in runs])} s, cpu {Spread.of([t.cpu for t in runs])} s"
    )
    print(
        f"   import line ({IMPORT_LINE}): wall {Spread.of([t.wall for t in imports])} s, cpu {Spread.of([t.cpu for t in imports])} s"
    )
    print(f"   ratio run / import line, pair by pair: wall {ratio}, cpu {Spread.of([a.cpu / b.cpu for a, b in pairs])}")
    print(
        f"   target <= {SMALLEST_RATIO_TARGET}: {verdict(ratio.median, SMALLEST_RATIO_TARGET, at_most=True)}   ({load()})"
    )


def sweep_rerun(folder: Path, jobs: int, repeats: int) -> None:
    """Figure c: a joblib sweep launched once to finish its jobs, then launched again ``repeats`` times and timed;
    beside it, once, the same re-run under Hydra's basic sweeper (every job launched, each finding its finished run
    itself: the path of any sweeper but owl-eval's), the reference of the ratio."""
    print(f"c. re-running a finished {jobs}-job joblib sweep ({load()})")
    cmd = owl_eval(*SWEEP, f"seed=range({jobs})")
    first = checked(timed(cmd, folder), cmd)
    print(f"   first launch (runs the jobs, not the figure): {first.wall:.1f} s, cpu {first.cpu:.1f} s   ({load()})")
    again = [checked(timed(cmd, folder), cmd, says=f"reused {jobs} finished runs") for _ in range(repeats)]
    wall = Spread.of([t.wall for t in again])
    print(f"   re-run, every job reused: wall {wall} s, cpu {Spread.of([t.cpu for t in again])} s   ({load()})")
    basic = owl_eval(*SWEEP, f"seed=range({jobs})", "hydra/sweeper=basic")
    reference = checked(timed(basic, folder), basic, says=f"reused {jobs} finished runs")
    print(
        f"   the same under hydra/sweeper=basic (each job launched): wall {reference.wall:.1f} s, "
        f"cpu {reference.cpu:.1f} s; ratio {wall.median / reference.wall:.2f}   ({load()})"
    )
    if jobs == SWEEP_TARGET_JOBS:
        print(f"   target < {SWEEP_RERUN_TARGET_S:g} s: {verdict(wall.median, SWEEP_RERUN_TARGET_S)}")
    else:
        print(f"   ({jobs} jobs: a quick look; the target, < {SWEEP_RERUN_TARGET_S:g} s, is for {SWEEP_TARGET_JOBS})")


def test_command() -> None:
    """Figure d: how to measure the README's test command (a fresh clone, 2 cores)."""
    print("d. the README's test command (target < 3 minutes on 2 cores): measured in a fresh clone, e.g.")
    print("   git clone <repo> /tmp/fresh && cd /tmp/fresh && python -m venv .venv && . .venv/bin/activate")
    print('   pip install -e ".[all]" && /usr/bin/time -v taskset -c 0,1 ' + TEST_COMMAND)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="3 repeats and a 10-job sweep (a few minutes on 2 cores)")
    ap.add_argument("--repeats", type=int, help="runs counted per command (default 7, 3 with --quick)")
    ap.add_argument("--jobs", type=int, help=f"jobs of the sweep (default {SWEEP_TARGET_JOBS}, 10 with --quick)")
    ap.add_argument("--only", default="abcd", help="the figures to measure, e.g. 'ab' (default: abcd)")
    ap.add_argument("--folder", help="where the commands run and the store is made (default: a new temporary one)")
    args = ap.parse_args()
    repeats = args.repeats or (3 if args.quick else 7)
    jobs = args.jobs or (10 if args.quick else SWEEP_TARGET_JOBS)
    folder = Path(args.folder or tempfile.mkdtemp(prefix="owl-eval-daily-")).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    print(f"folder {folder}, {repeats} runs counted per command, medians with (min, max)")
    if "a" in args.only:
        config_error_and_help(folder, repeats)
    if "b" in args.only:
        smallest_run(folder, repeats)
    if "c" in args.only:
        sweep_rerun(folder, jobs, max(1, repeats // 2))
    if "d" in args.only:
        test_command()


if __name__ == "__main__":
    main()
