"""owl_eval.runner.compare: per-group mean, std and 95 % Student-t CI over seeds, checked against hand arithmetic,
then the same through a real SQLite store (parent-run logging, the sweep summary and the command line). What a key
holds (direction, series, headline) comes from each run's metric_keys.json: written here as tracking writes it,
and by real in-process runs."""

from __future__ import annotations

import json
import math
import uuid
from types import SimpleNamespace

import pytest
from mlflow.tracking import MlflowClient
from scipy.stats import t

from owl_eval import stats
from owl_eval.comparison import cli, grouping, outputs, store, table, text
from owl_eval.comparison.sweep_end import compare_sweep
from owl_eval.errors import ConfigError
from owl_eval.metrics.keys import MetricKey
from owl_eval.tracking import reading
from owl_eval.tracking.key_index import INDEX_ARTIFACT, LoggedKey, StoredKeys, index_json
from owl_eval.tracking.keys import logged_key_entry, mlflow_key


def index_of(protocol: str, *keys: MetricKey, series: tuple[MetricKey, ...] = ()) -> dict[str, LoggedKey]:
    """metric_keys.json entries as TrackedRun writes them for these keys (``series``: logged as series)."""
    out = {mlflow_key(k, protocol): logged_key_entry(k, protocol, series=False) for k in keys}
    out.update({mlflow_key(k, protocol): logged_key_entry(k, protocol, series=True) for k in series})
    return out


def plain_keys(protocol: str, *names: str) -> StoredKeys:
    """The index of runs that logged these plain names (as :func:`index_of`)."""
    return StoredKeys.fixed(index_of(protocol, *map(MetricKey, names)))


def fake_run(agent: str, seed: int, metrics: dict, params: dict | None = None, tags: dict | None = None):
    h = f"{agent}-{seed}-{sorted((params or {}).items())}"
    return SimpleNamespace(
        info=SimpleNamespace(run_id=uuid.uuid4().hex, start_time=seed, status="FINISHED"),
        data=SimpleNamespace(
            metrics=metrics,
            params={"seed": str(seed), **(params or {})},
            tags={
                "agent": agent,
                "seed": str(seed),
                "protocol": "ond",
                "owl_eval.kind": "job",
                "owl_eval.config_hash": h,
                **(tags or {}),
            },
        ),
    )


def test_summarize_matches_hand_arithmetic():
    # x = 1, 2, 3, 4: mean 2.5; squared deviations 2.25 + 0.25 + 0.25 + 2.25 = 5, var = 5/3, std = 1.290994...
    # half-width = t(0.975, 3) * std / sqrt(4) = 3.182446 * 1.290994 / 2 = 2.054260
    n, mean, std, lo, hi = table.summarize([1.0, 2.0, 3.0, 4.0])
    tq = t.ppf(0.975, 3)
    assert tq == pytest.approx(3.182446, abs=1e-6)
    assert (n, mean) == (4, 2.5)
    assert std == pytest.approx(math.sqrt(5 / 3), rel=1e-12)
    assert lo == pytest.approx(2.5 - tq * math.sqrt(5 / 3) / 2, rel=1e-12)
    assert hi == pytest.approx(2.5 + 2.054260, abs=1e-6)
    # NaN (a metric N/A in one run) is left out; one value has no spread; none has no mean.
    assert table.summarize([0.5, math.nan, 0.7])[:2] == (2, pytest.approx(0.6))
    one = table.summarize([0.3])
    assert one[:2] == (1, 0.3) and all(math.isnan(v) for v in one[2:])
    assert table.summarize([])[0] == 0


@pytest.mark.parametrize(
    "value, text",
    [
        (0.85, "0.85"),
        (0.124207, "0.124"),
        (100.0, "100"),
        (1234.5, "1230"),
        (0.000123456, "0.000123"),
        (-2.71828, "-2.72"),
        (1.0, "1"),
        (0.0, "0"),
        (1.23456e-7, "1.23e-07"),
        (12345678.0, "1.23e+07"),
    ],
)
def test_significant_digits(value, text):
    assert stats.significant(value) == text


