"""A comparison read back from a real SQLite store: each winner named with a small p whichever agent is listed first,
the parent run's metrics equal to the children's statistics (computed here with numpy and scipy), one label per agent
in every file, a self-contained report.html and a complete verdict.tex float. Then the label rule (unique by
construction) and the one-seed rule (never best) on runs made here."""

from __future__ import annotations

import csv
import html.parser
import io
import json
import math
import uuid

import numpy as np
import pytest
from scipy.stats import t

from owl_eval.comparison import cli, outputs, table, text
from owl_eval.comparison.grouping import agent_labels
from owl_eval.comparison.verdict import verdicts
from owl_eval.metrics.keys import MetricKey
from owl_eval.tracking.key_index import StoredKeys
from owl_eval.tracking.keys import logged_key_entry, mlflow_key
from tests.comparison.test_compare import fake_run

SEEDS = 10
RNG = np.random.default_rng(11)
# The A role is better on top1 (higher is better) on every seed, the B role on m21_fp_pct (lower is better).
A_TOP1 = 0.85 + 0.01 * RNG.standard_normal(SEEDS)
B_TOP1 = A_TOP1 - 0.04 - 0.01 * RNG.random(SEEDS)
A_FP = 20.0 + RNG.standard_normal(SEEDS)
B_FP = A_FP - 5.0 - RNG.random(SEEDS)


def _store_sweep(client, store: dict, agents: dict[str, str]) -> tuple[str, dict]:
    """Job runs as tracking logs them (metric_keys.json included) for ``agents`` (agent config name -> role A/B);
    returns the experiment's name and the values by (agent, metric)."""
    from owl_eval.metrics.results import MetricResults
    from owl_eval.tracking.runs import TrackedRun

    name = f"both-ways-{uuid.uuid4().hex[:8]}"
    exp_id = client.create_experiment(name, artifact_location=store["artifacts"])
    values = {}
    for agent, role in agents.items():
        top1, fp = (A_TOP1, A_FP) if role == "A" else (B_TOP1, B_FP)
        values[(agent, "top1")], values[(agent, "m21_fp_pct")] = top1, fp
        for seed in range(SEEDS):
            tags = {"agent": agent, "seed": str(seed), "protocol": "ond", "owl_eval.kind": "job"}
            run = client.create_run(
                exp_id, run_name=f"{agent}-{seed}", tags=tags | {"owl_eval.config_hash": f"{agent}{seed}"}
            )
            results = MetricResults(values={"top1": float(top1[seed]), "m21_fp_pct": float(fp[seed])})
            TrackedRun(client, run.info.run_id, protocol="ond").log_results(results)
            client.log_param(run.info.run_id, "seed", str(seed))
            client.set_terminated(run.info.run_id)
    return name, values


