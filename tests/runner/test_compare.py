"""runner.compare: per-group mean, std and 95 % Student-t CI over seeds, checked against hand arithmetic,
then the same through a real SQLite store (parent-run logging and the command line)."""
from __future__ import annotations

import math
import uuid
from types import SimpleNamespace

import pytest
from scipy.stats import t

from runner import compare as cmp


def fake_run(agent: str, seed: int, metrics: dict, params: dict | None = None, tags: dict | None = None):
    h = f"{agent}-{seed}-{sorted((params or {}).items())}"
    return SimpleNamespace(
        info=SimpleNamespace(run_id=uuid.uuid4().hex, start_time=seed, status="FINISHED"),
        data=SimpleNamespace(metrics=metrics, params={"seed": str(seed), **(params or {})},
                             tags={"agent": agent, "seed": str(seed), "protocol": "ond", "owl_eval.kind": "job",
                                   "owl_eval.config_hash": h, **(tags or {})}))


def test_summarize_matches_hand_arithmetic():
    # x = 1, 2, 3, 4: mean 2.5; squared deviations 2.25 + 0.25 + 0.25 + 2.25 = 5, var = 5/3, std = 1.290994...
    # half-width = t(0.975, 3) * std / sqrt(4) = 3.182446 * 1.290994 / 2 = 2.054260
    n, mean, std, lo, hi = cmp.summarize([1.0, 2.0, 3.0, 4.0])
    tq = t.ppf(0.975, 3)
    assert tq == pytest.approx(3.182446, abs=1e-6)
    assert (n, mean) == (4, 2.5)
    assert std == pytest.approx(math.sqrt(5 / 3), rel=1e-12)
    assert lo == pytest.approx(2.5 - tq * math.sqrt(5 / 3) / 2, rel=1e-12)
    assert hi == pytest.approx(2.5 + 2.054260, abs=1e-6)
    # NaN (a metric N/A in one run) is left out; one value has no spread; none has no mean.
    assert cmp.summarize([0.5, math.nan, 0.7])[:2] == (2, pytest.approx(0.6))
    one = cmp.summarize([0.3])
    assert one[:2] == (1, 0.3) and all(math.isnan(v) for v in one[2:])
    assert cmp.summarize([])[0] == 0


def test_groups_by_agent_and_swept_params_not_seed():
    runs = [fake_run("ond/knn_novelty", s, {"top1": v, "m21_fp_pct": f}, {"protocol.condition": c})
            for c, values in (("given", [(0.8, 10.0), (0.9, 20.0), (0.85, 30.0)]), ("system", [(0.6, 5.0), (0.7, 7.0)]))
            for s, (v, f) in enumerate(values)]
    runs += [fake_run("ond/closed_world", s, {"top1": v, "m21_fp_pct": 1.0}, {"protocol.condition": "given"})
             for s, v in enumerate([0.5, 0.7])]
    keys = cmp.swept_keys(["+experiment=ond_system_detection", "agent=ond/knn_novelty,ond/closed_world",
                           "protocol.condition=given,system", "seed=0,1,2", "protocol.num_trials=3"])
    assert keys == ["agent", "protocol.condition"]
    rows = {(r.label, r.metric): r for r in cmp.compare(runs, keys, ["top1", "m21_fp_pct"])}
    assert set(rows) == {(g, m) for g in ("ond.knn_novelty__condition-given", "ond.knn_novelty__condition-system",
                                          "ond.closed_world__condition-given") for m in ("top1", "m21_fp_pct")}
    r = rows[("ond.knn_novelty__condition-given", "top1")]
    # 0.8, 0.9, 0.85: mean 0.85; deviations -0.05, 0.05, 0 -> var = 0.005/2 = 0.0025, std = 0.05
    half = t.ppf(0.975, 2) * 0.05 / math.sqrt(3)  # 4.302653 * 0.05 / 1.732051 = 0.124207
    assert (r.n, r.direction) == (3, "maximize")
    assert (r.mean, r.std, r.ci95_low, r.ci95_high) == pytest.approx((0.85, 0.05, 0.85 - half, 0.85 + half), rel=1e-12)
    r = rows[("ond.knn_novelty__condition-system", "m21_fp_pct")]
    # 5, 7: mean 6, std sqrt(2), half = t(0.975, 1) * sqrt(2) / sqrt(2) = 12.706205
    assert r.direction == "minimize"
    assert (r.mean, r.std, r.ci95_high) == pytest.approx((6.0, math.sqrt(2), 6 + t.ppf(0.975, 1)), rel=1e-12)
    # The Markdown table marks the best mean by each metric's direction: top1 highest, m21 lowest.
    md = cmp.to_markdown(list(rows.values()))
    top1_line = next(line for line in md.splitlines() if line.startswith("| top1 |"))
    fp_line = next(line for line in md.splitlines() if line.startswith("| m21_fp_pct |"))
    assert "**0.85 ± 0.12 (n=3)**" in top1_line and top1_line.count("**") == 2
    assert "**1 ± 0 (n=2)**" in fp_line and fp_line.count("**") == 2  # closed_world's constant 1.0 is lowest