def test_groups_by_agent_and_swept_params_not_seed():
    runs = [
        fake_run("ond/knn_novelty", s, {"top1": v, "m21_fp_pct": f}, {"protocol.condition": c})
        for c, values in (("given", [(0.8, 10.0), (0.9, 20.0), (0.85, 30.0)]), ("system", [(0.6, 5.0), (0.7, 7.0)]))
        for s, (v, f) in enumerate(values)
    ]
    runs += [
        fake_run("ond/closed_world", s, {"top1": v, "m21_fp_pct": 1.0}, {"protocol.condition": "given"})
        for s, v in enumerate([0.5, 0.7])
    ]
    keys = grouping.swept_keys(
        [
            "+experiment=ond_system_detection",
            "agent=ond/knn_novelty,ond/closed_world",
            "protocol.condition=given,system",
            "seed=0,1,2",
            "protocol.num_trials=3",
        ]
    )
    assert keys == ["agent", "protocol.condition"]
    assert grouping.grouping_keys(runs, keys) == grouping.grouping_keys(runs) == ["agent", "protocol.condition"]
    rows = {
        (r.label, r.metric): r
        for r in table.compare(runs, keys, ["top1", "m21_fp_pct"], plain_keys("ond", "top1", "m21_fp_pct"))
    }
    assert set(rows) == {
        (g, m)
        for g in (
            "knn_novelty (condition=given)",
            "knn_novelty (condition=system)",
            "closed_world (condition=given)",
        )
        for m in ("top1", "m21_fp_pct")
    }
    r = rows[("knn_novelty (condition=given)", "top1")]
    # 0.8, 0.9, 0.85: mean 0.85; deviations -0.05, 0.05, 0 -> var = 0.005/2 = 0.0025, std = 0.05
    half = t.ppf(0.975, 2) * 0.05 / math.sqrt(3)  # 4.302653 * 0.05 / 1.732051 = 0.124207
    assert (r.n, r.runs, r.direction) == (3, 3, "maximize")
    assert (r.mean, r.std, r.ci95_low, r.ci95_high) == pytest.approx((0.85, 0.05, 0.85 - half, 0.85 + half), rel=1e-12)
    r = rows[("knn_novelty (condition=system)", "m21_fp_pct")]
    # 5, 7: mean 6, std sqrt(2), half = t(0.975, 1) * sqrt(2) / sqrt(2) = 12.706205
    assert r.direction == "minimize"
    assert (r.mean, r.std, r.ci95_high) == pytest.approx((6.0, math.sqrt(2), 6 + t.ppf(0.975, 1)), rel=1e-12)
    # The Markdown table marks the best mean by each metric's direction: top1 highest, m21 lowest;
    # 3 significant digits, the legend says what ± is.
    md = text.to_markdown(list(rows.values()))
    given = md.split("### condition=given")[1].split("### condition=system")[0]  # one table per setting
    top1_line = next(line for line in given.splitlines() if line.startswith("| Top-1 accuracy ↑ |"))
    fp_line = next(line for line in given.splitlines() if line.startswith("| M2.1: false-positive trials (%) ↓ |"))
    system = md.split("### condition=system")[1]
    assert "**" not in system  # knn alone in that setting: nothing to be best against
    # rounded to the interval: half-width 0.124 starts with 1, so 2 significant digits, 0.12; the mean to match
    assert "**0.85 ± 0.12 (n=3)**" in top1_line and top1_line.count("**") == 2
    assert "**1 ± 0 (n=2)**" in fp_line and fp_line.count("**") == 2  # closed_world's constant 1.0 is lowest
    assert "± half-width of the 95 % Student-t confidence interval" in md


def test_seed_copies_and_job_directories_never_split_a_group():
    # protocol.ste.seed copies the seed; protocol.log_dir is each job's own directory. Two runs of seed 0
    # (progress toggled: another config hash) are one sample, the latest.
    def job(seed, value, start, progress="true"):
        r = fake_run(
            "lifelong_rl/q_learning",
            seed,
            {"detail/saturation": value},
            {
                "protocol.ste.seed": str(seed),
                "protocol.log_dir": f"/tmp/outputs/{uuid.uuid4().hex}/l2log",
                "progress": progress,
            },
            {"protocol": "lifelong_rl"},
        )
        r.info.start_time = start
        return r

    runs = [job(0, 10.0, 1), job(1, 20.0, 2), job(2, 60.0, 3), job(0, 40.0, 4, progress="false")]
    assert grouping.grouping_keys(runs) == ["agent"]
    (row,) = table.compare(runs, ["agent"], ["saturation"], plain_keys("lifelong_rl", "saturation"))
    # seed 0 counts once (its latest run, 40): 40, 20, 60 -> mean 40
    assert (row.n, row.runs, row.mean) == (3, 3, pytest.approx(40.0))
    assert (row.metric, row.direction) == ("detail/saturation", "maximize")  # the name listed, found by its index entry