@pytest.mark.parametrize("agents", [{"ond/alpha": "A", "ond/beta": "B"}, {"ond/zulu": "A", "ond/beta": "B"}])
@pytest.mark.slow
def test_winners_parent_metrics_labels_and_files_on_a_real_store(mlflow_store, client, tmp_path, capsys, agents):
    from owl_eval.tracking.runs import TrackedRun
    from owl_eval.tracking.settings import TrackingSettings

    name, values = _store_sweep(client, mlflow_store, agents)
    out = tmp_path / "out"
    comparison = cli.main([f"experiment={name}", "--uri", mlflow_store["uri"], "--out", str(out)])
    printed = capsys.readouterr().out
    labels = {agent: agent.split("/")[1] for agent in agents}
    by_role = {role: labels[agent] for agent, role in agents.items()}
    first = sorted(labels.values())[0]  # the pair's left agent: alpha in one case, beta in the other
    rows = {v.metric: v for v in comparison.verdicts}
    assert set(rows) == {"top1", "m21_fp_pct"} and rows["top1"].agent == first
    # 10 seeds, every difference one sign: exact two-sided p 2/2**10; Holm over the setting's 2 tests: x 2
    assert rows["top1"].better == by_role["A"] and rows["m21_fp_pct"].better == by_role["B"]
    for v in rows.values():
        assert v.p_value == 2 / 1024 and v.p_holm == pytest.approx(4 / 1024, abs=1e-15) and v.p_better == 1.0
    sign = 1.0 if first == by_role["A"] else -1.0
    assert rows["top1"].difference == pytest.approx(sign * float(np.mean(A_TOP1 - B_TOP1)), abs=1e-12)
    summary = f"{first} vs {sorted(labels.values())[1]}: "
    assert (
        f"{summary}{first} better on 1, " in printed
        and "no significant difference on 0 of 2 headline metrics" in printed
    )

    parent = TrackedRun.start(TrackingSettings(uri=mlflow_store["uri"], experiment_name=name), run_name="parent")
    outputs.log_to_parent(parent, comparison)
    logged = client.get_run(parent.run_id).data.metrics
    for (agent, metric), x in values.items():
        n = len(x)
        mean, std = float(np.mean(x)), float(np.std(x, ddof=1))
        half = float(t.ppf(0.975, n - 1)) * std / math.sqrt(n)
        key = f"{labels[agent]}/{metric}"
        assert logged[key] == pytest.approx(mean, rel=1e-9, abs=1e-12)
        assert logged[f"{key}/std"] == pytest.approx(std, rel=1e-9)
        assert logged[f"{key}/ci_low"] == pytest.approx(mean - half, rel=1e-9)
        assert logged[f"{key}/ci_high"] == pytest.approx(mean + half, rel=1e-9)
        assert logged[f"{labels[agent]}/n_seeds"] == SEEDS

    # The description starts with the line per pair; the UI shows its first lines without a click.
    note = client.get_run(parent.run_id).data.tags["mlflow.note.content"]
    assert note.startswith(f"**Verdict:** {summary}{first} better on 1, ")
    assert "viewStateShareKey=owl-eval-" in note
    view_key = f"mlflow.sharedViewState.owl-eval-{parent.run_id}"
    view = json.loads(client.get_experiment(client.get_run(parent.run_id).info.experiment_id).tags[view_key])
    assert "metrics.`top1`" in view["selectedColumns"] and f"metrics.`{first}/top1`" in view["selectedColumns"]

    # One label per agent in every file; the config names never appear.
    files = {
        f: (out / f).read_text()
        for f in ("comparison.csv", "comparison.md", "verdict.csv", "verdict.tex", "report.html")
    }
    for fname, content in files.items():
        assert "ond/" not in content and "ond." not in content, fname
        for label in labels.values():
            assert label in content, (fname, label)
    assert {r["agent"] for r in csv.DictReader(io.StringIO(files["comparison.csv"]))} == set(labels.values())
    # verdict.tex: a complete float, compiled in test_verdict
    tex = files["verdict.tex"]
    assert tex.startswith("% owl-eval verdict table; needs \\usepackage{booktabs}") and "\\caption{" in tex
    assert "10 seeds" in tex and "\\label{tab:verdict}" in tex and tex.rstrip().endswith("\\end{table}")
    # report.html: self-contained (no address outside the page), the verdict table and the figures in it
    page = _Page()
    page.feed(files["report.html"])
    assert "verdict-table" in page.ids and "headline-table" in page.ids
    assert page.sources and all(src.startswith("data:image/png;base64,") for src in page.sources)
    assert not [u for u in page.links if not u.startswith("#")] and "http" not in files["report.html"]
    assert {p.name for p in out.iterdir()} >= {"report.html", "comparison.png", "differences.png", "profile.png"}


class _Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.sources, self.links = set(), [], []

    def handle_starttag(self, tag, attrs):
        found = dict(attrs)
        if "id" in found:
            self.ids.add(found["id"])
        if tag in ("img", "script"):
            self.sources.append(found.get("src", ""))
        if tag in ("a", "link"):
            self.links.append(found.get("href", ""))


def _keys(*names: str) -> StoredKeys:
    return StoredKeys.fixed(
        {mlflow_key(MetricKey(n), "ond"): logged_key_entry(MetricKey(n), "ond", series=False) for n in names}
    )


