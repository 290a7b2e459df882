"""Continual figures: the accuracy matrix as a heatmap, each task's accuracy over the sequence, metric series."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from owl_eval.metrics.results import MetricResults  # noqa: E402

SERIES_SHOWN = ("average_accuracy", "forgetting", "backward_transfer", "forward_transfer")


def accuracy_heatmap(accuracy: np.ndarray, init_accuracy: np.ndarray, *, title: str = "Accuracy matrix"):
    """Rows: before training, then after learning task j; columns: the task evaluated. Cells annotated."""
    rows = np.vstack([init_accuracy[None, :], accuracy])
    T = rows.shape[1]
    fig, ax = plt.subplots(figsize=(1.0 + 0.75 * T, 1.0 + 0.6 * rows.shape[0]))
    image = ax.imshow(rows, vmin=0.0, vmax=1.0, cmap="viridis", aspect="auto")
    for (r, c), value in np.ndenumerate(rows):
        ax.text(c, r, f"{value:.2f}", ha="center", va="center", fontsize=8, color="white" if value < 0.6 else "black")
    ax.set_xticks(range(T), [str(i) for i in range(T)])
    ax.set_yticks(range(rows.shape[0]), ["init"] + [f"after {j}" for j in range(accuracy.shape[0])])
    ax.set_xlabel("task evaluated (i)")
    ax.set_ylabel("after learning task (j)")
    ax.axhline(0.5, color="white", lw=1.5)
    fig.colorbar(image, ax=ax, label="accuracy A[j][i]")
    ax.set_title(title)
    fig.tight_layout()
    return fig


def task_accuracy_curves(accuracy: np.ndarray, init_accuracy: np.ndarray, task_classes=None):
    """Each task's accuracy before training (x = -1) and after every update; a marker where it was learned."""
    k, T = accuracy.shape
    x = np.arange(-1, k)
    fig, ax = plt.subplots(figsize=(7, 4))
    colors = plt.get_cmap("tab10")
    for i in range(T):
        y = np.concatenate([[init_accuracy[i]], accuracy[:, i]])
        label = f"task {i}" + (
            f" {tuple(task_classes[i])}" if task_classes is not None and len(task_classes[i]) <= 3 else ""
        )
        ax.plot(x, y, marker=".", color=colors(i % 10), label=label)
        if i < k:
            ax.plot([i], [accuracy[i, i]], marker="o", ms=8, mfc="none", color=colors(i % 10))
    ax.set_xticks(x, ["init"] + [str(j) for j in range(k)])
    ax.set_xlabel("after learning task")
    ax.set_ylabel("test accuracy")
    ax.set_ylim(-0.02, 1.02)
    ax.legend(fontsize=7, ncol=2)
    ax.set_title("Accuracy of each task over the sequence (circle: just learned)")
    fig.tight_layout()
    return fig


def metric_series(results: MetricResults, prefix: str = "by_task/"):
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for name in SERIES_SHOWN:
        s = results.series.get(prefix + name)
        if s is not None:
            ax.plot(s.steps, s.values, marker="o", ms=3, label=name)
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
        "task_accuracy": task_accuracy_curves(data["accuracy"], data["init_accuracy"], data["task_classes"]),
        "metrics_by_task": metric_series(results),
    }