def test_runs_made_with_different_settings_never_share_a_group_whichever_seeds_finished():
    # Only (digits, seed 0) and (activity, seed 1) finished: the domain follows the seed in these runs, and
    # they are still two settings, with or without the sweep's declaration.
    runs = [
        fake_run("ond/knn_novelty", 0, {"top1": 0.9}, tags={"domain": "digits"}),
        fake_run("ond/knn_novelty", 1, {"top1": 0.5}, tags={"domain": "activity"}),
    ]
    assert grouping.grouping_keys(runs) == ["agent", "domain"]
    assert grouping.grouping_keys(runs, grouping.swept_keys([], {"domain": "digits,activity", "seed": "0,1"})) == [
        "agent",
        "domain",
    ]
    # The case: seeds 0-1 at num_trials=50, seeds 2-3 at 20, as two experiments pooled in one store.
    runs = [
        fake_run("ond/knn_novelty", s, {"top1": v}, {"protocol.num_trials": n})
        for s, n, v in ((0, "50", 0.9), (1, "50", 0.8), (2, "20", 0.5), (3, "20", 0.7))
    ]
    assert grouping.grouping_keys(runs) == ["agent", "protocol.num_trials"]
    rows = {r.label: r for r in table.compare(runs, grouping.grouping_keys(runs), ["top1"])}
    assert set(rows) == {"knn_novelty (num_trials=50)", "knn_novelty (num_trials=20)"}
    assert (rows["knn_novelty (num_trials=50)"].n, rows["knn_novelty (num_trials=50)"].mean) == (
        2,
        pytest.approx(0.85),  # (0.9 + 0.8) / 2
    )
    assert rows["knn_novelty (num_trials=20)"].mean == pytest.approx(0.6)  # (0.5 + 0.7) / 2
    # --group agent asks for fewer keys than the settings need: the setting is added, not pooled
    assert grouping.with_required(runs, ["agent"]) == ["agent", "protocol.num_trials"]
    assert grouping.with_required(runs, ["protocol.num_trials"]) == ["agent", "protocol.num_trials"]


def test_fpr_at_95tpr_and_every_generated_name_keeps_its_declaration():
    directions = {
        MetricKey("fpr_at_95tpr"): "minimize",
        MetricKey("fpr_at_95tpr", agent="baseline"): "minimize",
        MetricKey("m21_fp_pct"): "minimize",
        MetricKey("oscr"): "maximize",
        MetricKey("m3_nrp_top1_n_excluded"): "none",
        MetricKey("total_s", timing=True): "none",
    }
    batch = MetricKey("top1", axis="batch")
    entries = index_of("ond", *directions, series=(batch,))
    logged = {mlflow_key(k, "ond"): d for k, d in directions.items()}
    assert set(logged) == {
        "detail/fpr_at_95tpr",
        "baseline/fpr_at_95tpr",
        "m21_fp_pct",
        "oscr",
        "detail/m3_nrp_top1_n_excluded",
        "time/total_s",
    }
    runs = [
        fake_run("ond/knn_novelty", s, {**dict.fromkeys(logged, 0.1 * s), "detail/top1_batch": 0.5}) for s in range(2)
    ]
    keys = StoredKeys.fixed(entries)
    # top1_batch is a series: left out; the headline first, then detail/, baseline/, time/ (the earlier order)
    assert table.comparable_metrics(runs, keys=keys) == [
        "m21_fp_pct",
        "oscr",
        "detail/m3_nrp_top1_n_excluded",
        "detail/fpr_at_95tpr",
        "baseline/fpr_at_95tpr",
        "time/total_s",
    ]
    rows = table.compare(runs, ["agent"], keys=keys)
    assert {r.metric: r.direction for r in rows} == logged
    assert {r.metric: r.headline for r in rows if r.headline is not None} == {"m21_fp_pct": 4, "oscr": 10}
    # a name listed as reported is found by its index entry
    assert table.comparable_metrics(runs, ["baseline.fpr_at_95tpr", "fpr_at_95tpr"], keys) == [
        "baseline/fpr_at_95tpr",
        "detail/fpr_at_95tpr",
    ]


def test_not_applicable_cells_are_never_best():
    # M5 of the closed-world agent against the closed-world baseline is N/A ("the agent is the baseline");
    # knn's M5 is measured. M1 is N/A in every group; equal means have no best.
    reason = "the agent is the baseline (identical p_class on every trial): M5 = 0.5 and M6 = 1 by construction"
    runs = [
        fake_run("ond/knn_novelty", s, {"m5_opti_top1": v, "top3": 1.0}, tags={"na.m1_mean_fn_cdt": "no CDT"})
        for s, v in enumerate([0.4, 0.45])
    ]
    runs += [
        fake_run("ond/closed_world", s, {"top3": 1.0}, tags={"na.m5_opti_top1": reason, "na.m1_mean_fn_cdt": "no CDT"})
        for s in range(2)
    ]
    rows = table.compare(runs, ["agent"], keys=plain_keys("ond", "m5_opti_top1", "top3", "m1_mean_fn_cdt"))
    md = text.to_markdown(rows)
    m5 = next(line for line in md.splitlines() if line.startswith("| M5: "))
    # columns: closed_world, knn (sorted); knn alone is measured, so nothing is "best"
    # mean 0.425, half-width t(0.975, 1) * 0.0354 / sqrt(2) = 0.318: one significant digit, 0.3; the mean to 0.1
    assert m5 == "| M5: overall performance task improvement (top-1) ↑ | N/A [1] | 0.4 ± 0.3 (n=2) |"
    assert f"[1] {reason}" in md
    top3 = next(line for line in md.splitlines() if line.startswith("| Top-3 accuracy ↑ |"))
    assert "**" not in top3  # 1.0 everywhere: no group is better
    assert "- M1: FN in correctly detected trials: no CDT" in md and "| M1: " not in md
    assert text.best_means([r for r in rows if r.metric == "m5_opti_top1"]) == set()
    # 0.4, 0.45: mean 0.425, std sqrt(0.00125) = 0.035355, half = 12.706205 * 0.035355 / sqrt(2) = 0.317655
    knn = next(r for r in rows if r.metric == "m5_opti_top1" and r.n)
    assert knn.half_width == pytest.approx(t.ppf(0.975, 1) * math.sqrt(0.00125) / math.sqrt(2), rel=1e-12)
    # the CSV keeps full precision and the reason
    csv_lines = text.to_csv(rows).splitlines()
    assert csv_lines[0] == "agent,metric,name,role,direction,n,mean,std,ci95_low,ci95_high,runs,na_reason"
    name = "M5: overall performance task improvement (top-1)"
    assert f"closed_world,m5_opti_top1,{name},headline,maximize,0,,,,,2,{reason}" in csv_lines
    knn_line = next(line.split(",") for line in csv_lines if line.startswith("knn_novelty,m5_opti_top1,"))
    assert knn_line[5] == "2" and float(knn_line[6]) == (0.4 + 0.45) / 2 and knn_line[-2:] == ["2", ""]