def test_agents_with_the_same_short_name_keep_apart():
    """``--config-dir conf agent=a/nm,b/nm``: two agents, two labels, two sets of parent keys, one verdict pair."""
    runs = [fake_run(agent, s, {"top1": v + 0.01 * s}) for agent, v in (("a/nm", 0.9), ("b/nm", 0.5)) for s in range(3)]
    rows = table.compare(runs, ["agent"], keys=_keys("top1"))
    assert sorted({r.agent for r in rows}) == ["a/nm", "b/nm"]
    metrics = outputs.parent_metrics(rows)
    assert metrics["a/nm/top1"] == pytest.approx(0.91) and metrics["b/nm/top1"] == pytest.approx(0.51)
    vrows, _ = verdicts(runs, ["agent"], rows)
    assert [(v.agent, v.other) for v in vrows] == [("a/nm", "b/nm")]


def test_one_agent_config_with_two_classifiers_is_two_agents_in_one_setting():
    params = {"ond/sklearn": None}
    runs = [
        fake_run("ond/sklearn", s, {"top1": v + 0.01 * s}, params={"agent.classifier._target_": target})
        for target, v in (("sklearn.ensemble.RandomForestClassifier", 0.9), ("sklearn.naive_bayes.GaussianNB", 0.6))
        for s in range(3)
    ]
    keys = ["agent", "agent.classifier._target_"]
    rows = table.compare(runs, keys, keys=_keys("top1"))
    assert sorted({r.agent for r in rows}) == [
        "sklearn[classifier=GaussianNB]",
        "sklearn[classifier=RandomForestClassifier]",
    ]
    assert {r.setting for r in rows} == {()}  # the classifier is the agent's, not a setting: they are compared
    vrows, _ = verdicts(runs, keys, rows)
    assert len(vrows) == 1 and vrows[0].setting == "" and params


def test_labels_are_unique_by_construction():
    ids = [
        (("agent", "ond/knn_novelty"),),
        (("agent", "x/ond/knn_novelty"),),
        (("agent", "ond/closed_world"),),
        (("agent", "ond/sklearn"), ("agent.k", "3")),
        (("agent", "ond/sklearn"), ("agent.k", "5")),
    ]
    labels = agent_labels(ids)
    assert labels == {
        ids[0]: "ond/knn_novelty",  # x/ond/knn_novelty ends the same way: the shortest unique tails
        ids[1]: "x/ond/knn_novelty",
        ids[2]: "closed_world",
        ids[3]: "sklearn[k=3]",
        ids[4]: "sklearn[k=5]",
    }
    assert len(set(labels.values())) == len(ids)
    # values that shorten alike fall back to the identities' full text
    alike = [(("agent", "s"), ("agent.m._target_", "a.X")), (("agent", "s"), ("agent.m._target_", "b.X"))]
    assert sorted(agent_labels(alike).values()) == ["agent=s, agent.m._target_=a.X", "agent=s, agent.m._target_=b.X"]


def test_a_one_seed_group_is_never_best_and_has_no_verdict():
    runs = [fake_run("ond/a", s, {"top1": 0.8 + 0.01 * s}) for s in range(3)]
    runs += [fake_run("ond/lucky", 0, {"top1": 0.99})]
    runs += [fake_run("ond/c", s, {"top1": 0.7 + 0.01 * s}) for s in range(3)]
    rows = table.compare(runs, ["agent"], keys=_keys("top1"))
    md = text.to_markdown(rows)
    line = next(x for x in md.splitlines() if x.startswith("| Top-1 accuracy"))
    cells = dict(zip(["a", "c", "lucky"], line.split(" | ")[1:]))
    assert cells["a"].startswith("**") and not cells["lucky"].startswith("**") and "0.99 (n=1)" in cells["lucky"]
    vrows, _ = verdicts(runs, ["agent"], rows)
    with_lucky = [v for v in vrows if "lucky" in (v.agent, v.other)]
    assert with_lucky and all(
        v.n_seeds == 1 and v.better == "" and v.verdict.startswith("no verdict") for v in with_lucky
    )
    assert text.best_means([r for r in rows if r.agent in ("lucky", "c")]) == set()  # c alone is measured on 2+
