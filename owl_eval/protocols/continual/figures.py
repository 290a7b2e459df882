"""Continual figures: the accuracy matrix as a heatmap, each task's accuracy over the sequence, metric series.

Bounded for long sequences: up to :data:`ANNOTATED_TASKS` tasks the heatmap grows with the matrix and every cell
is written out; beyond, it is one image of fixed size (no text per cell) with at most :data:`MAX_TICKS` labels
per axis. The accuracy curves show the tasks the evaluation chose (at most ten, evenly spread: ``curve_tasks``).
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from owl_eval.metrics.keys import MetricKey  # noqa: E402
from owl_eval.metrics.results import MetricResults  # noqa: E402

SERIES_SHOWN = ("average_accuracy", "forgetting", "backward_transfer", "forward_transfer")
ANNOTATED_TASKS = 20  # heatmap cells written out (and the figure sized by the matrix) up to this many tasks
MAX_TICKS = 10  # beyond ANNOTATED_TASKS: about this many tick labels per axis
LARGE_FIGSIZE = (8.0, 7.0)


def _round_ticks(last: int, *, first: int = 0) -> list[int]:
    """About :data:`MAX_TICKS` round whole numbers in ``first..last`` (0, 100, 200, ... for 999)."""
    ticks = MaxNLocator(nbins=MAX_TICKS, integer=True).tick_values(0, last)
    return [int(t) for t in ticks if first <= t <= last]


def accuracy_heatmap(accuracy: np.ndarray, init_accuracy: np.ndarray, *, title: str = "Accuracy matrix"):
    """Rows: before training, then after learning task j; columns: the task evaluated. Cells annotated up to
    :data:`ANNOTATED_TASKS` tasks; a longer sequence is one fixed-size image with thinned tick labels."""
    rows = np.vstack([init_accuracy[None, :], accuracy])
    T = rows.shape[1]
    small = T <= ANNOTATED_TASKS
    figsize = (1.0 + 0.75 * T, 1.0 + 0.6 * rows.shape[0]) if small else LARGE_FIGSIZE
    fig, ax = plt.subplots(figsize=figsize)
    image = ax.imshow(rows, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
    if small:
        for (r, c), value in np.ndenumerate(rows):
            ax.text(
                c, r, f"{value:.2f}", ha="center", va="center", fontsize=8, color="white" if value < 0.6 else "black"
            )
        ax.set_xticks(range(T), [str(i) for i in range(T)])
        ax.set_yticks(range(rows.shape[0]), ["init"] + [f"after {j}" for j in range(accuracy.shape[0])])
    else:
        ax.set_xticks(_round_ticks(T - 1))
        # row j + 1 of the image: after learning task j (0 left out: its label would overlap "init")
        after = _round_ticks(accuracy.shape[0] - 1, first=1)
        ax.set_yticks([0] + [j + 1 for j in after], ["init"] + [f"after {j}" for j in after])
    ax.set_xlabel("task evaluated (i)")
    ax.set_ylabel("after learning task (j)")
    ax.axhline(0.5, color="white", lw=1.5)
    fig.colorbar(image, ax=ax, label="accuracy A[j][i]")
    ax.set_title(title)
    fig.tight_layout()
    return fig


def task_accuracy_curves(accuracy: np.ndarray, init_accuracy: np.ndarray, task_classes=None, tasks=None):
    """Each task's accuracy before training (x = -1) and after every update; a marker where it was learned.
    ``tasks``: the tasks drawn (default: every task; the evaluation passes at most ten, evenly spread)."""
    k, T = accuracy.shape
    x = np.arange(-1, k)
    fig, ax = plt.subplots(figsize=(7, 4))
    colors = plt.get_cmap("tab10")
    shown = list(range(T)) if tasks is None else [int(i) for i in tasks]
    for i in shown:
        y = np.concatenate([[init_accuracy[i]], accuracy[:, i]])
        label = f"task {i}" + (
            f" {tuple(task_classes[i])}" if task_classes is not None and 0 < len(task_classes[i]) <= 3 else ""
        )
        ax.plot(x, y, marker="." if k <= ANNOTATED_TASKS else None, color=colors(i % 10), label=label)
        if i < k:
            ax.plot([i], [accuracy[i, i]], marker="o", ms=8, mfc="none", color=colors(i % 10))
    if k <= ANNOTATED_TASKS:
        ax.set_xticks(x, ["init"] + [str(j) for j in range(k)])
    else:
        after = _round_ticks(k - 1, first=1)  # 0 left out: its label would overlap "init"
        ax.set_xticks([-1, *after], ["init"] + [str(j) for j in after])
    ax.set_xlabel("after learning task")
    ax.set_ylabel("test accuracy")
    ax.set_ylim(-0.02, 1.02)
    # "best" searches every plotted point for a free spot: slow on long sequences
    ax.legend(fontsize=7, ncol=2, loc="best" if k <= ANNOTATED_TASKS else "lower left")
    title = "Accuracy of each task over the sequence (circle: just learned)"
    if len(shown) == T:
        ax.set_title(title)
    else:
        ax.set_title(f"{title}\n{len(shown)} of {T} tasks, evenly spread", fontsize=11)
    fig.tight_layout()
    return fig


def metric_series(results: MetricResults):
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for name in SERIES_SHOWN:
        s = results.series.get(MetricKey(name, axis="task"))  # by_task/<name>
        if s is not None:
            ax.plot(s.steps, s.values, marker="o" if len(s.steps) <= ANNOTATED_TASKS else None, ms=3, label=name)
    ax.axhline(0.0, color="gray", lw=0.5)
    ax.set_xlabel("task_id (after learning task)")
    ax.set_ylabel("metric value")
    ax.legend(fontsize=8)
    ax.set_title("Continual metrics over the sequence")
    fig.tight_layout()
    return fig


def continual_figures(data: dict, results: MetricResults) -> dict:
    """Every continual figure from the evaluation's ``figure_data`` (the matrix, ``b``, the task classes,
    the title) and the (selected) results."""
    return {
        "accuracy_matrix": accuracy_heatmap(data["accuracy"], data["init_accuracy"], title=data["title"]),
        "task_accuracy": task_accuracy_curves(
            data["accuracy"], data["init_accuracy"], data["task_classes"], data.get("curve_tasks")
        ),
        "metrics_by_task": metric_series(results),
    }
