"""The MLflow UI over a store filled by a real small sweep, in headless Chromium: the runs table shows the
sweep's parent with its jobs nested under it, the compare page shows the jobs' names and metric values, and the
parent's run page shows the verdict of the pair above the fold, its report.html opens in the artifact view, and the
runs-table view the sweep saved shows the headline metrics as columns.

Screenshots land in the test's tmp dir and in outputs/test-artifacts/ (mlflow_ui_runs.png, mlflow_ui_compare.png).
"""

from __future__ import annotations

import json
import urllib.parse
import uuid
from pathlib import Path

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]
PROJECT_ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_MS = 90_000


def small_sweep(store: dict, name: str, sweep_dir: Path) -> None:
    """``python -m owl_eval -m ...``, in the test process (tests/inprocess.py)."""
    from tests.inprocess import run_module

    args = [
        "-m",
        "+experiment=ond_system_detection",
        "agent=ond/knn_novelty,ond/closed_world",
        "seed=0,1",
        "protocol.num_trials=3",
        "progress=false",
        f"tracking.uri={store['uri']}",
        f"tracking.artifact_location={store['artifacts']}",
        f"experiment_name={name}",
        f"hydra.sweep.dir={sweep_dir}",
    ]
    proc = run_module(
        "owl_eval",
        args,
        cwd=PROJECT_ROOT,
        env={"MLFLOW_DISABLE_TELEMETRY": "true"},
        unset=("OWL_EVAL_PARENT_RUN_ID",),
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]


def shown(value: float) -> str:
    """How the compare page prints a metric: rounded to 3 decimals, trailing zeros dropped."""
    return f"{round(value, 3):g}"


def close_assistant(page) -> None:
    """The 3.x UI opens an assistant side panel; close it (if there) so the tables get the width."""
    close = page.locator('button[data-component-id="mlflow.assistant.chat_panel.close"]')
    if close.count():
        close.first.click()


