"""Sweeps through the real CLI: parallel jobs lose nothing, launchers give identical numbers, the parent
run gets the comparison over seeds, job logs are attached, and a re-run skips finished configs.

The store is read back with plain sqlite3 (not MlflowClient) so that what is counted is what is on disk.
"""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import uuid
from pathlib import Path

import pytest

PROJECT_ROOT = Path(__file__).resolve().parents[2]
AGENTS = ("ond/knn_novelty", "ond/closed_world")
README_SWEEP = (
    "python -m owl_eval -m +experiment=ond_system_detection agent=ond/knn_novelty,ond/closed_world seed=0,1,2"
)
SMALL = [
    "protocol.num_trials=3",
    "protocol.pre_novelty=20",
    "protocol.post_novelty=40",
    "figures=false",
    "progress=false",
]


def sweep(store: dict, name: str, sweep_dir: Path, *extra: str, check: bool = True) -> subprocess.CompletedProcess:
    """``python -m owl_eval -m ...``: in the test process (tests/inprocess.py), or, when a launcher that starts
    worker processes is chosen, in a new interpreter (its stderr then shows what the workers' resource tracker
    reports at the end)."""
    from tests.inprocess import run_module

    args = [
        "-m",
        "+experiment=ond_system_detection",
        f"tracking.uri={store['uri']}",
        f"tracking.artifact_location={store['artifacts']}",
        f"experiment_name={name}",
        f"hydra.sweep.dir={sweep_dir}",
        *extra,
    ]
    proc = run_module(
        "owl_eval",
        args,
        cwd=PROJECT_ROOT,
        env={"MLFLOW_DISABLE_TELEMETRY": "true"},
        unset=("OWL_EVAL_PARENT_RUN_ID",),
        timeout=600,
        in_process=False if any(a.startswith("hydra/launcher=") for a in extra) else None,
    )
    if check:
        assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def snapshot(store: dict, name: str) -> dict:
    """Every run of an experiment straight from the SQLite file: status, tags, params, full metric history."""
    con = sqlite3.connect(store["uri"][len("sqlite:///") :])
    try:
        (exp_id,) = con.execute("select experiment_id from experiments where name = ?", (name,)).fetchone()
        runs = {}
        for run_id, status in con.execute("select run_uuid, status from runs where experiment_id = ?", (exp_id,)):
            tags = dict(con.execute("select key, value from tags where run_uuid = ?", (run_id,)))
            params = dict(con.execute("select key, value from params where run_uuid = ?", (run_id,)))
            history: dict[str, list] = {}
            for key, value, step, is_nan in con.execute(
                "select key, value, step, is_nan from metrics where run_uuid = ? order by key, step", (run_id,)
            ):
                history.setdefault(key, []).append((step, math.nan if is_nan else value))
            runs[run_id] = {"id": run_id, "status": status, "tags": tags, "params": params, "metrics": history}
        return runs
    finally:
        con.close()


def jobs_by_config(runs: dict) -> dict:
    return {
        (r["tags"]["agent"], int(r["tags"]["seed"])): r
        for r in runs.values()
        if r["tags"].get("owl_eval.kind") == "job"
    }


def only_parent(runs: dict) -> tuple[str, dict]:
    parents = [(k, r) for k, r in runs.items() if r["tags"].get("owl_eval.kind") == "sweep"]
    assert len(parents) == 1
    return parents[0]


def comparable(run: dict) -> tuple[dict, dict]:
    """Params and metrics that must not depend on the launcher (names and timings excluded)."""
    params = {k: v for k, v in run["params"].items() if "experiment_name" not in k}
    metrics = {k: v for k, v in run["metrics"].items() if not k.startswith("time/")}
    return params, metrics


def same_history(a: list, b: list) -> bool:
    return len(a) == len(b) and all(
        sa == sb and (va == vb or (math.isnan(va) and math.isnan(vb))) for (sa, va), (sb, vb) in zip(a, b)
    )


def readme_sweep_lines() -> tuple[str, str]:
    """The README's sweep of two agents over three seeds, on the basic launcher and on joblib's."""
    from tests.runner.test_readme import bash_lines

    sweeps = [line.split(" #")[0].strip() for line in bash_lines() if line.startswith(README_SWEEP)]
    basic = next(line for line in sweeps if line == README_SWEEP)
    joblib = next(line for line in sweeps if line == f"{README_SWEEP} hydra/launcher=joblib")
    return basic, joblib


def hand_stats(values: list[float]) -> tuple[float, float, float, float]:
    """Mean, sample std and 95 % Student-t interval, written out with plain loops."""
    from scipy.stats import t

    n = len(values)
    mean = sum(values) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = t.ppf(0.975, n - 1) * std / math.sqrt(n)
    return mean, std, mean - half, mean + half


