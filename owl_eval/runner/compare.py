"""Compare runs across seeds, from an MLflow store: find the runs (an experiment, a sweep), compare them
(:mod:`owl_eval.runner.comparison`), log the table to a sweep's parent run, and the command line. The sweep
callback (logged to the parent run) and the command line use the same function::

    owl-eval-compare experiment=ond_system_detection [--tag agent=ond/knn_novelty] [--metrics top1,oscr]
        [--sweep PARENT_RUN_ID] [--group protocol.condition] [--uri sqlite:////abs/mlflow.db | --store-dir DIR]
        [--out DIR]

Prints the comparison table and the verdicts between its agents (:mod:`owl_eval.runner.verdicts`); ``--out``
writes both as files (comparison.csv/.md, verdict.csv/.json/.tex). Reads through ``MlflowClient`` with the runner's
store resolution (default ``<cwd>/outputs/mlflow.db``). What each MLflow key holds (its metric, direction, whether
it is a series or a headline metric) comes from the runs' ``metric_keys.json``
(:class:`~owl_eval.runner.key_index.StoredKeys`: one download per protocol and metric settings); runs logged before
that file existed are compared without directions, and one line on stderr says so.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from owl_eval.errors import ConfigError
from owl_eval.plots.compare import STATS, best_means, significant, to_csv, to_markdown  # noqa: F401 (re-exported)
from owl_eval.runner import verdicts
from owl_eval.runner.comparison import (  # noqa: F401  (re-exported for callers of runner.compare)
    REUSED_TAG_PREFIX,
    SWEEP_PARAMS_PARAM,
    Row,
    comparable_metrics,
    compare,
    grouping_keys,
    summarize,
    swept_keys,
    unindexed,
    with_required,
)
from owl_eval.runner.key_index import INDEX_ARTIFACT, StoredKeys
from owl_eval.runner.tracking import (
    RUN_KIND_TAG,
    TrackingSettings,
    filter_literal,
    make_client,
)


# -- finding runs ------------------------------------------------------------------------------------------
def _search(client, experiment_ids, filter_string: str) -> list:
    from mlflow.entities import ViewType

    out, token = [], None
    while True:
        page = client.search_runs(
            experiment_ids,
            filter_string=filter_string,
            run_view_type=ViewType.ACTIVE_ONLY,
            max_results=1000,
            page_token=token,
        )
        out.extend(page)
        token = page.token
        if not token:
            return out


def _get_run(client, run_id: str, what: str):
    from mlflow.exceptions import MlflowException

    try:
        return client.get_run(run_id)
    except MlflowException:
        raise ConfigError(f"{what}: no run {run_id!r} in this store") from None


def sweep_runs(client, parent_run_id: str) -> list:
    """The FINISHED job runs of a sweep: its children plus the finished runs a resumed sweep reused."""
    parent = _get_run(client, parent_run_id, "--sweep")
    parent_id = filter_literal(parent_run_id, what="--sweep")
    children = [
        r
        for r in _search(
            client,
            [parent.info.experiment_id],
            f"tags.`mlflow.parentRunId` = {parent_id} and attributes.status = 'FINISHED'",
        )
        if r.data.tags.get(RUN_KIND_TAG) != "reused"  # stands for a reused run, counted below as the original
    ]
    reused = [
        _get_run(client, k[len(REUSED_TAG_PREFIX) :], f"sweep {parent_run_id} tag {k}")
        for k in parent.data.tags
        if k.startswith(REUSED_TAG_PREFIX)
    ]
    return children + [r for r in reused if r.info.status == "FINISHED"]


def experiment_runs(client, experiment: str, tags: Mapping[str, str] | None = None) -> list:
    exp = client.get_experiment_by_name(experiment)
    if exp is None:
        names = [e.name for e in client.search_experiments()]
        raise ConfigError(f"experiment: no MLflow experiment {experiment!r} in this store; experiments: {names}")
    clauses = [f"tags.`{RUN_KIND_TAG}` = 'job'", "attributes.status = 'FINISHED'"]
    for key, value in (tags or {}).items():
        if "`" in key or not key:
            raise ConfigError(f"--tag: the tag name {key!r} cannot be searched for (empty or holds a backtick)")
        clauses.append(f"tags.`{key}` = {filter_literal(value, what=f'--tag {key}')}")
    return _search(client, [exp.experiment_id], " and ".join(clauses))


def sweep_selection(
    client,
    parent_run_id: str,
    *,
    overrides: Sequence[str] | None = None,
    sweeper_params: Mapping | None = None,
    group: Sequence[str] | None = None,
    tags: Mapping[str, str] | None = None,
) -> tuple[list, list[str]]:
    """A sweep's finished jobs (those with every tag of ``tags``) and the keys that group them:
    :func:`grouping_keys` (``group``: keys put first; a setting that differs still splits,
    :func:`with_required`); the swept keys come from the parent run's params (``sweep.overrides``,
    ``sweep.params``) unless given. ``([], [])`` when no job matches."""
    runs = [
        r for r in sweep_runs(client, parent_run_id) if all(r.data.tags.get(k) == v for k, v in (tags or {}).items())
    ]
    if not runs:
        return [], []
    params = _get_run(client, parent_run_id, "--sweep").data.params
    if overrides is None:
        overrides = params.get("sweep.overrides", "").split()
    if sweeper_params is None:
        sweeper_params = json.loads(params.get(SWEEP_PARAMS_PARAM) or "{}")
    swept = swept_keys(overrides, sweeper_params)
    keys = with_required(runs, group, swept) if group else grouping_keys(runs, swept)
    return runs, ["agent", *(k for k in keys if k != "agent")]


def sweep_comparison(client, parent_run_id: str, *, metrics: Sequence[str] | None = None, **selection) -> list[Row]:
    """The comparison of a sweep's finished jobs (:func:`sweep_selection`); [] when no job matches."""
    runs, keys = sweep_selection(client, parent_run_id, **selection)
    return stored_comparison(client, runs, keys, metrics) if runs else []