def test_runs_table_nesting_and_compare_page(
    mlflow_store, client, mlflow_server_factory, browser_page, save_screenshot, tmp_path
):
    name = f"ui-{uuid.uuid4().hex[:8]}"
    ui_ready = mlflow_server_factory(mlflow_store["uri"])  # starts while the sweep runs (one core each)
    small_sweep(mlflow_store, name, tmp_path / "sweep")
    exp = client.get_experiment_by_name(name)
    runs = client.search_runs([exp.experiment_id])
    (parent,) = [r for r in runs if r.data.tags["owl_eval.kind"] == "sweep"]
    children = sorted((r for r in runs if r.data.tags["owl_eval.kind"] == "job"), key=lambda r: r.info.run_name)
    assert len(children) == 4

    url = ui_ready()
    page = browser_page
    page.set_default_timeout(TIMEOUT_MS)

    # Runs table: only the parent is listed until it is expanded, then its four jobs appear under it.
    page.goto(f"{url}/#/experiments/{exp.experiment_id}/runs")
    page.get_by_text(parent.info.run_name, exact=True).wait_for()
    close_assistant(page)
    assert page.get_by_text(children[0].info.run_name, exact=True).count() == 0
    row = page.locator('[role="row"]', has_text=parent.info.run_name)
    row.locator('button[data-component-id*="runnamecellrenderer"]').first.click()
    for child in children:
        page.get_by_text(child.info.run_name, exact=True).wait_for()
    save_screenshot(page, "mlflow_ui_runs")

    # Compare page of the sweep's jobs: names, and one job's AUROC as printed in the metrics table.
    ids = urllib.parse.quote(json.dumps([c.info.run_id for c in children]))
    page.goto(f"{url}/#/compare-runs?runs={ids}&experiments={urllib.parse.quote(json.dumps([exp.experiment_id]))}")
    page.get_by_text(f"Comparing {len(children)} Runs").wait_for()
    for child in children:
        page.get_by_text(child.info.run_name, exact=True).first.wait_for()
    close_assistant(page)
    metric_row = page.get_by_text("auroc_novel", exact=True).first
    metric_row.wait_for()
    metric_row.scroll_into_view_if_needed()
    knn = next(c for c in children if c.data.tags["agent"] == "ond/knn_novelty")
    value = shown(knn.data.metrics["auroc_novel"])
    assert value not in ("0", "0.5", "1")  # a value that only this metric of this run is likely to print
    page.get_by_text(value, exact=True).first.wait_for()
    save_screenshot(page, "mlflow_ui_compare")

    # The sweep parent's run page at 1400x1000: the description's first line, the verdict of the pair, is visible
    # without scrolling or clicking ("Show more" folds the rest).
    page.set_viewport_size({"width": 1400, "height": 1000})
    page.goto(f"{url}/#/experiments/{exp.experiment_id}/runs/{parent.info.run_id}")
    close_assistant(page)
    rows = json.loads(
        Path(client.download_artifacts(parent.info.run_id, "comparison/verdict.json", str(tmp_path))).read_text()
    )
    top1 = next(r for r in rows if r["metric"] == "top1")
    assert (top1["agent"], top1["other"], top1["n_seeds"]) == ("closed_world", "knn_novelty", 2)
    summary = page.get_by_text("closed_world vs knn_novelty: no verdict possible: 2 seeds cannot reach p < 0.05")
    summary.first.wait_for()
    box = summary.first.bounding_box()
    assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= 1000, box  # above the fold
    assert summary.first.is_visible()
    save_screenshot(page, "mlflow_ui_verdict")

    # report.html in the artifact view (MLflow renders HTML artifacts in a frame): the verdict table is in it
    page.goto(f"{url}/#/experiments/{exp.experiment_id}/runs/{parent.info.run_id}/artifacts/comparison/report.html")
    frame = page.frame_locator("iframe").first
    verdict_table = frame.locator("#verdict-table")
    verdict_table.wait_for()
    text = verdict_table.inner_text()
    assert "Top-1 accuracy (higher is better)" in text and "closed_world" in text and "knn_novelty" in text
    save_screenshot(page, "mlflow_ui_report")
    # with figures on (the default), the parent also holds the figures
    drawn = {a.path for a in client.list_artifacts(parent.info.run_id, "comparison")}
    assert {"comparison/differences.png", "comparison/profile.png", "comparison/report.html"} <= drawn

    # The runs table shows no metric column until one is chosen: the view the sweep saved shows its headline ones
    # (the UI orders them by name and draws only the columns in sight: the first one is checked).
    view = json.loads(
        client.get_experiment(exp.experiment_id).tags[f"mlflow.sharedViewState.owl-eval-{parent.info.run_id}"]
    )
    columns = sorted(c.split("`")[1] for c in view["selectedColumns"])
    assert "top1" in columns and "knn_novelty/top1" in columns and "closed_world/top1" in columns
    # the parent's first column (the jobs' own names sort before it)
    first = next(c for c in columns if c.startswith("closed_world/"))
    page.goto(f"{url}/#/experiments/{exp.experiment_id}/runs?viewStateShareKey=owl-eval-{parent.info.run_id}")
    close_assistant(page)
    page.locator('[role="columnheader"]', has_text=first).first.wait_for()
    # the grid draws a row's pinned cells (the name) and its scrolled cells (the values) as two rows of one row-id
    row_id = page.locator('[role="row"]', has_text=parent.info.run_name).first.get_attribute("row-id")
    cells = " ".join(r.inner_text() for r in page.locator(f'[role="row"][row-id="{row_id}"]').all())
    # the parent's exact means in the cells in sight (values such as 0 print as "0", so at least two are matched)
    found = [c for c in columns if "/" in c and repr(parent.data.metrics[c]) in cells.split()]
    assert len(found) >= 2, cells
    save_screenshot(page, "mlflow_ui_runs_view")