@pytest.mark.slow
def test_sweep_parent_gets_comparison_and_rerun_skips_finished(mlflow_store, client, tmp_path):
    name = f"resume-{uuid.uuid4().hex[:8]}"
    args = [f"agent={','.join(AGENTS)}", "seed=0,1,2", *SMALL]
    first_proc = sweep(mlflow_store, name, tmp_path / "first", *args)
    first = snapshot(mlflow_store, name)
    parent_id, parent = only_parent(first)
    jobs = jobs_by_config(first)
    assert len(jobs) == 6
    # Parent metrics = per-agent means over the 3 seeds, exact, under <agent>/<metric>, with /std, /ci_low and
    # /ci_high (recomputed here from the children with plain loops), and <agent>/n_seeds.
    for agent in AGENTS:
        short = agent.split("/")[1]
        for metric in ("top1", "oscr", "m21_fp_pct"):
            values = [jobs[(agent, s)]["metrics"][metric][0][1] for s in range(3)]
            mean, std, low, high = hand_stats(values)
            logged = {
                stat: parent["metrics"][f"{short}/{metric}{stat}"][0][1] for stat in ("", "/std", "/ci_low", "/ci_high")
            }
            assert logged == pytest.approx(
                {"": mean, "/std": std, "/ci_low": low, "/ci_high": high}, rel=1e-9, abs=1e-12
            )
        assert parent["metrics"][f"{short}/n_seeds"][0][1] == 3
        assert not [k for k in parent["metrics"] if k.startswith("ond.")]
    # Verdicts: closed_world vs knn_novelty (labels in sorted order), paired over the 3 seeds; recomputed by hand.
    rows = json.loads(Path(client.download_artifacts(parent_id, "comparison/verdict.json", str(tmp_path))).read_text())
    top1 = next(r for r in rows if r["metric"] == "top1")
    knn = [jobs[("ond/knn_novelty", s)]["metrics"]["top1"][0][1] for s in range(3)]
    closed = [jobs[("ond/closed_world", s)]["metrics"]["top1"][0][1] for s in range(3)]
    assert (top1["agent"], top1["other"], top1["n_seeds"]) == ("closed_world", "knn_novelty", 3)
    assert top1["difference"] == pytest.approx(sum(c - k for k, c in zip(knn, closed)) / 3, abs=1e-12)
    wins = sum((c > k) + 0.5 * (k == c) for k in knn for c in closed)  # P(X > Y) + 1/2 P(X = Y), every pair
    assert top1["p_improvement"] == pytest.approx(wins / 9, abs=1e-12)
    assert top1["ci_low"] <= top1["difference"] <= top1["ci_high"]
    # 3 seeds: the smallest two-sided p is 2/8, so no verdict can be reached, and the row says so
    assert top1["smallest_p"] == 0.25 and top1["better"] == ""
    described = client.get_run(parent_id).data.tags["mlflow.note.content"]  # the run page's description
    assert described.startswith("**Verdict:** closed_world vs knn_novelty: no verdict possible: 3 seeds cannot reach")
    paths = {a.path for a in client.list_artifacts(parent_id, "comparison")}
    # figures=false (SMALL) holds for the parent too: tables and the report, no figure (test_compare draws them)
    assert paths == {
        f"comparison/{f}"
        for f in ("comparison.csv", "comparison.md", "comparison_details.md", "report.html")
        + ("verdict.csv", "verdict.json", "verdict.tex")
    }
    # The sweep's end prints where the comparison is (a local folder), the best group by top1 and the UI command.
    out = first_proc.stdout.splitlines()
    folder = Path(next(x for x in out if x.startswith("comparison: ")).split(": ", 1)[1].split(" (")[0])
    assert folder == tmp_path / "first" and "| Top-1 accuracy ↑ |" in (folder / "comparison.md").read_text()
    means = {a: sum(jobs[(a, s)]["metrics"]["top1"][0][1] for s in range(3)) / 3 for a in AGENTS}
    best = max(AGENTS, key=lambda a: means[a])
    ranked = out[out.index(next(x for x in out if x.startswith("groups by Top-1 accuracy"))) + 1].split()
    assert ranked[0] == best.split("/")[1]
    assert float(ranked[1]) == pytest.approx(means[best], abs=0.01)  # rounded to its interval
    line = next(
        x for x in out if x.strip().startswith("closed_world vs knn_novelty, Top-1 accuracy (higher is better):")
    )
    assert line.strip().endswith("3 seeds") and "none possible" in line
    assert all((folder / name).is_file() for name in ("verdict.csv", "verdict.json", "verdict.tex", "report.html"))
    assert out[-1] == f"mlflow ui --backend-store-uri {mlflow_store['uri']}"
    # each job's run name: job number, the swept agent and seed
    assert sorted(r["tags"]["mlflow.runName"].split("-", 1)[1] for r in jobs.values()) == sorted(
        f"system-{a.split('/')[1]}-seed{s}" for a in AGENTS for s in range(3)
    )  # the condition, not swept, too

    # Interrupt: one job never finished (its run stays RUNNING, its process gone: the pid of a process that has
    # ended, as a killed sweep leaves it). Re-running the same command (with one seed more) runs only that job and
    # the new seed; the 5 finished ones are skipped, nothing is duplicated.
    interrupted = jobs[("ond/knn_novelty", 1)]
    ended = subprocess.Popen(["true"])
    ended.wait()
    client.update_run(interrupted["id"], status="RUNNING")
    client.set_tag(interrupted["id"], "owl_eval.pid", str(ended.pid))
    proc = sweep(mlflow_store, name, tmp_path / "second", f"agent={','.join(AGENTS)}", "seed=0,1,2,3", *SMALL)
    assert (proc.stdout + proc.stderr).count(" already FINISHED in MLflow run ") == 5, proc.stderr[-3000:]
    second = snapshot(mlflow_store, name)
    new_runs = {k: r for k, r in second.items() if k not in first}
    new_parent_id, new_parent = only_parent(new_runs)
    new_jobs = sorted(
        (r["tags"]["agent"], r["tags"]["seed"]) for r in new_runs.values() if r["tags"]["owl_eval.kind"] == "job"
    )
    assert new_jobs == [("ond/closed_world", "3"), ("ond/knn_novelty", "1"), ("ond/knn_novelty", "3")]
    finished = [r for r in second.values() if r["tags"].get("owl_eval.kind") == "job" and r["status"] == "FINISHED"]
    hashes = [r["tags"]["owl_eval.config_hash"] for r in finished]
    assert len(hashes) == len(set(hashes)) == 8  # 2 agents x 4 seeds, each once
    # The resumed sweep's comparison counts the reused runs too: 4 seeds per agent.
    assert new_parent["metrics"]["knn_novelty/n_seeds"][0][1] == 4
    values = [r["metrics"]["top1"][0][1] for r in finished if r["tags"]["agent"] == "ond/knn_novelty"]
    mean, _, low, high = hand_stats(values)
    assert new_parent["metrics"]["knn_novelty/top1"][0][1] == pytest.approx(mean, rel=1e-9)
    assert sum(k.startswith("owl_eval.reused.") for k in new_parent["tags"]) == 5
    # Every job of the resumed sweep is listed under its parent: the 3 that ran and 5 FINISHED stand-ins for the
    # reused runs, each naming its original and holding its final values (the comparison above counted each once).
    under = [r for r in second.values() if r["tags"].get("mlflow.parentRunId") == new_parent_id]
    standins = [r for r in under if r["tags"]["owl_eval.kind"] == "reused"]
    assert len(under) == 8 and len(standins) == 5
    for standin in standins:
        original = second[standin["tags"]["owl_eval.reused_run"]]
        assert standin["status"] == "FINISHED" and original["status"] == "FINISHED"
        assert standin["metrics"]["top1"][0][1] == original["metrics"]["top1"][-1][1]
        assert (standin["tags"]["agent"], standin["tags"]["seed"]) == (
            original["tags"]["agent"],
            original["tags"]["seed"],
        )
    # The interrupted run's process (the first sweep) is gone: the re-run ended it KILLED and reports it.
    assert second[interrupted["id"]]["status"] == "KILLED"
    assert new_parent["tags"]["owl_eval.reaped"] == interrupted["id"]
    assert f"marked KILLED: {interrupted['id']}" in proc.stdout + proc.stderr


@pytest.mark.slow
def test_skip_finished_flag_outside_sweeps(experiment, client, tmp_path):
    """Default (null): single runs always run. ``true``: a config with a FINISHED run is not run again."""
    from owl_eval.runner.api import run
    from owl_eval.tracking.reuse import skip_enabled
    from owl_eval.tracking.settings import TrackingSettings

    assert [
        skip_enabled(TrackingSettings(skip_finished=f), multirun=m) for f in (None, True, False) for m in (True, False)
    ] == [True, False, True, True, False, False]
    args = ["+experiment=ond_system_detection", *experiment["overrides"], "protocol.num_trials=2", "figures=false"]
    first = run(args, output_dir=tmp_path / "a")
    count = lambda: len(client.search_runs([client.get_experiment_by_name(experiment["name"]).experiment_id]))  # noqa: E731
    again = run([*args, "++tracking.skip_finished=true"], output_dir=tmp_path / "b")
    assert count() == 1 and again["top1"] == first["top1"]
    run(args, output_dir=tmp_path / "c")
    assert count() == 2
    run([*args, "seed=1", "++tracking.skip_finished=true"], output_dir=tmp_path / "d")  # another config runs
    assert count() == 3