def test_reruns_of_one_config_count_once_and_series_are_left_out():
    a = fake_run("ond/knn_novelty", 0, {"top1": 0.5, "top1_batch": 0.1})
    again = fake_run("ond/knn_novelty", 0, {"top1": 0.5, "top1_batch": 0.1})
    again.data.tags["owl_eval.config_hash"] = a.data.tags["owl_eval.config_hash"]
    b = fake_run("ond/knn_novelty", 1, {"top1": 0.7, "top1_batch": 0.2, "time/total_s": 3.0})
    rows = cmp.compare([a, again, b], ["agent"])
    assert {r.metric for r in rows} == {"top1", "time/total_s"}  # top1_batch is a per-batch series
    assert next(r for r in rows if r.metric == "top1").n == 2


def test_parent_logging_and_command_line_on_a_real_store(mlflow_store, client, capsys):
    from runner.tracking import TrackedRun, TrackingSettings

    name = f"compare-{uuid.uuid4().hex[:8]}"
    exp_id = client.create_experiment(name, artifact_location=mlflow_store["artifacts"])
    values = {"ond/knn_novelty": [0.91, 0.87, 0.95], "ond/closed_world": [0.70, 0.74, 0.69]}
    for agent, seq in values.items():
        for seed, v in enumerate(seq):
            run = client.create_run(exp_id, run_name=f"{agent}-{seed}", tags={
                "agent": agent, "seed": str(seed), "protocol": "ond", "owl_eval.kind": "job",
                "owl_eval.config_hash": f"{agent}{seed}"})
            client.log_metric(run.info.run_id, "top1", v)
            client.log_metric(run.info.run_id, "m21_fp_pct", 10.0 * seed)
            client.log_param(run.info.run_id, "seed", str(seed))
            client.set_terminated(run.info.run_id)
    # Hand: knn 0.91, 0.87, 0.95 -> mean 0.91, deviations 0, -0.04, 0.04 -> var 0.0032/2 = 0.0016, std 0.04.
    half = t.ppf(0.975, 2) * 0.04 / math.sqrt(3)

    rows = cmp.main([f"experiment={name}", "--uri", mlflow_store["uri"], "--metrics", "top1,m21_fp_pct"])
    out = capsys.readouterr().out
    assert f"**0.91 ± {half:.2g} (n=3)**" in out
    knn = next(r for r in rows if r.label == "ond.knn_novelty" and r.metric == "top1")
    assert (knn.mean, knn.std, knn.ci95_low) == pytest.approx((0.91, 0.04, 0.91 - half), rel=1e-9)
    only = cmp.main([f"experiment={name}", "--uri", mlflow_store["uri"], "--tag", "agent=ond/closed_world"])
    capsys.readouterr()
    assert {r.label for r in only} == {"ond.closed_world"}

    parent = TrackedRun.start(TrackingSettings(uri=mlflow_store["uri"], experiment_name=name), run_name="parent")
    cmp.log_to_parent(parent, rows)
    logged = client.get_run(parent.run_id).data.metrics
    assert logged["ond.knn_novelty/top1/mean"] == pytest.approx(0.91, rel=1e-12)
    assert logged["ond.knn_novelty/top1/ci95_high"] == pytest.approx(0.91 + half, rel=1e-9)
    assert logged["ond.closed_world/m21_fp_pct/std"] == pytest.approx(10.0, rel=1e-12)  # 0, 10, 20
    assert logged["ond.closed_world/n_runs"] == 3
    paths = {a.path for a in client.list_artifacts(parent.run_id, "comparison")}
    assert paths == {"comparison/comparison.csv", "comparison/comparison.md", "comparison/comparison.png"}
    csv_text = (client.download_artifacts(parent.run_id, "comparison/comparison.csv"))
    first = open(csv_text).read().splitlines()[0]
    assert first == "agent,metric,direction,n,mean,std,ci95_low,ci95_high"


def test_command_line_errors_are_one_line():
    with pytest.raises(SystemExit, match="name an experiment"):
        cmp.parse_args([])
    with pytest.raises(SystemExit, match="--tag wants key=value"):
        cmp.parse_args(["experiment=x", "--tag", "agent"])
    assert cmp.parse_args(["experiment=x", "--tag=seed=1", "--metrics", "a,b"])["tags"] == {"seed": "1"}
