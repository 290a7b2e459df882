"""Lifelong-RL scoring: l2metrics 3.1's metrics of an l2logger log with its single-task-expert (STE) logs,
and the values the lifelong-RL figures draw (METRICS.md section 4).

A live run's record, a saved record and a log read by the l2logger source are scored alike; the figures
plot the ``reward`` column (a log without one has no figures).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from owl_eval.evaluation.base import Evaluation, Scored
from owl_eval.metrics.keys import MetricKey
from owl_eval.metrics.results import MetricResults
from owl_eval.protocols.lifelong_rl.metrics import evaluate_log, results_from_evaluated
from owl_eval.protocols.lifelong_rl.metrics.smoothing import smooth
from owl_eval.protocols.lifelong_rl.options import LifelongRLMetricOptions

TRANSFER_KEYS = ("forward_transfer_ratio", "backward_transfer_ratio")


class LifelongRLEvaluation(Evaluation[LifelongRLMetricOptions]):
    name = "lifelong_rl"

    def score(self, record, options: LifelongRLMetricOptions, *, figures: bool = True) -> Scored:
        ste = [] if record.mode == "ste" else list(record.ste_logs.values())
        evaluated = evaluate_log(record.log, ste_logs=ste, **options.settings())
        results = finish(results_from_evaluated(evaluated), record)
        if not figures or "reward" not in record.log.columns:
            return Scored(results)
        data: dict[str, Any] = {"learning_curve": learning_curve_data(record.log, evaluated, options)}
        if record.mode == "syllabus":
            if record.ste_logs:
                data["agent_vs_ste"] = agent_vs_ste_data(record.log, record.ste_logs, options)
            data["transfer"] = transfer_data(evaluated)
        return Scored(results, data)

    def figures(self, scored: Scored, options: LifelongRLMetricOptions) -> dict:
        if not scored.figure_data:
            return {}
        from owl_eval.protocols.lifelong_rl.figures import rl_figures

        return rl_figures(scored.figure_data)


def finish(results: MetricResults, record) -> MetricResults:
    """The run's own counts next to the metrics; a missing STE names the command that produces it."""
    for key, reason in list(results.na.items()):
        for name, why in record.ste_reasons.items():
            if reason.startswith("no STE log for task") and reason.rstrip().endswith(name):
                results.na[key] = why
    counts = {s: sum(v == s for v in record.ste_status.values()) for s in ("reused", "computed", "missing")}
    for s, n in counts.items():
        results.set(f"ste/{s}", n)
    for k, v in record.timings.items():
        results.set(MetricKey(k, timing=True), v)
    results.set("episodes", len(record.log))
    return results


def _smooth(y: np.ndarray, options: LifelongRLMetricOptions) -> np.ndarray:
    return smooth(y, fraction=float(options.smoothing_fraction), max_window=int(options.max_window)) if len(y) else y


def learning_curve_data(log, evaluated: dict, options: LifelongRLMetricOptions) -> dict:
    """Reward per episode, the blocks (task, type, episode span), each training block's smoothed curve, and
    each training block's saturation point and recovery point (episode, value)."""
    exp, reward = log["exp_num"], log["reward"].astype(float)
    block_num, block_type, task = log["block_num"], log["block_type"], log["task_name"]
    change = np.flatnonzero(np.r_[True, (block_num[1:] != block_num[:-1]) | (task[1:] != task[:-1])])
    ends = np.r_[change[1:], len(exp)]
    spans = []
    for s, e in zip(change.tolist(), ends.tolist()):
        is_test = bool(block_type[s] == "test")
        spans.append(
            {
                "task": str(task[s]),
                "test": is_test,
                "start": exp[s] - 0.5,
                "end": exp[e - 1] + 0.5,
                "episodes": exp[s:e],
                "smoothed": None if is_test else _smooth(reward[s:e], options),
            }
        )
    saturation, recovery = [], []
    blocks = evaluated.get("blocks", {})
    for i in np.flatnonzero(np.asarray(blocks.get("block_type", [])) == "train").tolist():
        rows = np.flatnonzero(exp == int(blocks["exp_num_start"][i]))
        if not rows.size:
            continue
        s, n = int(rows[0]), int(blocks["length"][i])
        curve = _smooth(reward[s : s + n], options)
        t = blocks["eps_to_sat"][i]
        if np.isfinite(t) and 0 <= t < n:
            saturation.append((exp[s + int(t)], curve[int(t)]))
        r = blocks["recovery_time"][i]
        if np.isfinite(r) and 0 <= r < n:
            recovery.append((exp[s + int(r)], reward[s + int(r)]))
    return {
        "episodes": exp,
        "reward": reward,
        "tasks": list(dict.fromkeys(task.tolist())),
        "spans": spans,
        "saturation": saturation,
        "recovery": recovery,
    }


def agent_vs_ste_data(log, ste_logs: dict, options: LifelongRLMetricOptions) -> list[dict]:
    """Per trained task with an STE: the agent's training rewards (all its training blocks, concatenated)
    and the STE's, raw and smoothed."""
    names = [n for n in dict.fromkeys(log["task_name"][log["block_type"] == "train"].tolist()) if n in ste_logs]
    out = []
    for name in names:
        mine = log["reward"][(log["task_name"] == name) & (log["block_type"] == "train")].astype(float)
        ref = ste_logs[name]
        theirs = ref["reward"][ref["block_type"] == "train"].astype(float)
        out.append(
            {
                "task": name,
                "agent": mine,
                "agent_smoothed": _smooth(mine, options),
                "ste": theirs,
                "ste_smoothed": _smooth(theirs, options),
            }
        )
    return out


def transfer_data(evaluated: dict) -> dict:
    """Forward and backward transfer ratio matrices (first value of each source -> target pair; NaN where
    there is none) over the task order."""
    transfer = evaluated.get("transfer", {})
    tasks = list(evaluated.get("info", {}).get("task_order", []))
    matrices = {}
    for key in TRANSFER_KEYS:
        pairs = transfer.get(key, {})
        m = np.full((len(tasks), len(tasks)), np.nan)
        for (src, tgt), values in pairs.items():
            if src in tasks and tgt in tasks and len(values):
                m[tasks.index(src), tasks.index(tgt)] = values[0]
        matrices[key] = {"matrix": m, "any_pair": bool(pairs)}
    return {"tasks": tasks, "matrices": matrices}
