"""Compare runs across seeds: per group (agent, plus any other swept value) and metric, the mean, the
standard deviation and the 95 % Student-t confidence interval of the mean over seeds.

Used by the sweep callback at the end of a multirun (logged to the parent run) and from the shell::

    python -m runner.compare experiment=ond_system_detection [--tag agent=ond/knn_novelty] [--metrics top1,oscr]
        [--sweep PARENT_RUN_ID] [--group protocol.condition] [--uri sqlite:////abs/mlflow.db | --store-dir DIR]

Reads through ``MlflowClient`` with the runner's store resolution (default ``<cwd>/outputs/mlflow.db``).
"""
from __future__ import annotations

import csv
import io
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from runner.tracking import CONFIG_HASH_TAG, RUN_KIND_TAG, TrackingSettings, make_client, metric_key

REUSED_TAG_PREFIX = "owl_eval.reused."   # on a sweep parent: a finished run a resumed sweep reused
NOT_GROUPED = {"seed"}                   # what varies between the runs averaged together
STATS = ("mean", "std", "ci95_low", "ci95_high")


@dataclass(frozen=True)
class Row:
    """One group's summary of one metric over its runs (seeds)."""

    group: tuple[tuple[str, str], ...]   # ((key, value), ...), agent first
    metric: str
    direction: str                       # maximize | minimize | none
    n: int
    mean: float
    std: float
    ci95_low: float
    ci95_high: float

    @property
    def label(self) -> str:
        return group_label(self.group)


def group_label(group: Sequence[tuple[str, str]]) -> str:
    """A valid MLflow key fragment naming a group: ``ond.knn_novelty`` or ``ond.knn_novelty__condition-given``."""
    parts = [value.replace("/", ".") if key == "agent" else f"{key.rsplit('.', 1)[-1]}-{value}" for key, value in group]
    return metric_key("__".join(parts) or "all").replace("/", ".")


def summarize(values: Sequence[float]) -> tuple[int, float, float, float, float]:
    """n, mean, sample std (ddof=1), and the two-sided 95 % Student-t interval of the mean; NaN for n < 2."""
    from scipy.stats import t

    x = np.asarray(values, dtype=float)
    x = x[np.isfinite(x)]
    n = int(x.size)
    if n == 0:
        return 0, math.nan, math.nan, math.nan, math.nan
    mean = float(x.mean())
    if n == 1:
        return 1, mean, math.nan, math.nan, math.nan
    std = float(x.std(ddof=1))
    half = float(t.ppf(0.975, n - 1)) * std / math.sqrt(n)
    return n, mean, std, mean - half, mean + half


# -- which runs, which groups, which metrics -----------------------------------------------------------
def swept_keys(overrides: Iterable[str]) -> list[str]:
    """Keys a sweep varies (``agent=a,b``, ``protocol.num_trials=range(2,5)``), seed excluded, agent first."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parsed = OverridesParser.create().parse_overrides(list(overrides))
    keys = [o.key_or_group.lstrip("+~") for o in parsed if o.is_sweep_override()]
    keys = [k for k in keys if k not in NOT_GROUPED]
    return ["agent"] + [k for k in dict.fromkeys(keys) if k != "agent"]


def run_value(run, key: str) -> str:
    """A group key's value in a run: the tag of that name (agent, domain, condition...), else the param."""
    if key in run.data.tags:
        return run.data.tags[key]
    return run.data.params.get(key, "none")


def varying_keys(runs: Sequence, ignore_prefixes=("tracking.", "hydra.")) -> list[str]:
    """Params that differ between runs of the same agent (besides seed and bookkeeping): group by them too."""
    ignore = NOT_GROUPED | {"progress", "figures", "experiment_name"}
    by_agent: dict[str, list] = {}
    for r in runs:
        by_agent.setdefault(r.data.tags.get("agent", "none"), []).append(r)
    keys: list[str] = []
    for members in by_agent.values():
        names = set().union(*(r.data.params for r in members))
        for name in sorted(names):
            if name in ignore or name.startswith(ignore_prefixes) or name in keys:
                continue
            if len({r.data.params.get(name) for r in members}) > 1:
                keys.append(name)
    return ["agent", *keys]


def _declared(protocol: str, key: str):
    from metrics.registry import spec_for

    try:
        return spec_for(protocol, key.replace("_at_", "@"))
    except KeyError:
        return None


def metric_direction(protocol: str, key: str) -> str:
    spec = _declared(protocol, key)
    return spec.direction if spec is not None else "none"