# -- a real store --------------------------------------------------------------------------------------------
AGENTS = {"ond/knn_novelty": 0.7, "ond/closed_world": 0.5}
DOMAINS = {"digits": 0.1, "activity": 0.0}
CONDITIONS = {"given": 0.05, "system": 0.0}
SEED_OFFSET = [0.0, 0.02, 0.07]  # mean 0.03; deviations -0.03, -0.01, 0.04 -> var 0.0026 / 2 = 0.0013


def log_job(client, exp_id, parent_id, agent, domain, condition, seed, job_num, name):
    """A job run as owl_eval.runner.job.live logs it: tags, the flattened config (a seed copy and a job directory among it),
    the metrics through TrackedRun.log_results (with metric_keys.json)."""
    from mlflow.entities import Param, RunTag

    from owl_eval.metrics.results import NA, MetricResults, Series
    from owl_eval.tracking.runs import TrackedRun

    tags = {
        "agent": agent,
        "domain": domain,
        "condition": condition,
        "seed": str(seed),
        "protocol": "ond",
        "baseline": "ond/closed_world",
        "owl_eval.kind": "job",
        "owl_eval.config_hash": uuid.uuid4().hex,
        "mlflow.parentRunId": parent_id,
    }
    params = {
        "seed": str(seed),
        "agent._target_": f"agents.{agent.replace('/', '.')}.Agent",
        "agent.k": "5",
        "domain._target_": f"owl_eval.domains.{domain}.Domain",
        "domain.ond.known_classes": "6" if domain == "digits" else "5",
        "protocol.known_classes": "6" if domain == "digits" else "5",
        "protocol.condition": condition,
        "protocol.ste.seed": str(seed),
        "protocol.log_dir": f"/work/outputs/multiruns/x/{job_num}/l2log",
        "metrics.threshold": "0.5",
        "experiment_name": name,
        "tracking.uri": "sqlite:///x.db",
        "progress": "false",
    }
    top1 = AGENTS[agent] + DOMAINS[domain] + CONDITIONS[condition] + SEED_OFFSET[seed]
    results = MetricResults(values={"top1": top1}, series={MetricKey("top1", axis="batch"): Series([0], [0.1])})
    if agent == "ond/knn_novelty":
        results.set("fpr_at_95tpr", 0.3 + 0.1 * seed)
    else:
        results.set("fpr_at_95tpr", NA("the novelty score p_class[:, 0] is 0 for all 120 samples"))
    run = client.create_run(exp_id, run_name=f"{job_num}", tags=tags)
    client.log_batch(run.info.run_id, params=[Param(k, v) for k, v in params.items()], tags=[RunTag("x", "y")])
    TrackedRun(client, run.info.run_id, protocol="ond").log_results(results)
    client.set_terminated(run.info.run_id)


