"""The one writer of a comparison: every file and artifact is made from the same :class:`Comparison`, by
:func:`files`, and then written into a folder (``owl-eval-compare --out DIR``, a sweep's folder) or logged to a
sweep's parent run (under ``comparison/``), so the two never differ.

Files: ``report.html`` (everything below, figures embedded, no network), ``comparison.md`` (headline metrics),
``comparison_details.md`` (the rest: detail, baseline and timing metrics), ``comparison.csv`` (every row, full
precision), ``verdict.csv`` / ``verdict.json`` (full precision), ``verdict.tex`` (a booktabs table float), and with
figures ``comparison.png``, ``differences.png``, ``profile.png``.

The parent run also gets exact metrics (:func:`parent_metrics`) and its description (:func:`owl_eval.comparison.text.
description`: a line per pair first, where the MLflow UI shows it without a click).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from owl_eval.comparison import text
from owl_eval.comparison.grouping import setting_label
from owl_eval.comparison.model import Comparison
from owl_eval.comparison.table import Row

FOLDER = "comparison"  # the parent run's artifact folder
DESCRIPTION_TAG = "mlflow.note.content"  # the run's description on its page in the MLflow UI
VIEW_KEY_PREFIX = "owl-eval-"  # + the parent run's id: the saved runs-table view of a sweep (runs_view)
VIEW_COLUMNS = 40


def _key_part(r: Row, keys: Sequence[str]) -> str:
    from owl_eval.tracking.keys import metric_key

    setting = "__".join(f"{name.replace('=', '-')}" for name in setting_label(r.setting, keys).split(", ") if name)
    return metric_key(r.agent + (f"/{setting}" if setting else ""))


def parent_metrics(rows: Sequence[Row]) -> dict[str, float]:
    """The sweep parent's metrics, exact (never rounded): for each agent (its label) and setting,
    ``<agent>[/<setting>]/<metric>`` the mean over seeds of each headline metric, ``.../<metric>/std``,
    ``.../<metric>/ci_low`` and ``.../<metric>/ci_high`` (the 95 % Student-t interval; left out where undefined: one
    seed), and ``<agent>[/<setting>]/n_seeds``."""
    keys = list(dict.fromkeys(k for r in rows for k, _ in r.setting))
    out: dict[str, float] = {}
    for r in rows:
        prefix = _key_part(r, keys)
        seeds = f"{prefix}/n_seeds"[:250]
        out[seeds] = max(out.get(seeds, 0), r.runs or r.n)
        if r.role != "headline" or r.n == 0 or not math.isfinite(r.mean):
            continue
        base = f"{prefix}/{r.metric}"
        out[base[:250]] = r.mean
        for name, value in (("std", r.std), ("ci_low", r.ci95_low), ("ci_high", r.ci95_high)):
            if math.isfinite(value):
                out[f"{base}/{name}"[:250]] = value
    return out


def runs_view(rows: Sequence[Row]) -> dict:
    """The runs table a reader wants for this comparison (the UI shows no metric column until chosen): the jobs'
    headline metrics and the parent's mean of each per agent (and setting), at most :data:`VIEW_COLUMNS` columns."""
    keys = list(dict.fromkeys(k for r in rows for k, _ in r.setting))
    measured = [r for r in rows if r.role == "headline" and r.n > 0]
    jobs = list(dict.fromkeys(r.metric for r in measured))
    means = list(dict.fromkeys(f"{_key_part(r, keys)}/{r.metric}"[:250] for r in measured))
    columns = [f"metrics.`{k}`" for k in [*jobs, *means][:VIEW_COLUMNS]]
    return {"selectedColumns": columns}


def figures(comparison: Comparison) -> dict[str, bytes]:
    """The figures as PNG bytes: ``comparison.png``, and with verdicts ``differences.png`` and ``profile.png``."""
    from owl_eval.comparison import figures as draw

    if not comparison.rows:
        return {}
    out = {"comparison.png": draw.png(draw.comparison_figure(comparison.rows))}
    if comparison.verdicts:
        out["differences.png"] = draw.png(draw.differences_figure(comparison.verdicts))
        first = comparison.verdicts[0]
        found = draw.profiles(dict(comparison.values), first.metric, first.higher_is_better)
        if found:
            out["profile.png"] = draw.png(draw.profile_figure(first.name, first.higher_is_better, found))
    return out


def files(comparison: Comparison, *, with_figures: bool = True) -> dict[str, str | bytes]:
    """Every file of the comparison, name -> content (see the module docstring); no verdict files without
    verdicts, no figures without ``with_figures`` (a sweep run with ``figures=false`` never imports matplotlib)."""
    from owl_eval.comparison.report import report_html

    rows, vrows = comparison.rows, comparison.verdicts
    out: dict[str, str | bytes] = {
        "comparison.md": text.to_markdown(comparison.headline or rows) + text.unfinished_note(comparison.unfinished),
        "comparison.csv": text.to_csv(rows),
    }
    if comparison.headline and comparison.details:
        out["comparison_details.md"] = text.to_markdown(comparison.details, title="Other metrics")
    if vrows:
        out |= {
            "verdict.csv": text.verdict_csv(vrows),
            "verdict.json": text.verdict_json(vrows),
            "verdict.tex": text.verdict_latex(vrows),
        }
    drawn = figures(comparison) if with_figures else {}
    out["report.html"] = report_html(comparison, drawn)
    return out | drawn


def write_files(folder: Path, comparison: Comparison, *, with_figures: bool = True) -> list[str]:
    """:func:`files` written into ``folder`` (made if needed); returns the file names."""
    folder.mkdir(parents=True, exist_ok=True)
    made = files(comparison, with_figures=with_figures)
    for name, content in made.items():
        path = folder / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return list(made)


def log_to_parent(tracked_run, comparison: Comparison, *, with_figures: bool = True) -> None:
    """The comparison on a sweep's parent run: :func:`parent_metrics`, the description, :func:`files` under
    ``comparison/`` (one upload), and the runs-table view with the headline columns (:func:`runs_view`), which the
    description links to."""
    if not comparison.rows:
        return
    tracked_run.log_metrics(parent_metrics(comparison.rows))
    view = tracked_run.share_runs_view(f"{VIEW_KEY_PREFIX}{tracked_run.run_id}", runs_view(comparison.rows))
    tracked_run.set_tags({DESCRIPTION_TAG: text.description(comparison.rows, comparison.verdicts, view=view)})
    tracked_run.log_files(lambda folder: write_files(folder, comparison, with_figures=with_figures), FOLDER)