def comparable_metrics(runs: Sequence, wanted: Sequence[str] | None = None) -> list[str]:
    """Scalar metrics to compare: those listed, else every declared metric the runs logged plus ``time/*``.

    Per-step series (``top1_batch``) are left out: a run's latest value of a series is not a summary.
    """
    logged: dict[str, None] = {}
    for r in runs:
        logged.update(dict.fromkeys(r.data.metrics))
    if wanted:
        keys = [metric_key(w) for w in wanted]
        missing = [k for k in keys if k not in logged]
        if missing:
            raise SystemExit(f"--metrics: {missing} not logged by these runs; logged: {sorted(logged)}")
        return keys
    protocols = {r.data.tags.get("protocol", "") for r in runs}
    keep = [k for k in logged if k.startswith("time/") or any(_declared(p, k) for p in protocols if p)]
    return sorted(keep, key=lambda k: (k.startswith("time/"), k.startswith("baseline."), "_at_" in k, k))


def dedupe(runs: Sequence) -> list:
    """One run per config (latest first wins): re-runs of an identical config must not count twice."""
    seen: set[str] = set()
    out = []
    for r in sorted(runs, key=lambda r: r.info.start_time or 0, reverse=True):
        h = r.data.tags.get(CONFIG_HASH_TAG) or r.info.run_id
        if h not in seen:
            seen.add(h)
            out.append(r)
    return out


def compare(runs: Sequence, group_keys: Sequence[str], metrics: Sequence[str] | None = None) -> list[Row]:
    """The comparison table: a Row per (group, metric), groups and metrics in a stable order."""
    runs = dedupe(runs)
    names = comparable_metrics(runs, metrics)
    groups: dict[tuple, list] = {}
    for r in runs:
        groups.setdefault(tuple((k, run_value(r, k)) for k in group_keys), []).append(r)
    rows = []
    for group in sorted(groups):
        members = groups[group]
        protocol = members[0].data.tags.get("protocol", "")
        for name in names:
            values = [r.data.metrics.get(name, math.nan) for r in members]
            rows.append(Row(group, name, metric_direction(protocol, name), *summarize(values)))
    return rows


# -- finding runs ------------------------------------------------------------------------------------------
def _search(client, experiment_ids, filter_string: str) -> list:
    from mlflow.entities import ViewType

    out, token = [], None
    while True:
        page = client.search_runs(experiment_ids, filter_string=filter_string, run_view_type=ViewType.ACTIVE_ONLY,
                                  max_results=1000, page_token=token)
        out.extend(page)
        token = page.token
        if not token:
            return out


def sweep_runs(client, parent_run_id: str) -> list:
    """The FINISHED job runs of a sweep: its children plus the finished runs a resumed sweep reused."""
    parent = client.get_run(parent_run_id)
    children = _search(client, [parent.info.experiment_id],
                       f"tags.`mlflow.parentRunId` = '{parent_run_id}' and attributes.status = 'FINISHED'")
    reused = [client.get_run(k[len(REUSED_TAG_PREFIX):]) for k in parent.data.tags if k.startswith(REUSED_TAG_PREFIX)]
    return children + [r for r in reused if r.info.status == "FINISHED"]


def experiment_runs(client, experiment: str, tags: Mapping[str, str] | None = None) -> list:
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        names = [e.name for e in client.search_experiments()]
        raise SystemExit(f"no MLflow experiment {experiment!r} in this store; experiments: {names}")
    clauses = [f"tags.`{RUN_KIND_TAG}` = 'job'", "attributes.status = 'FINISHED'"]
    clauses += [f"tags.`{k}` = '{v}'" for k, v in (tags or {}).items()]
    return _search(client, [exp.experiment_id], " and ".join(clauses))


# -- output ----------------------------------------------------------------------------------------------
def to_csv(rows: Sequence[Row]) -> str:
    keys = [k for k, _ in rows[0].group] if rows else ["agent"]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([*keys, "metric", "direction", "n", *STATS])
    for r in rows:
        w.writerow([*(v for _, v in r.group), r.metric, r.direction, r.n, *(repr(getattr(r, s)) for s in STATS)])
    return buf.getvalue()


def _cell(r: Row, best: bool) -> str:
    if r.n == 0:
        return "n/a"
    text = f"{r.mean:.4g}" if r.n < 2 else f"{r.mean:.4g} ± {r.mean - r.ci95_low:.2g}"
    text += f" (n={r.n})"
    return f"**{text}**" if best else text