@pytest.mark.slow
def test_all_domains_sweep_groups_by_every_swept_value(mlflow_store, client, capsys):
    """+experiment=ond_all_domains shape: 2 domains x 2 conditions x 2 agents x 3 seeds, swept in the experiment
    file (hydra.sweeper.params), nothing swept on the command line: 8 groups of n = 3 seeds."""
    from owl_eval.tracking.settings import TrackingSettings

    name = f"all-domains-{uuid.uuid4().hex[:8]}"
    exp_id = client.create_experiment(name, artifact_location=mlflow_store["artifacts"])
    parent = client.create_run(exp_id, run_name="sweep", tags={"owl_eval.kind": "sweep"})
    parent_id = parent.info.run_id
    client.log_param(parent_id, "sweep.overrides", "+experiment=ond_all_domains")
    job = 0
    for domain in DOMAINS:
        for condition in CONDITIONS:
            for agent in AGENTS:
                for seed in range(3):
                    log_job(client, exp_id, parent_id, agent, domain, condition, seed, job, name)
                    job += 1
    settings = TrackingSettings(uri=mlflow_store["uri"], experiment_name=name)
    # the callback as it is called today (no sweeper params) ...
    rows = list(compare_sweep(settings, "/unused", parent_id, ["+experiment=ond_all_domains"]).rows)
    top1 = {r.label: r for r in rows if r.metric == "top1"}
    assert len(top1) == 8 and all((r.n, r.runs) == (3, 3) for r in top1.values())
    # hand: agent + domain + condition + mean seed offset 0.03; std sqrt(0.0013) everywhere
    expected = {
        ("knn_novelty", "digits", "given"): 0.88,
        ("knn_novelty", "digits", "system"): 0.83,
        ("knn_novelty", "activity", "given"): 0.78,
        ("knn_novelty", "activity", "system"): 0.73,
        ("closed_world", "digits", "given"): 0.68,
        ("closed_world", "digits", "system"): 0.63,
        ("closed_world", "activity", "given"): 0.58,
        ("closed_world", "activity", "system"): 0.53,
    }
    half = t.ppf(0.975, 2) * math.sqrt(0.0013) / math.sqrt(3)
    for (agent, domain, condition), mean in expected.items():
        r = top1[f"{agent} (domain={domain}, condition={condition})"]
        assert (r.mean, r.std, r.ci95_high) == pytest.approx((mean, math.sqrt(0.0013), mean + half), rel=1e-9)
    # fpr_at_95tpr survives the name round trip: knn 0.3, 0.4, 0.5 -> mean 0.4; closed world N/A with its reason
    fpr = {r.label: r for r in rows if r.metric == "detail/fpr_at_95tpr"}
    knn = fpr["knn_novelty (domain=digits, condition=given)"]
    assert (knn.direction, knn.n, knn.mean, knn.std) == ("minimize", 3, pytest.approx(0.4), pytest.approx(0.1))
    cw = fpr["closed_world (domain=activity, condition=system)"]
    assert cw.n == 0 and cw.na_reason.startswith("the novelty score p_class[:, 0] is 0")
    assert not any("top1_batch" in r.metric for r in rows)
    logged = client.get_run(parent_id).data.metrics
    # <agent>/<setting>/<metric>: the exact mean, std and interval of the children (hand values above)
    key = "knn_novelty/domain-digits__condition-given/top1"
    assert logged[key] == pytest.approx(0.88, rel=1e-12)
    assert logged[f"{key}/std"] == pytest.approx(math.sqrt(0.0013), rel=1e-9)
    assert (logged[f"{key}/ci_low"], logged[f"{key}/ci_high"]) == pytest.approx((0.88 - half, 0.88 + half), rel=1e-9)
    assert logged["closed_world/domain-activity__condition-system/n_seeds"] == 3

    # ... with the sweeper params (logged to the parent), and the command line: the same table
    sweeper = {
        "domain": "digits,activity",
        "protocol.condition": "given,system",
        "agent": "ond/knn_novelty,ond/closed_world",
        "seed": "0,1,2",
    }
    runs, keys = store.sweep_selection(
        client, parent_id, overrides=["+experiment=ond_all_domains"], sweeper_params=sweeper
    )
    assert store.stored_rows(client, runs, keys) == rows
    compare_sweep(settings, "/unused", parent_id, ["+experiment=ond_all_domains"], sweeper_params=sweeper)
    assert json.loads(client.get_run(parent_id).data.params["sweep.params"]) == sweeper
    assert list(cli.main(["--sweep", parent_id, "--uri", mlflow_store["uri"]]).rows) == rows
    assert list(cli.main([f"experiment={name}", "--uri", mlflow_store["uri"]]).rows) == rows
    out = capsys.readouterr().out
    assert half == pytest.approx(0.0896, abs=1e-4)  # 4.302653 * 0.036056 / 1.732051
    assert "**0.88 ± 0.09 (n=3)**" in out  # the half-width to one significant digit, the mean to match


