"""The MLflow UI over a store filled by a real small sweep, in headless Chromium: the runs table shows the
sweep's parent with its jobs nested under it, the compare page shows the jobs' names and metric values, and the
parent's run page shows the verdict table.

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
    small_sweep(mlflow_store, name, tmp_path / "sweep")
    exp = client.get_experiment_by_name(name)
    runs = client.search_runs([exp.experiment_id])
    (parent,) = [r for r in runs if r.data.tags["owl_eval.kind"] == "sweep"]
    children = sorted((r for r in runs if r.data.tags["owl_eval.kind"] == "job"), key=lambda r: r.info.run_name)
    assert len(children) == 4

    url = mlflow_server_factory(mlflow_store["uri"])
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

    # The sweep parent's run page shows the verdict table (its description, mlflow.note.content): the pair,
    # the headline metric and the seeds, as the verdict.json artifact holds them.
    page.goto(f"{url}/#/experiments/{exp.experiment_id}/runs/{parent.info.run_id}")
    close_assistant(page)
    page.get_by_text("Verdicts: agent vs other, paired over seeds").first.wait_for()
    table = json.loads(
        Path(client.download_artifacts(parent.info.run_id, "verdict/verdict.json", str(tmp_path))).read_text()
    )
    top1 = next(
        dict(zip(table["columns"], row)) for row in table["data"] if row[table["columns"].index("metric")] == "top1"
    )
    assert (top1["agent"], top1["other"], top1["n_seeds"]) == ("knn_novelty", "closed_world", 2)
    row = page.get_by_role("row").filter(has=page.get_by_role("cell", name="top1 ↑", exact=True))
    row.first.wait_for()
    text = row.first.inner_text()
    assert "knn_novelty" in text and "closed_world" in text and text.rstrip().endswith("2")  # 2 seeds
    # with figures on (the default), the parent also holds the verdict figures
    drawn = {a.path for a in client.list_artifacts(parent.info.run_id, "verdict")}
    assert {"verdict/differences.png", "verdict/profile.png", "verdict/verdict.csv", "verdict/verdict.json"} <= drawn
    save_screenshot(page, "mlflow_ui_verdict")