def stored_comparison(
    client, runs: Sequence, group_keys: Sequence[str], metrics: Sequence[str] | None = None
) -> list[Row]:
    """:func:`compare` of stored runs, with what their ``metric_keys.json`` says of each key; runs without one
    (logged before it existed) make one line on stderr."""
    keys = StoredKeys.of(client)
    rows = compare(runs, group_keys, metrics, keys)
    old = unindexed(runs, keys)
    if old:
        print(
            f"note: {len(old)} of {len(runs)} runs have no {INDEX_ARTIFACT} (logged before owl-eval wrote it): "
            "their metrics are compared without a better direction, series included",
            file=sys.stderr,
        )
    return rows


# -- output ----------------------------------------------------------------------------------------------
def as_metrics(rows: Sequence[Row]) -> dict[str, float]:
    """Parent-run metrics a person reads: ``<agent>[/<setting>]/<metric>`` for the headline metrics (the mean,
    rounded to its interval's digits) and ``<agent>[/<setting>]/n_seeds`` (:func:`owl_eval.runner.verdicts.
    headline_keys`). Every statistic at full precision is in the comparison CSV."""
    from owl_eval.runner.verdicts import headline_keys, headline_metrics

    return headline_keys(rows, headline_metrics(rows))


def log_to_parent(tracked_run, rows: Sequence[Row], *, figures: bool = True) -> None:
    """The table as parent metrics and artifacts (CSV, Markdown) plus the comparison figure (unless the sweep
    ran with ``figures=false``: matplotlib is then never imported, ~3 s of a small sweep)."""
    if not rows:
        return
    tracked_run.log_metrics(as_metrics(rows))
    tracked_run.log_text(to_csv(rows), "comparison/comparison.csv")
    tracked_run.log_text(to_markdown(rows), "comparison/comparison.md")
    if figures:
        from owl_eval.plots.compare import comparison_figure

        tracked_run.log_figures({"comparison": comparison_figure(rows)}, folder="comparison")


def summarize_sweep_with_verdicts(
    settings: TrackingSettings,
    launch_dir: str,
    parent_run_id: str,
    overrides: Sequence[str],
    sweeper_params: Mapping | None = None,
    *,
    figures: bool = True,
) -> tuple[list[Row], list]:
    """Called at the end of a sweep: compare its finished jobs, judge its agents against each other
    (:mod:`owl_eval.runner.verdicts`) and log both to the parent run (figures only with ``figures``, the
    sweep's own setting). Returns the comparison rows and the verdict rows.

    ``sweeper_params``: ``hydra.sweeper.params`` (sweeps declared in an experiment file); logged to the parent as
    ``sweep.params`` so that ``owl-eval-compare --sweep`` groups the same way.
    """
    from owl_eval.runner import verdicts
    from owl_eval.runner.tracking import TrackedRun

    client = make_client(settings.resolved_uri(launch_dir))
    if sweeper_params is not None:
        sweeper_params = {
            str(k): [str(x) for x in v] if isinstance(v, Sequence) and not isinstance(v, str) else str(v)
            for k, v in sweeper_params.items()
        }
        if SWEEP_PARAMS_PARAM not in client.get_run(parent_run_id).data.params:
            client.log_param(parent_run_id, SWEEP_PARAMS_PARAM, json.dumps(sweeper_params, sort_keys=True)[:6000])
    runs, keys = sweep_selection(client, parent_run_id, overrides=list(overrides), sweeper_params=sweeper_params)
    if not runs:
        return [], []
    rows = stored_comparison(client, runs, keys)
    parent = TrackedRun(client, parent_run_id)
    log_to_parent(parent, rows, figures=figures)
    vrows, values = verdicts.verdicts(runs, keys, rows)
    verdicts.log_to_parent(parent, vrows, values=values, figures=figures)
    return rows, vrows