def test_parent_logging_and_command_line_on_a_real_store(mlflow_store, client, capsys):
    from owl_eval.metrics.results import MetricResults
    from owl_eval.tracking.runs import TrackedRun
    from owl_eval.tracking.settings import TrackingSettings

    name = f"compare-{uuid.uuid4().hex[:8]}"
    exp_id = client.create_experiment(name, artifact_location=mlflow_store["artifacts"])
    values = {"ond/knn_novelty": [0.91, 0.87, 0.95], "ond/closed_world": [0.70, 0.74, 0.69]}
    for agent, seq in values.items():
        for seed, v in enumerate(seq):
            run = client.create_run(
                exp_id,
                run_name=f"{agent}-{seed}",
                tags={
                    "agent": agent,
                    "seed": str(seed),
                    "protocol": "ond",
                    "owl_eval.kind": "job",
                    "owl_eval.config_hash": f"{agent}{seed}",
                    "team": "it's ours",
                },
            )
            results = MetricResults(values={"top1": v, "m21_fp_pct": 10.0 * seed})
            TrackedRun(client, run.info.run_id, protocol="ond").log_results(results)
            client.log_param(run.info.run_id, "seed", str(seed))
            client.set_terminated(run.info.run_id)
    # Hand: knn 0.91, 0.87, 0.95 -> mean 0.91, deviations 0, -0.04, 0.04 -> var 0.0032/2 = 0.0016, std 0.04.
    half = t.ppf(0.975, 2) * 0.04 / math.sqrt(3)  # 0.099364

    comparison = cli.main([f"experiment={name}", "--uri", mlflow_store["uri"], "--metrics", "top1,m21_fp_pct"])
    rows = list(comparison.rows)
    out = capsys.readouterr().out
    assert "**0.91 ± 0.10 (n=3)**" in out  # half-width 0.0994: one significant digit, 0.10
    knn = next(r for r in rows if r.label == "knn_novelty" and r.metric == "top1")
    assert (knn.mean, knn.std, knn.ci95_low) == pytest.approx((0.91, 0.04, 0.91 - half), rel=1e-9)
    only = cli.main([f"experiment={name}", "--uri", mlflow_store["uri"], "--tag", "agent=ond/closed_world"])
    assert {r.label for r in only.rows} == {"closed_world"}
    # a tag value with a quote goes into the search filter quoted (owl_eval.tracking.store.filter_literal)
    quoted = cli.main([f"experiment={name}", "--uri", mlflow_store["uri"], "--tag", "team=it's ours"])
    assert {r.label for r in quoted.rows} == {"closed_world", "knn_novelty"}
    capsys.readouterr()

    # The verdicts: knn_novelty vs closed_world paired by seed. By hand, top1: differences 0.91-0.70, 0.87-0.74,
    # 0.95-0.69 = 0.21, 0.13, 0.26, mean 0.2; every knn value beats every closed-world value, so P(improvement) =
    # 9/9 = 1; every seed's difference is positive, so of the 2^3 sign patterns the observed one and its mirror
    # image reach |mean| 0.2: two-sided p = 2/8 (3 seeds can never show a difference).
    top1 = next(v for v in comparison.verdicts if v.metric == "top1")
    assert {top1.agent, top1.other} == {"knn_novelty", "closed_world"} and top1.n_seeds == 3
    sign = 1 if top1.agent == "knn_novelty" else -1
    assert sign * top1.difference == pytest.approx(0.2, abs=1e-12)
    assert top1.p_better == 1.0 or top1.p_better == 0.0
    assert top1.p_value == pytest.approx(2 / 8) and not top1.reachable and top1.better == ""
    assert 0.13 <= sign * top1.ci_low <= 0.2 <= sign * top1.ci_high or 0.13 <= -top1.ci_high  # a bootstrap mean

    parent = TrackedRun.start(TrackingSettings(uri=mlflow_store["uri"], experiment_name=name), run_name="parent")
    outputs.log_to_parent(parent, comparison)
    logged = client.get_run(parent.run_id).data.metrics
    # <agent>/<metric>: the exact mean; /std and the interval exact beside it
    assert logged["knn_novelty/top1"] == pytest.approx(0.91, rel=1e-12)
    assert logged["knn_novelty/top1/std"] == pytest.approx(0.04, rel=1e-9)
    assert logged["knn_novelty/top1/ci_low"] == pytest.approx(0.91 - half, rel=1e-9)
    # 0, 10, 20: mean 10, std 10
    assert logged["closed_world/m21_fp_pct"] == pytest.approx(10.0, rel=1e-12)
    assert logged["closed_world/m21_fp_pct/std"] == pytest.approx(10.0, rel=1e-12)
    assert logged["closed_world/n_seeds"] == 3
    assert not [k for k in logged if k.startswith("ond.")]
    paths = {a.path for a in client.list_artifacts(parent.run_id, "comparison")}
    assert paths == {
        f"comparison/{f}"
        for f in (
            "comparison.csv",
            "comparison.md",
            "comparison.png",
            "report.html",
            "verdict.csv",
            "verdict.json",
            "verdict.tex",
            "differences.png",
            "profile.png",
        )
    }
    lines = open(client.download_artifacts(parent.run_id, "comparison/comparison.csv")).read().splitlines()
    assert lines[0] == "agent,metric,name,role,direction,n,mean,std,ci95_low,ci95_high,runs"
    knn_line = next(line.split(",") for line in lines if line.startswith("knn_novelty,top1,"))
    assert knn_line[5] == "3" and float(knn_line[6]) == pytest.approx(0.91, rel=1e-12)  # full precision
    tex = open(client.download_artifacts(parent.run_id, "comparison/verdict.tex")).read()
    assert r"\toprule" in tex and "knn\\_novelty" in tex and r"\begin{table}" in tex


