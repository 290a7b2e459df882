"""What a sweep prints at its end (owl_eval.comparison.text.console_block): the groups ranked by the first headline
metric with a direction, a one-seed group after every group measured on 2 or more seeds, and how to open the run."""

from __future__ import annotations

from owl_eval.comparison.table import Row
from owl_eval.comparison.text import console_block


def _row(agent, metric, direction, mean, half, n=3):
    rank = 0 if metric == "top1" else None  # metric_keys.json's headline rank
    role = "headline" if rank is not None else "detail"
    return Row(
        (("agent", agent),),
        metric,
        direction,
        n,
        mean,
        1.0,
        mean - half,
        mean + half,
        runs=n,
        headline=rank,
        agent=agent,
        title="Top-1 accuracy" if metric == "top1" else "",
        role=role,
    )


def test_groups_are_ranked_by_the_first_headline_metric_and_one_seed_is_never_first():
    rows = [
        _row("a", "detail/aupr_novel", "maximize", 0.99, 0.01),
        _row("a", "top1", "maximize", 0.5, 0.1),
        _row("b", "top1", "maximize", 0.7, 0.05),
        _row("c", "top1", "maximize", 0.6, 0.0),
        _row("lucky", "top1", "maximize", 0.99, float("nan"), n=1),  # one seed: shown last, never ranked first
    ]
    text = console_block(rows, [], "/sweep", "parent", "mlflow ui --backend-store-uri sqlite:////s/mlflow.db")
    lines = text.splitlines()
    assert lines[0] == "comparison: /sweep (report.html, comparison.md, verdict.tex)"
    assert lines[1] == "groups by Top-1 accuracy (higher is better), mean ± 95% CI over seeds:"
    assert [line.split()[0] for line in lines[2:6]] == ["b", "c", "a", "lucky"]
    assert "0.70 ± 0.05" in lines[2] and "(n=3)" in lines[2]  # the mean to the half-width's digits
    assert lines[5].split()[1:] == ["0.99", "(n=1:", "not", "ranked)"]
    assert lines[-2:] == ["sweep run: parent", "mlflow ui --backend-store-uri sqlite:////s/mlflow.db"]
