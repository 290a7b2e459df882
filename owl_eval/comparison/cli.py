"""``owl-eval-compare``: the comparison of runs already in a store, printed, and written with ``--out``::

    owl-eval-compare experiment=ond_system_detection [--tag agent=ond/knn_novelty] [--metrics top1,oscr]
        [--sweep PARENT_RUN_ID] [--group protocol.condition] [--uri sqlite:////abs/mlflow.db | --store-dir DIR]
        [--out DIR]

Prints the headline table, a line per pair of agents and the verdict rows; ``--out DIR`` writes every file a sweep
writes (:mod:`owl_eval.comparison.outputs`: report.html, comparison.md/.csv, verdict.csv/.json/.tex, figures).
Reads the store (owl_eval.tracking) with the runner's store resolution (default ``<cwd>/outputs/mlflow.db``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from owl_eval.comparison import text
from owl_eval.comparison.grouping import grouping_keys, with_required
from owl_eval.comparison.model import Comparison
from owl_eval.comparison.outputs import write_files
from owl_eval.comparison.store import load, sweep_selection
from owl_eval.errors import ConfigError
from owl_eval.tracking.reading import experiment_runs
from owl_eval.tracking.settings import TrackingSettings, sqlite_uri
from owl_eval.tracking.store import check_sqlite_store, make_client

USAGE = __doc__.split("::", 1)[1].split("Prints", 1)[0].strip("\n")
VALUED_FLAGS = ("--tag", "--metrics", "--sweep", "--group", "--uri", "--store-dir", "--out")


def parse_args(argv: Sequence[str]) -> dict:
    opts: dict = {
        "tags": {},
        "metrics": None,
        "experiment": None,
        "sweep": None,
        "group": None,
        "uri": None,
        "store_dir": None,
        "out": None,
    }
    args = list(argv)
    given: dict[str, tuple[str, str]] = {}  # option (a --tag per key) -> (its value, the text as given)
    while args:
        a = args.pop(0)
        flag, _, inline = a.partition("=") if a.startswith("--") else (a, "", "")
        if a in ("-h", "--help"):
            print(f"usage:\n{USAGE}")
            raise SystemExit(0)
        if flag in VALUED_FLAGS:
            written = a
            if not inline:
                if not args:
                    raise ConfigError(f"{flag} needs a value (owl-eval-compare -h shows the usage)")
                inline = args.pop(0)
                written = f"{a} {inline}"
            if flag == "--tag":
                key, sep, value = inline.partition("=")
                if not sep:
                    raise ConfigError(f"--tag wants key=value, got {inline!r}")
                _once(given, f"--tag {key}", value, written)
                opts["tags"][key] = value
            elif flag in ("--metrics", "--group"):
                _once(given, flag, inline, written)
                opts[flag[2:]] = [s for s in inline.split(",") if s]
            else:
                _once(given, flag, inline, written)
                opts[flag[2:].replace("-", "_")] = inline
        elif a.startswith("experiment=") or a.startswith("experiment_name="):
            _once(given, "experiment", a.split("=", 1)[1], a)
            opts["experiment"] = a.split("=", 1)[1]
        else:
            raise ConfigError(f"unknown argument {a!r} (owl-eval-compare -h shows the usage)")
    if not opts["experiment"] and not opts["sweep"]:
        raise ConfigError("name an experiment (experiment=NAME) or a sweep (--sweep PARENT_RUN_ID); -h shows the usage")
    return opts


def _once(given: dict[str, tuple[str, str]], option: str, value: str, written: str) -> None:
    """Remember ``option``'s value; the same option with another value given before is ambiguous (the last one
    would silently win): one error naming both as written."""
    if option in given and given[option][0] != value:
        raise ConfigError(
            f"{option} is given twice with different values: {given[option][1]!r} and {written!r}; give it once"
        )
    given.setdefault(option, (value, written))


def store_uri(opts: dict) -> str:
    """The store to read: ``--uri``, else ``MLFLOW_TRACKING_URI``, else ``mlflow.db`` in ``--store-dir`` (default
    ``./outputs``). Comparing only reads: a SQLite store that is not there is an error, never created (nor its
    folder), and a read-only store or file system is fine."""
    uri = opts["uri"] or os.environ.get("MLFLOW_TRACKING_URI")
    if uri:
        TrackingSettings(uri=uri).validate()
        if uri.startswith("sqlite:///"):
            check_sqlite_store(uri, must_exist=True, option="--store-dir (or --uri)")
        return uri
    folder = Path(opts["store_dir"] or "outputs").expanduser().absolute()
    uri = sqlite_uri(folder / "mlflow.db")
    check_sqlite_store(uri, must_exist=True, option="--store-dir (or --uri)")
    return uri


def main(argv: Sequence[str] | None = None) -> Comparison:
    opts = parse_args(sys.argv[1:] if argv is None else argv)
    client = make_client(store_uri(opts))
    group = ["agent", *(k for k in opts["group"] if k != "agent")] if opts["group"] else None
    if opts["sweep"]:
        runs, keys = sweep_selection(client, opts["sweep"], group=group, tags=opts["tags"])
        what = f"--sweep {opts['sweep']}"
    else:
        runs = experiment_runs(client, opts["experiment"], opts["tags"])
        keys = (with_required(runs, group) if group else grouping_keys(runs)) if runs else []
        what = f"experiment={opts['experiment']}"
    comparison = load(client, runs, keys, opts["metrics"], title=f"owl-eval comparison: {what}") if runs else None
    if comparison is None or not comparison.rows:
        raise ConfigError(f"no FINISHED job runs match {what}" + (f" with tags {opts['tags']}" if opts["tags"] else ""))
    print(text.to_markdown(comparison.headline or comparison.rows), end="")
    if comparison.verdicts:
        print(f"\nVerdicts ({text.TEST_NAME}; difference = agent - other, 95 % bootstrap CI):")
        print("\n".join(text.pair_lines(comparison.verdicts)))
        print("\n".join(text.verdict_line(v) for v in comparison.verdicts))
    if opts["out"]:
        folder = Path(opts["out"])
        try:
            names = write_files(folder, comparison)
        except OSError as exc:
            raise ConfigError(f"--out: cannot write into {str(folder)!r} ({exc.strerror})") from None
        print(f"written to {folder}: {', '.join(names)}")
    return comparison


def cli(argv: Sequence[str] | None = None) -> None:
    """``main`` with a user error as one ``error:`` line (exit status 1) instead of a traceback."""
    from owl_eval.tracking.redaction import remember_configured, scrub

    try:
        main(argv)
    except ValueError as exc:
        remember_configured(sys.argv[1:] if argv is None else argv)  # --uri's password, as owl-eval's own error line
        sys.exit(f"error: {scrub(str(exc))}")


if __name__ == "__main__":
    cli()