def test_command_line_errors_are_one_line(mlflow_store, capsys):
    with pytest.raises(ConfigError, match="name an experiment"):
        cli.parse_args([])
    with pytest.raises(ConfigError, match="--tag wants key=value"):
        cli.parse_args(["experiment=x", "--tag", "agent"])
    assert cli.parse_args(["experiment=x", "--tag=seed=1", "--metrics", "a,b"])["tags"] == {"seed": "1"}
    MlflowClient(mlflow_store["uri"]).search_experiments()  # the session's store exists (comparing never makes one)
    with pytest.raises(SystemExit) as exited:
        cli.cli(["experiment=no-such-experiment", "--uri", mlflow_store["uri"]])
    assert str(exited.value.code).startswith("error: experiment: no MLflow experiment 'no-such-experiment'")
    assert "\n" not in str(exited.value.code)
    with pytest.raises(SystemExit) as exited:
        cli.cli(["--sweep", "0123abc", "--uri", mlflow_store["uri"]])
    assert str(exited.value.code) == "error: --sweep: no run '0123abc' in this store"
    with pytest.raises(ConfigError, match="--tag team: .* holds both ' and \" quotes"):
        reading.experiment_runs(
            SimpleNamespace(get_experiment_by_name=lambda n: SimpleNamespace(experiment_id="1")),
            "x",
            {"team": 'it\'s "ours"'},
        )


def test_best_is_chosen_among_agents_of_one_setting_only():
    # digits is easier than activity: the best activity agent (0.6) is still bold, though digits' worst (0.8) is higher.
    runs = [
        fake_run(agent, s, {"top1": v + 0.01 * s}, params={"domain": domain}, tags={"domain": domain})
        for agent, domain, v in [
            ("ond/knn_novelty", "digits", 0.9),
            ("ond/closed_world", "digits", 0.8),
            ("ond/knn_novelty", "activity", 0.6),
            ("ond/closed_world", "activity", 0.5),
        ]
        for s in range(2)
    ]
    rows = table.compare(runs, ["agent", "domain"], keys=plain_keys("ond", "top1"))
    md = text.to_markdown(rows).splitlines()
    # one table per setting, agents across
    assert [line for line in md if line.startswith("### ")] == ["### domain=activity", "### domain=digits"]
    headers = [line.split(" | ")[1:] for line in md if line.startswith("| metric |")]
    top1 = [line.split(" | ")[1:] for line in md if line.startswith("| Top-1 accuracy ↑ |")]
    bold = [[h.strip(" |") for h, c in zip(hs, cs) if c.startswith("**")] for hs, cs in zip(headers, top1)]
    assert bold == [["knn_novelty"], ["knn_novelty"]]


# -- stored runs read through their metric_keys.json ---------------------------------------------------------
@pytest.mark.slow
def test_compare_reads_directions_from_the_index_of_real_runs(experiment, client, capsys, monkeypatch):
    """Real in-process OND jobs (two agents x two seeds) into a SQLite store, compared from MlflowClient: every
    direction, series and headline place comes from the runs' metric_keys.json, read once for the four runs
    (one protocol, one metric setting)."""
    import owl_eval.tracking.key_index as key_index
    from owl_eval.runner.api import run

    for agent in ("ond/knn_novelty", "ond/closed_world"):
        for seed in (0, 1):
            run(
                [
                    "+experiment=ond_system_detection",
                    *experiment["overrides"],
                    f"agent={agent}",
                    f"seed={seed}",
                    "protocol.num_trials=3",
                    "protocol.trials_without_novelty=1",
                    "protocol.pre_novelty=20",
                    "protocol.post_novelty=30",
                    "figures=false",
                ],
                output_dir=experiment["root"] / f"out-{experiment['name']}-{agent.replace('/', '_')}-{seed}",
            )
    downloads = []
    real = key_index.download_index
    monkeypatch.setattr(key_index, "download_index", lambda c, run_id: downloads.append(run_id) or real(c, run_id))
    capsys.readouterr()
    rows = cli.main([f"experiment={experiment['name']}", "--uri", experiment["uri"]]).rows
    captured = capsys.readouterr()
    assert len(downloads) == 1 and "note:" not in captured.err  # once for the group, every run has an index
    runs = reading.experiment_runs(client, experiment["name"])
    assert len(runs) == 4
    index = key_index.download_index(client, runs[0].info.run_id)
    metrics = {r.metric for r in rows}
    # the directions are the declarations', found through the index (no key text read): plain headline keys,
    # detail/, baseline/ and time/ alike
    by_metric = {r.metric: r for r in rows}
    assert by_metric["top1"].direction == "maximize" and by_metric["top1"].headline == 0
    assert by_metric["m21_fp_pct"].direction == "minimize" and by_metric["m21_fp_pct"].headline == 4
    assert by_metric["detail/top1_pre"].direction == "maximize" and by_metric["detail/top1_pre"].headline is None
    assert by_metric["baseline/top1"].direction == "maximize" and by_metric["baseline/top1"].headline is None
    assert by_metric["time/total_s"].direction == "none"
    for r in rows:
        entry = index[r.metric]
        assert entry.declared and not entry.series and r.direction == entry.direction, r.metric
    # series (per batch) and threshold tables are never compared
    assert not {m for m in metrics if "_batch" in m or m.startswith("threshold/")}
    assert {"detail/top1_batch", "baseline/top1_batch"} <= set(index) and index["detail/top1_batch"].series
    # every declared, non-series key a run logged (as a value or an N/A tag) is compared, in the earlier order
    logged = {k for r in runs for k in [*r.data.metrics, *(t[3:] for t in r.data.tags if t.startswith("na."))]}
    assert metrics == {k for k in logged if index[k].declared and not index[k].series}
    assert [r.metric for r in rows if r.label == rows[0].label] == table.comparable_metrics(
        runs, keys=StoredKeys.of(client)
    )
    md = text.to_markdown(rows)
    assert "| Top-1 accuracy ↑ |" in md and "| M2.1: false-positive trials (%) ↓ |" in md


