"""What the command line prints when a run or a sweep ends: the headline metrics, where the run is and the
exact command that opens it.

Everything printed is read back from the tracking store (a printed number is the logged number), so a FAILED
or KILLED run shows what it logged before it ended. The Python API (``owl_eval.runner.api.run``) prints nothing.
"""

from __future__ import annotations

import math
import shlex
import shutil
import sys
import textwrap
from collections.abc import Callable, Mapping, Sequence

from owl_eval.stats import significant
from owl_eval.tracking.key_index import LoggedKey, download_index

TABLE_WIDTH = (60, 100, 160)  # the table's width: at least, when the terminal's is unknown, at most


def open_command(uri: str, experiment_id: str | None = None, run_id: str | None = None) -> str:
    """How to look at a store: ``mlflow ui --backend-store-uri <uri>`` for a local store, the run's page for a
    tracking server (http/https), else the URI itself."""
    from owl_eval.tracking.settings import redacted

    if uri.startswith(("http://", "https://")):
        page = redacted(uri).rstrip("/")  # http://user:***@host: a login's password is not printed either
        if experiment_id and run_id:
            page += f"/#/experiments/{experiment_id}/runs/{run_id}"
        return f"open {page}"
    if uri.startswith(("sqlite:", "file:", "/", "postgresql", "mysql", "mssql")):
        return f"mlflow ui --backend-store-uri {shlex.quote(redacted(uri))}"
    return f"tracking URI {redacted(uri)}"


def table_width() -> int:
    """The terminal's width ($COLUMNS, else the terminal, else 100), kept within 60..160 columns."""
    low, default, high = TABLE_WIDTH
    return min(max(shutil.get_terminal_size((default, 24)).columns, low), high)


def _cell_lines(value: str, room: int) -> list[str]:
    """A shown value as lines of at most ``room`` characters: an N/A reason is wrapped at spaces, never cut
    (a word longer than ``room``, e.g. a path, stays whole on its own line so that it can be copied)."""
    return textwrap.wrap(value, room, break_long_words=False, break_on_hyphens=False) or [value]


def headline_rows(
    index: Mapping[str, LoggedKey] | None, metrics: Mapping[str, float], tags: Mapping[str, str]
) -> list[tuple[str, str]]:
    """(key, shown value) of the headline metrics a run logged, in the order of its protocol's headline (the run's
    ``metric_keys.json``, ``index``, says which keys those are; None: a run without one shows none): the value to 3
    significant digits, or ``N/A (reason)``. Values fixed by construction are not logged, so not shown."""
    found: dict[str, tuple[tuple, str]] = {}
    for key, entry in (index or {}).items():
        if entry.headline_rank is None:
            continue
        order = (entry.headline_rank, entry.key.k or 0, key)  # min_ade_20 before min_ade_50
        if key in metrics:
            value = metrics[key]
            found[key] = order, significant(value) if math.isfinite(value) else str(value)
        elif f"na.{key}"[:250] in tags:
            reason = tags[f"na.{key}"[:250]]
            found[key] = order, f"N/A ({' '.join(reason.split())})"  # whole: the table wraps it
    return [(key, shown) for key, (_, shown) in sorted(found.items(), key=lambda item: item[1][0])]


def run_summary(client, run_id: str, uri: str, *, columns: int | None = None) -> str:
    """The end-of-run block of one run (about 15 lines), ``columns`` wide (default :func:`table_width`); a
    long N/A reason continues on the following lines, under the value column."""
    run = client.get_run(run_id)
    experiment = client.get_experiment(run.info.experiment_id)
    protocol = run.data.tags.get("protocol", "")
    rows = headline_rows(download_index(client, run_id), run.data.metrics, run.data.tags)
    width = max([len(k) for k, _ in rows] + [6])
    status = run.info.status
    lines = [f"{protocol or 'run'} {status}" + (f": {run.data.tags['error']}" if "error" in run.data.tags else "")]
    indent = 2 + width + 2
    room = max((columns or table_width()) - indent, 30)
    for key, value in rows:
        first, *more = _cell_lines(value, room)
        lines.append(f"  {key:<{width}}  {first}")
        lines += [" " * indent + line for line in more]
    if not rows:
        lines.append("  (no headline metric logged)")
    name = run.info.run_name or run_id
    lines.append(f"run: {experiment.name}/{name} ({run_id})")
    lines.append(open_command(uri, run.info.experiment_id, run_id))
    from owl_eval.tracking.redaction import scrub

    return scrub("\n".join(lines))  # an error tag written by any version may quote a tracking URI


def print_run_summaries(runs: Sequence, out=None) -> None:
    """Print the block of each run in ``runs`` (``tracking.StartedRun``); a store that cannot be read is one line."""
    from owl_eval.tracking.store import make_client

    out = out or sys.stdout
    for started in runs:
        try:
            text = run_summary(make_client(started.uri), started.run_id, started.uri)
        except Exception as exc:  # noqa: BLE001 - the run is logged; the summary is a convenience
            from owl_eval.tracking.redaction import scrub

            text = f"run: {started.experiment}/{started.run_name} ({started.run_id}); summary unavailable: {scrub(str(exc))}"
        print(text, file=out, flush=True)


def with_summary(execute_job: Callable, cfg, *, full: bool = True):
    """``console.user_facing`` of ``execute_job(cfg, started=started)``, then the summary of every run it started
    (FAILED ones too). In a sweep (``full=False``) a job prints only where its run is; the sweep's end prints the
    comparison."""
    from owl_eval.runner.cli.console import user_facing

    started: list = []
    try:
        return user_facing(lambda config: execute_job(config, started=started), cfg)
    finally:
        if full:
            print_run_summaries(started)
        else:
            for run in started:
                print(f"run: {run.experiment}/{run.run_name} ({run.run_id})", flush=True)


# -- end of a sweep --------------------------------------------------------------------------------------