def to_markdown(rows: Sequence[Row]) -> str:
    """Metrics down, groups across; ``mean ± CI half-width (n)``; the best mean in bold where a direction exists."""
    labels = list(dict.fromkeys(r.label for r in rows))
    metrics = list(dict.fromkeys(r.metric for r in rows))
    cell = {(r.metric, r.label): r for r in rows}
    arrows = {"maximize": "↑", "minimize": "↓", "none": ""}
    lines = ["| metric | better | " + " | ".join(labels) + " |", "|---|:-:|" + "---:|" * len(labels)]
    for m in metrics:
        found = [cell[(m, g)] for g in labels if (m, g) in cell]
        direction = found[0].direction
        means = [r.mean for r in found if r.n > 0]
        best = None
        if direction != "none" and len(means) > 1:
            best = max(means) if direction == "maximize" else min(means)
        cells = [_cell(cell[(m, g)], best is not None and cell[(m, g)].mean == best) if (m, g) in cell else "" for g in labels]
        lines.append(f"| {m} | {arrows[direction]} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def as_metrics(rows: Sequence[Row]) -> dict[str, float]:
    """Parent-run metrics ``<group>/<metric>/<stat>`` and ``<group>/n_runs``; non-finite values left out."""
    out: dict[str, float] = {}
    for r in rows:
        for stat in STATS:
            value = getattr(r, stat)
            if math.isfinite(value):
                out[f"{r.label}/{r.metric}/{stat}"[:250]] = value
        out[f"{r.label}/n_runs"] = max(out.get(f"{r.label}/n_runs", 0), r.n)
    return out


def log_to_parent(tracked_run, rows: Sequence[Row]) -> None:
    """The table as parent metrics and artifacts (CSV, Markdown) plus the comparison figure."""
    from runner.plots.compare import comparison_figure

    if not rows:
        return
    tracked_run.log_metrics(as_metrics(rows))
    tracked_run.log_text(to_csv(rows), "comparison/comparison.csv")
    tracked_run.log_text(to_markdown(rows), "comparison/comparison.md")
    tracked_run.log_figures({"comparison": comparison_figure(rows)}, folder="comparison")


def summarize_sweep(settings: TrackingSettings, launch_dir: str, parent_run_id: str, overrides: Sequence[str]) -> list[Row]:
    """Called at the end of a sweep: compare its finished jobs and log the result to the parent run."""
    from runner.tracking import TrackedRun

    client = make_client(settings.resolved_uri(launch_dir))
    runs = sweep_runs(client, parent_run_id)
    if not runs:
        return []
    rows = compare(runs, swept_keys(overrides))
    log_to_parent(TrackedRun(client, parent_run_id), rows)
    return rows


# -- command line ------------------------------------------------------------------------------------------
USAGE = __doc__.split("::", 1)[1].split("Reads", 1)[0].strip("\n")


def parse_args(argv: Sequence[str]) -> dict:
    opts: dict = {"tags": {}, "metrics": None, "experiment": None, "sweep": None, "group": None, "uri": None, "store_dir": None}
    args = list(argv)
    while args:
        a = args.pop(0)
        flag, _, inline = a.partition("=") if a.startswith("--") else (a, "", "")
        if a in ("-h", "--help"):
            raise SystemExit(f"usage:\n{USAGE}")
        if flag in ("--tag", "--metrics", "--sweep", "--group", "--uri", "--store-dir"):
            if not inline:
                if not args:
                    raise SystemExit(f"{flag} needs a value")
                inline = args.pop(0)
            if flag == "--tag":
                key, sep, value = inline.partition("=")
                if not sep:
                    raise SystemExit(f"--tag wants key=value, got {inline!r}")
                opts["tags"][key] = value
            elif flag in ("--metrics", "--group"):
                opts[flag[2:]] = [s for s in inline.split(",") if s]
            else:
                opts[flag[2:].replace("-", "_")] = inline
        elif a.startswith("experiment=") or a.startswith("experiment_name="):
            opts["experiment"] = a.split("=", 1)[1]
        else:
            raise SystemExit(f"unknown argument {a!r}\nusage:\n{USAGE}")
    if not opts["experiment"] and not opts["sweep"]:
        raise SystemExit(f"name an experiment (experiment=NAME) or a sweep (--sweep PARENT_RUN_ID)\nusage:\n{USAGE}")
    return opts


def main(argv: Sequence[str] | None = None) -> list[Row]:
    import os

    opts = parse_args(sys.argv[1:] if argv is None else argv)
    settings = TrackingSettings(uri=opts["uri"] or os.environ.get("MLFLOW_TRACKING_URI"), store_dir=opts["store_dir"])
    client = make_client(settings.resolved_uri(os.getcwd()))
    if opts["sweep"]:
        runs = sweep_runs(client, opts["sweep"])
        overrides = client.get_run(opts["sweep"]).data.params.get("sweep.overrides", "").split()
        group = opts["group"] or swept_keys(overrides)
    else:
        runs = experiment_runs(client, opts["experiment"], opts["tags"])
        group = opts["group"] or varying_keys(runs)
    group = ["agent", *(k for k in group if k != "agent")]
    if opts["tags"]:
        runs = [r for r in runs if all(r.data.tags.get(k) == v for k, v in opts["tags"].items())]
    if not runs:
        raise SystemExit("no FINISHED job runs match")
    rows = compare(runs, group, opts["metrics"])
    print(to_markdown(rows), end="")
    return rows


if __name__ == "__main__":
    main()