def test_runs_logged_before_the_index_are_compared_without_directions(mlflow_store, client, capsys):
    """A store from before metric_keys.json: every logged key compared, no direction, one note on stderr; once a run
    of the same protocol and metric settings has an index, the older runs are read with it (a resumed sweep)."""
    from owl_eval.metrics.results import MetricResults, Series
    from owl_eval.tracking.runs import TrackedRun

    name = f"legacy-{uuid.uuid4().hex[:8]}"
    exp_id = client.create_experiment(name, artifact_location=mlflow_store["artifacts"])

    def job(agent, seed, indexed):
        tags = {"agent": agent, "seed": str(seed), "protocol": "ond", "owl_eval.kind": "job"}
        run = client.create_run(
            exp_id, run_name=f"{agent}-{seed}", tags=tags | {"owl_eval.config_hash": uuid.uuid4().hex}
        )
        client.log_param(run.info.run_id, "metrics.threshold", "0.5")
        if indexed:
            results = MetricResults(values={"top1": 0.5 + seed / 10, "m21_fp_pct": 10.0 + seed})
            results.series[MetricKey("top1", axis="batch")] = Series([0, 1], [0.5, 0.6])
            TrackedRun(client, run.info.run_id, protocol="ond").log_results(results)
        else:  # the same keys, without metric_keys.json
            for key, value in {"top1": 0.4 + seed / 10, "m21_fp_pct": 20.0 + seed, "detail/top1_batch": 0.5}.items():
                client.log_metric(run.info.run_id, key, value)
        client.set_terminated(run.info.run_id)

    for seed in (0, 1):
        job("ond/old", seed, indexed=False)
    rows = cli.main([f"experiment={name}", "--uri", mlflow_store["uri"]]).rows
    err = capsys.readouterr().err
    assert f"note: 2 of 2 runs have no {INDEX_ARTIFACT}" in err and len(err.strip().splitlines()) == 1
    assert {r.metric: r.direction for r in rows} == {"top1": "none", "m21_fp_pct": "none", "detail/top1_batch": "none"}
    assert all(r.headline is None for r in rows)

    for seed in (0, 1):
        job("ond/new", seed, indexed=True)
    rows = cli.main([f"experiment={name}", "--uri", mlflow_store["uri"]]).rows
    assert "note:" not in capsys.readouterr().err
    assert {r.metric: r.direction for r in rows} == {"top1": "maximize", "m21_fp_pct": "minimize"}
    old = next(r for r in rows if r.label == "old" and r.metric == "top1")
    assert (old.n, old.mean, old.headline) == (2, pytest.approx(0.45), 0)


def test_stored_keys_read_one_index_per_protocol_and_metric_settings():
    loads = []
    entries = {"top1": logged_key_entry(MetricKey("top1"), "ond", series=False)}
    own = {
        "a": entries,
        "b": entries,
        "c": {
            "detail/task/x/saturation": logged_key_entry(MetricKey("saturation", task="x"), "lifelong_rl", series=False)
        },
        "d": None,
    }

    def load(run_id):
        loads.append(run_id)
        return own[run_id]

    def run(run_id, protocol, threshold="0.5"):
        return SimpleNamespace(
            info=SimpleNamespace(run_id=run_id),
            data=SimpleNamespace(params={"metrics.threshold": threshold, "seed": run_id}, tags={"protocol": protocol}),
        )

    keys = StoredKeys(load)
    a, b, c, d = run("a", "ond"), run("b", "ond"), run("c", "lifelong_rl"), run("d", "ond", threshold="0.3")
    assert keys.entry(a, "top1") == keys.entry(b, "top1") == entries["top1"] and loads == ["a"]
    assert keys.entry(b, "detail/top3") is None and loads == ["a", "b"]  # a key the group lacks: the run's own
    assert keys.entry(c, "detail/task/x/saturation").key.task == "x" and loads == ["a", "b", "c"]
    assert keys.entry(d, "top1") is None and not keys.indexed(d) and keys.indexed(a)
    assert loads == ["a", "b", "c", "d"]
    assert index_json("ond", entries)["keys"]["top1"]["reported"] == "top1"