def summarize_sweep(*args, **kwargs) -> list[Row]:
    """:func:`summarize_sweep_with_verdicts`, the comparison rows only."""
    return summarize_sweep_with_verdicts(*args, **kwargs)[0]


# -- command line ------------------------------------------------------------------------------------------
USAGE = __doc__.split("::", 1)[1].split("Reads", 1)[0].strip("\n")


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
    while args:
        a = args.pop(0)
        flag, _, inline = a.partition("=") if a.startswith("--") else (a, "", "")
        if a in ("-h", "--help"):
            print(f"usage:\n{USAGE}")
            raise SystemExit(0)
        if flag in ("--tag", "--metrics", "--sweep", "--group", "--uri", "--store-dir", "--out"):
            if not inline:
                if not args:
                    raise ConfigError(f"{flag} needs a value (owl-eval-compare -h shows the usage)")
                inline = args.pop(0)
            if flag == "--tag":
                key, sep, value = inline.partition("=")
                if not sep:
                    raise ConfigError(f"--tag wants key=value, got {inline!r}")
                opts["tags"][key] = value
            elif flag in ("--metrics", "--group"):
                opts[flag[2:]] = [s for s in inline.split(",") if s]
            else:
                opts[flag[2:].replace("-", "_")] = inline
        elif a.startswith("experiment=") or a.startswith("experiment_name="):
            opts["experiment"] = a.split("=", 1)[1]
        else:
            raise ConfigError(f"unknown argument {a!r} (owl-eval-compare -h shows the usage)")
    if not opts["experiment"] and not opts["sweep"]:
        raise ConfigError("name an experiment (experiment=NAME) or a sweep (--sweep PARENT_RUN_ID); -h shows the usage")
    return opts


def main(argv: Sequence[str] | None = None) -> list[Row]:
    import os

    opts = parse_args(sys.argv[1:] if argv is None else argv)
    settings = TrackingSettings(uri=opts["uri"] or os.environ.get("MLFLOW_TRACKING_URI"), store_dir=opts["store_dir"])
    client = make_client(settings.resolved_uri(os.getcwd()))
    group = ["agent", *(k for k in opts["group"] if k != "agent")] if opts["group"] else None
    if opts["sweep"]:
        runs, keys = sweep_selection(client, opts["sweep"], group=group, tags=opts["tags"])
        what = f"--sweep {opts['sweep']}"
    else:
        runs = experiment_runs(client, opts["experiment"], opts["tags"])
        keys = (with_required(runs, group) if group else grouping_keys(runs)) if runs else []
        what = f"experiment={opts['experiment']}"
    rows = stored_comparison(client, runs, keys, opts["metrics"]) if runs else []
    if not rows:
        raise ConfigError(f"no FINISHED job runs match {what}" + (f" with tags {opts['tags']}" if opts["tags"] else ""))
    print(to_markdown(rows), end="")
    vrows, _ = verdicts.verdicts(runs, keys, rows)
    if vrows:
        print("\nVerdicts (paired over seeds; difference = agent - other, 95 % bootstrap CI):")
        print("\n".join(verdicts.lines(vrows)))
    if opts["out"]:
        _write_verdicts(Path(opts["out"]), rows, vrows)
    return rows


def write_files(folder: Path, rows: Sequence[Row], vrows: Sequence = ()) -> list[str]:
    """The comparison (``comparison.csv``, ``comparison.md``) and the verdicts (``verdict.csv``, ``verdict.json``,
    ``verdict.tex``; none without verdicts) written into ``folder``, made if needed; returns the file names.
    ``owl-eval-compare --out`` and the end of a sweep (into its sweep directory) both write these."""
    from owl_eval.verdict import to_csv as verdict_csv
    from owl_eval.verdict import to_json, to_latex

    folder.mkdir(parents=True, exist_ok=True)
    files = {"comparison.csv": to_csv(rows), "comparison.md": to_markdown(rows)}
    if vrows:
        files |= {
            "verdict.csv": verdict_csv(vrows),
            "verdict.json": to_json(vrows),
            "verdict.tex": to_latex(list(vrows)),
        }
    for name, text in files.items():
        (folder / name).write_text(text)
    return list(files)


def _write_verdicts(folder: Path, rows: Sequence[Row], vrows: Sequence) -> None:
    """``--out DIR``: :func:`write_files`, then what was written."""
    try:
        names = write_files(folder, rows, vrows)
    except OSError as exc:
        raise ConfigError(f"--out: cannot write into {str(folder)!r} ({exc.strerror})") from None
    print(f"written to {folder}: {', '.join(names)}")


def cli(argv: Sequence[str] | None = None) -> None:
    """``main`` with a user error as one ``error:`` line (exit status 1) instead of a traceback."""
    try:
        main(argv)
    except ValueError as exc:
        sys.exit(f"error: {exc}")


if __name__ == "__main__":
    cli()
