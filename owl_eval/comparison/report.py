"""``report.html``: a comparison on one self-contained page (styles inline, figures embedded as PNG data, no script,
nothing fetched), so it opens from a sweep's folder, from ``owl-eval-compare --out DIR`` and in the MLflow UI's
artifact view alike. It shows what the other files hold, from the same rows: the line per pair, the verdict table,
the headline means per setting, the figures, and the other metrics folded away.
"""

from __future__ import annotations

import base64
import html
import math
from collections.abc import Mapping, Sequence

from owl_eval.comparison import text
from owl_eval.comparison.model import Comparison
from owl_eval.comparison.table import Row

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#1b1b1b;max-width:1200px}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}h3{font-size:1em}
table{border-collapse:collapse;margin:8px 0 16px;font-size:0.9em}
th,td{border-bottom:1px solid #ddd;padding:4px 10px;text-align:right;white-space:nowrap}
th:first-child,td:first-child{text-align:left}
th{background:#f3f3f3}
td.best{font-weight:bold}
.summary li{margin:4px 0}
.note{color:#555;font-size:0.85em;max-width:900px}
img{max-width:100%;border:1px solid #eee;margin:8px 0}
"""


def _e(value) -> str:
    return html.escape(str(value))


def _table(head: Sequence[str], body: Sequence[Sequence[tuple[str, str]]], *, table_id: str = "") -> str:
    """An HTML table; each body cell is (text, css class)."""
    ident = f' id="{table_id}"' if table_id else ""
    lines = [f"<table{ident}>", "<tr>" + "".join(f"<th>{_e(h)}</th>" for h in head) + "</tr>"]
    for row in body:
        cells = "".join(f'<td class="{cls}">{_e(value)}</td>' if cls else f"<td>{_e(value)}</td>" for value, cls in row)
        lines.append(f"<tr>{cells}</tr>")
    lines.append("</table>")
    return "\n".join(lines)


def _means(rows: Sequence[Row], table_id: str) -> list[str]:
    """:func:`owl_eval.comparison.text.means_tables` as HTML: one table per setting, the best mean bold, N/A reasons
    as numbered notes below."""
    found = text.means_tables(rows)
    out = []
    for i, table in enumerate(found.tables):
        if table.setting:
            out.append(f"<h3>{_e(table.setting)}</h3>")
        body = [[(name, ""), *((c, "best" if best else "") for c, best in cells)] for name, cells in table.lines]
        out.append(_table(["metric", *table.agents], body, table_id=table_id if i == 0 else ""))
    if found.reasons:
        out.append('<ol class="note">' + "".join(f"<li>{_e(r)}</li>" for r in found.reasons) + "</ol>")
    if found.nowhere:
        items = "".join(f"<li>{_e(', '.join(names))}: {_e(reason)}</li>" for reason, names in found.nowhere.items())
        out.append(f'<p class="note">N/A in every group (not compared):</p><ul class="note">{items}</ul>')
    return out


def _verdicts(vrows) -> str:
    with_setting = any(v.setting for v in vrows)
    head = (["setting"] if with_setting else []) + [
        "metric",
        "agent",
        "vs",
        "difference [95% CI]",
        "better",
        "P(better)",
        "p (Holm)",
        "seeds",
    ]
    body = []
    for v in vrows:
        cells = [(v.setting, "")] if with_setting else []
        cells += [(v.name_with_direction, ""), (v.agent, ""), (v.other, ""), (text.difference_text(v), "")]
        cells += [(text.better_text(v), "best" if v.better else "")]
        cells += [("n/a" if math.isnan(v.p_improvement) else f"{v.p_better:.2f}", "")]
        cells += [(text.p_text(v.p_holm), ""), (str(v.n_seeds), "")]
        body.append(cells)
    return _table(head, body, table_id="verdict-table")


def report_html(comparison: Comparison, figures: Mapping[str, bytes]) -> str:
    """The page (see the module docstring)."""
    rows, vrows = comparison.rows, comparison.verdicts
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(comparison.title)}</title>",
        f"<style>{STYLE}</style></head><body>",
        f"<h1>{_e(comparison.title)}</h1>",
    ]
    if vrows:
        parts += ['<h2>Verdict</h2><ul class="summary">']
        parts += [f"<li>{_e(line)}</li>" for line in text.pair_lines(vrows)]
        parts += ["</ul>", _verdicts(vrows)]
        parts.append(
            f'<p class="note">Difference = agent - other in the metric\'s units with its 95 % paired percentile-bootstrap '
            f"interval over seeds. Better: {_e(text.TEST_NAME)}, p &lt; {vrows[0].alpha:g}; none (too few seeds): no "
            "outcome of that many seeds could reach it. P(better): probability of improvement (Agarwal et al. 2021) of "
            "the better agent (of the left one where none is better).</p>"
        )
    headline = comparison.headline or list(rows)
    parts += ["<h2>Headline metrics</h2>", *_means(headline, "headline-table")]
    parts.append(f'<p class="note">{_e(text.LEGEND)}</p>')
    for name, data in figures.items():
        encoded = base64.b64encode(data).decode("ascii")
        parts.append(f'<img alt="{_e(name)}" src="data:image/png;base64,{encoded}">')
    if comparison.headline and comparison.details:
        parts += ["<details><summary>Other metrics (detail, baseline, timing)</summary>"]
        parts += _means(comparison.details, "details-table")
        parts.append("</details>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
