"""Lifelong-RL figures: learning curve over the syllabus, agent vs STE curves, transfer matrices."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from owl_eval.metrics.lifelong_rl.smoothing import smooth  # noqa: E402


def rl_figures(record, options: dict) -> dict:
    """Every figure of a run; ``options`` are the metric options (smoothing, normalisation, ...)."""
    from owl_eval.metrics.lifelong_rl import evaluate_log

    ste = [] if record.mode == "ste" else list(record.ste_logs.values())
    evaluated = evaluate_log(record.log, ste_logs=ste, **options)
    figures = {"learning_curve": learning_curve(record.log, evaluated, options)}
    if record.mode == "syllabus":
        if record.ste_logs:
            figures["agent_vs_ste"] = agent_vs_ste(record.log, record.ste_logs, options)
        figures["transfer_matrix"] = transfer_matrix(evaluated)
    return figures


def _smooth(y: np.ndarray, options: dict) -> np.ndarray:
    return smooth(y, fraction=float(options.get("smoothing_fraction", 0.2)), max_window=int(options.get("max_window", 100))) \
        if len(y) else y


def learning_curve(log, evaluated: dict, options: dict):
    """Reward per episode; blocks shaded by task (colour) and type (train plain, test hatched); smoothed
    training curves; each training block's saturation point (triangle) and recovery point (circle)."""
    exp, reward = log["exp_num"], log["reward"].astype(float)
    block_num, block_type, task = log["block_num"], log["block_type"], log["task_name"]
    names = list(dict.fromkeys(task.tolist()))
    colors = {n: plt.get_cmap("tab10")(i % 10) for i, n in enumerate(names)}
    fig, ax = plt.subplots(figsize=(11, 4.2))
    change = np.flatnonzero(np.r_[True, (block_num[1:] != block_num[:-1]) | (task[1:] != task[:-1])])
    ends = np.r_[change[1:], len(exp)]
    sat_done = rec_done = False
    for s, e in zip(change.tolist(), ends.tolist()):
        x0, x1 = exp[s] - 0.5, exp[e - 1] + 0.5
        is_test = block_type[s] == "test"
        ax.axvspan(x0, x1, color=colors[task[s]], alpha=0.28 if is_test else 0.12, lw=0,
                   hatch="//" if is_test else None)
        if not is_test:
            ax.plot(exp[s:e], _smooth(reward[s:e], options), color=colors[task[s]], lw=2)
    ax.plot(exp, reward, color="0.3", lw=0.5, alpha=0.6, label="reward per episode")
    blocks = evaluated.get("blocks", {})
    for i in np.flatnonzero(np.asarray(blocks.get("block_type", [])) == "train").tolist():
        start = int(blocks["exp_num_start"][i])
        rows = np.flatnonzero(exp == start)
        if not rows.size:
            continue
        s, n = int(rows[0]), int(blocks["length"][i])
        curve = _smooth(reward[s:s + n], options)
        t = blocks["eps_to_sat"][i]
        if np.isfinite(t) and 0 <= t < n:
            ax.plot(exp[s + int(t)], curve[int(t)], "v", color="k", ms=7, label=None if sat_done else "saturation")
            sat_done = True
        r = blocks["recovery_time"][i]
        if np.isfinite(r) and 0 <= r < n:
            ax.plot(exp[s + int(r)], reward[s + int(r)], "o", mfc="none", mec="tab:red", ms=9, mew=2,
                    label=None if rec_done else "recovery")
            rec_done = True
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[n], alpha=0.4) for n in names]
    handles.append(plt.Rectangle((0, 0), 1, 1, fc="white", ec="0.4", hatch="//"))
    first = ax.legend(handles, names + ["evaluation block (hatched)"], loc="upper left", fontsize=7,
                      bbox_to_anchor=(1.01, 1.0))
    ax.add_artist(first)
    ax.legend(loc="lower left", bbox_to_anchor=(1.01, 0.0), fontsize=7)
    ax.set_xlim(exp[0] - 0.5, exp[-1] + 0.5) if len(exp) else None
    ax.set_xlabel("episode (exp_num)")
    ax.set_ylabel("reward")
    ax.set_title("Learning curve over the syllabus")
    fig.tight_layout()
    return fig


def agent_vs_ste(log, ste_logs: dict, options: dict):
    """Per trained task: the agent's training curve (all its training blocks, concatenated) vs the STE's."""
    names = [n for n in dict.fromkeys(log["task_name"][log["block_type"] == "train"].tolist()) if n in ste_logs]
    cols = min(3, max(1, len(names)))
    rows = max(1, -(-len(names) // cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows), squeeze=False)
    for ax, name in zip(axes.ravel(), names):
        mine = log["reward"][(log["task_name"] == name) & (log["block_type"] == "train")].astype(float)
        ref = ste_logs[name]
        theirs = ref["reward"][ref["block_type"] == "train"].astype(float)
        ax.plot(mine, lw=0.5, alpha=0.4, color="tab:blue")
        ax.plot(_smooth(mine, options), lw=2, color="tab:blue", label="agent (in syllabus)")
        ax.plot(theirs, lw=0.5, alpha=0.4, color="tab:orange")
        ax.plot(_smooth(theirs, options), lw=2, color="tab:orange", label="single-task expert")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("training episodes on this task", fontsize=8)
        ax.set_ylabel("reward", fontsize=8)
    for ax in axes.ravel()[len(names):]:
        ax.axis("off")
    if names:
        axes.ravel()[0].legend(fontsize=7)
    fig.suptitle("Agent vs single-task expert")
    fig.tight_layout()
    return fig


def transfer_matrix(evaluated: dict):
    """Forward and backward transfer ratios (first value of each source -> target pair)."""
    transfer = evaluated.get("transfer", {})
    tasks = list(evaluated.get("info", {}).get("task_order", []))
    fig, axes = plt.subplots(1, 2, figsize=(5 + 1.0 * len(tasks), 2.5 + 0.45 * len(tasks)), squeeze=False)
    for ax, key in zip(axes[0], ("forward_transfer_ratio", "backward_transfer_ratio")):
        pairs = transfer.get(key, {})
        m = np.full((len(tasks), len(tasks)), np.nan)
        for (src, tgt), values in pairs.items():
            if src in tasks and tgt in tasks and len(values):
                m[tasks.index(src), tasks.index(tgt)] = values[0]
        im = ax.imshow(m, cmap="RdBu", vmin=0.0, vmax=2.0)
        for i, j in zip(*np.nonzero(np.isfinite(m))):
            ax.text(j, i, f"{m[i, j]:.2f}", ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(tasks)), tasks, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(tasks)), tasks, fontsize=7)
        ax.set_xlabel("evaluated task (target)", fontsize=8)
        ax.set_ylabel("trained task (source)", fontsize=8)
        ax.set_title(key.replace("_", " ") + ("" if pairs else "\n(N/A: no valid pair)"), fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    return fig
