"""Lifelong-RL figures: learning curve over the syllabus, agent vs STE curves, transfer matrices.

Drawn from values computed by :mod:`owl_eval.protocols.lifelong_rl.evaluation` (``figure_data``) only."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.artist import Artist  # noqa: E402


def rl_figures(data: dict) -> dict:
    """Every figure the evaluation computed values for (the STE and transfer figures only for a syllabus run)."""
    figures = {"learning_curve": learning_curve(data["learning_curve"])}
    if "agent_vs_ste" in data:
        figures["agent_vs_ste"] = agent_vs_ste(data["agent_vs_ste"])
    if "transfer" in data:
        figures["transfer_matrix"] = transfer_matrix(data["transfer"])
    return figures


def learning_curve(data: dict):
    """Reward per episode; blocks shaded by task (colour) and type (train plain, test hatched); smoothed
    training curves; each training block's saturation point (triangle) and recovery point (circle)."""
    exp, reward, names = data["episodes"], data["reward"], data["tasks"]
    colors = {n: plt.get_cmap("tab10")(i % 10) for i, n in enumerate(names)}
    # constrained layout makes room for the legend right of the axes (tight_layout left it clipped)
    fig, ax = plt.subplots(figsize=(11, 4.2), layout="constrained")
    for span in data["spans"]:
        ax.axvspan(
            span["start"],
            span["end"],
            color=colors[span["task"]],
            alpha=0.28 if span["test"] else 0.12,
            lw=0,
            hatch="//" if span["test"] else None,
        )
        if not span["test"]:
            ax.plot(span["episodes"], span["smoothed"], color=colors[span["task"]], lw=2)
    ax.plot(exp, reward, color="0.3", lw=0.5, alpha=0.6, label="reward per episode")
    for i, (x, y) in enumerate(data["saturation"]):
        ax.plot(x, y, "v", color="k", ms=7, label=None if i else "saturation")
    for i, (x, y) in enumerate(data["recovery"]):
        ax.plot(x, y, "o", mfc="none", mec="tab:red", ms=9, mew=2, label=None if i else "recovery")
    # one legend right of the axes (blocks by task, then the curves and markers): constrained layout makes room
    # for an axes' legend, not for a second legend added as an artist
    handles: list[Artist] = [plt.Rectangle((0, 0), 1, 1, color=colors[n], alpha=0.4) for n in names]
    handles.append(plt.Rectangle((0, 0), 1, 1, fc="white", ec="0.4", hatch="//"))
    curves, labels = ax.get_legend_handles_labels()
    ax.legend(
        handles + curves,
        names + ["evaluation block (hatched)"] + labels,
        loc="upper left",
        fontsize=7,
        bbox_to_anchor=(1.01, 1.0),
    )
    ax.set_xlim(exp[0] - 0.5, exp[-1] + 0.5) if len(exp) else None
    ax.set_xlabel("episode (exp_num)")
    ax.set_ylabel("reward")
    ax.set_title("Learning curve over the syllabus")
    return fig


def agent_vs_ste(curves: list[dict]):
    """Per trained task: the agent's training curve (all its training blocks, concatenated) vs the STE's."""
    cols = min(3, max(1, len(curves)))
    rows = max(1, -(-len(curves) // cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.0 * rows), squeeze=False)
    for ax, curve in zip(axes.ravel(), curves):
        ax.plot(curve["agent"], lw=0.5, alpha=0.4, color="tab:blue")
        ax.plot(curve["agent_smoothed"], lw=2, color="tab:blue", label="agent (in syllabus)")
        ax.plot(curve["ste"], lw=0.5, alpha=0.4, color="tab:orange")
        ax.plot(curve["ste_smoothed"], lw=2, color="tab:orange", label="single-task expert")
        ax.set_title(curve["task"], fontsize=9)
        ax.set_xlabel("training episodes on this task", fontsize=8)
        ax.set_ylabel("reward", fontsize=8)
    for ax in axes.ravel()[len(curves) :]:
        ax.axis("off")
    if curves:
        axes.ravel()[0].legend(fontsize=7)
    fig.suptitle("Agent vs single-task expert")
    fig.tight_layout()
    return fig


def transfer_matrix(data: dict):
    """Forward and backward transfer ratios (first value of each source -> target pair)."""
    tasks = data["tasks"]
    fig, axes = plt.subplots(1, 2, figsize=(5 + 1.0 * len(tasks), 2.5 + 0.45 * len(tasks)), squeeze=False)
    for ax, (key, entry) in zip(axes[0], data["matrices"].items()):
        m = entry["matrix"]
        im = ax.imshow(m, cmap="RdBu", vmin=0.0, vmax=2.0)
        for i, j in zip(*np.nonzero(np.isfinite(m))):
            ax.text(j, i, f"{m[i, j]:.2f}", ha="center", va="center", fontsize=7)
        ax.set_xticks(range(len(tasks)), tasks, rotation=45, ha="right", fontsize=7)
        ax.set_yticks(range(len(tasks)), tasks, fontsize=7)
        ax.set_xlabel("evaluated task (target)", fontsize=8)
        ax.set_ylabel("trained task (source)", fontsize=8)
        ax.set_title(key.replace("_", " ") + ("" if entry["any_pair"] else "\n(N/A: no valid pair)"), fontsize=9)
        fig.colorbar(im, ax=ax, fraction=0.046)
    fig.tight_layout()
    return fig
