"""Continual-learning metrics of an accuracy matrix (METRICS.md section 2, seed 002).

Notation (0-based, as Renate's results dict, FORMATS.md):

- ``A[j][i]``: accuracy on task ``i`` after learning task ``j`` (a T×T matrix, every task evaluated after
  every update); ``results["accuracy"]`` in Renate.
- ``b[i]`` (``init_accuracy``): accuracy on task ``i`` before any update; ``results["accuracy_init"][0]``.
- ``n[i]`` (``num_instances``): test size of task ``i``.
- ``task_id`` = ``t``: "after update ``t``"; every metric at step ``t`` uses rows ``0..t`` only.

The five Renate metrics (``average_accuracy``, ``micro_average_accuracy``, ``forgetting``,
``backward_transfer``, ``forward_transfer``) equal ``renate.evaluation.metrics.classification`` (Renate
0.5.2) to 1e-12 for every ``task_id``. Avalanche's stream metrics are offered under their own names
(``forgetting_avalanche``, ``forward_transfer_avalanche``), as is the "max since learned" forgetting
(``forgetting_since_learned``); none of them replaces a Renate number.

All steps are computed at once (``*_series`` helpers return one value per ``t``); the per-step functions
index into them. Each ``*_series`` function is a registered metric of :data:`CONTINUAL`, declared by its decorator
(name, direction, bounds, description, the inputs it needs); :func:`continual_metrics` computes every registered
one, so adding a metric is one decorated function here::

    @CONTINUAL.metric("learning_accuracy", higher_is_better=True, bounds=(0.0, 1.0), needs=("A",),
                      description="accuracy on each task right after learning it, mean over tasks 0..t")
    def _learning_accuracy_series(A):
        return np.cumsum(np.diag(A)) / np.arange(1, A.shape[0] + 1)
"""

from __future__ import annotations

import numbers

import numpy as np

from owl_eval.metrics.declare import MetricSet
from owl_eval.metrics.results import NA, MetricResults, Series
from owl_eval.metrics.validation import MetricInputError, as_array

__all__ = [
    "CONTINUAL",
    "SPECS",
    "average_accuracy",
    "micro_average_accuracy",
    "forgetting",
    "backward_transfer",
    "forward_transfer",
    "forgetting_avalanche",
    "forgetting_since_learned",
    "forward_transfer_avalanche",
    "continual_metrics",
    "from_renate_results",
]

PROTOCOL = "continual"
# The reason a metric that needs ``b`` or ``n`` is N/A when the matrix came without them.
CONTINUAL = MetricSet(
    PROTOCOL,
    missing={
        "b": "init_accuracy (accuracy on every task before any update) was not given",
        "n": "num_instances (test size per task) was not given",
    },
)
#: every declaration of the registered continual metrics, always current (what owl_eval.evaluation.registry reads)
SPECS = CONTINUAL.specs


# --------------------------------------------------------------------------------------------- validation


def _check_matrix(A) -> np.ndarray:
    arr = as_array("A (accuracy matrix)", A, ndim=2, allow_nan=False, low=0.0, high=1.0)
    if arr.shape[0] != arr.shape[1]:
        raise MetricInputError(
            f"A (accuracy matrix): expected a square T×T matrix (A[j][i] = accuracy on task i after learning "
            f"task j), got shape {arr.shape}"
        )
    if arr.shape[0] == 0:
        raise MetricInputError("A (accuracy matrix): expected at least one task, got shape (0, 0)")
    return arr


def _check_task_id(task_id, num_tasks: int) -> int:
    if isinstance(task_id, bool) or not isinstance(task_id, numbers.Integral):
        raise MetricInputError(f"task_id: expected an integer in [0, {num_tasks - 1}], got {task_id!r}")
    t = int(task_id)
    if not 0 <= t < num_tasks:
        raise MetricInputError(
            f"task_id: expected an integer in [0, {num_tasks - 1}] (the matrix has {num_tasks} tasks), got {t}"
        )
    return t


def _check_init(init_accuracy, num_tasks: int) -> np.ndarray:
    return as_array("init_accuracy", init_accuracy, shape=(num_tasks,), allow_nan=False, low=0.0, high=1.0)


def _check_sizes(num_instances, num_tasks: int) -> np.ndarray:
    n = as_array("num_instances", num_instances, shape=(num_tasks,), finite=True, low=0.0)
    if np.any(n != np.round(n)):
        bad = int(np.argmax(n != np.round(n)))
        raise MetricInputError(f"num_instances: expected whole counts of test samples, got {n[bad]!r} at index {bad}")
    return n


# --------------------------------------------------------------------------------- all steps at once
# Each registered metric is a function of A (and b, n when it needs them) returning its value after every update
# t = 0..T-1 (or NA); continual_metrics reports the last value and the series. Declared in the order reported.


def _mean_lower(D: np.ndarray, T: int) -> np.ndarray:
    """Row r of D (r = t-1, t = 1..T-1) averaged over columns i <= r; a 0.0 prepended for t = 0."""
    out = np.zeros(T)
    if T > 1:
        out[1:] = np.tril(D).sum(axis=1) / np.arange(1, T)
    return out


def _fwt_terms(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """d[i-1] = A[i-1][i] - b[i] for i = 1..T-1."""
    return np.diagonal(A, offset=1) - b[1:]


@CONTINUAL.metric(
    "average_accuracy",
    higher_is_better=True,
    bounds=(0.0, 1.0),
    title="Average accuracy",
    description="Mean accuracy over the tasks learned so far, after learning task t (Renate average_accuracy).",
    latex=r"\frac{1}{t+1}\sum_{i\le t} A_{t,i}",
    needs=("A",),
)
def _average_accuracy_series(A: np.ndarray) -> np.ndarray:
    """``(1/(t+1)) Σ_{i<=t} A[t][i]`` for every t (Renate 0.5.2 ``average_accuracy``)."""
    T = A.shape[0]
    return np.tril(A).sum(axis=1) / np.arange(1, T + 1)


# Test sizes are only checked to be whole and finite: sizes near 1e308 overflow the pooled sums.
MICRO_OVERFLOW = (
    "not a finite number: the pooled test sizes overflow float64 (num_instances too large, "
    "e.g. 1e308); a value of that size is not a count"
)


@CONTINUAL.metric(
    "micro_average_accuracy",
    higher_is_better=True,
    bounds=(0.0, 1.0),
    title="Micro-average accuracy",
    description="Accuracy over the pooled test samples of the tasks learned so far (Renate micro_average_accuracy).",
    latex=r"\sum_{i\le t} n_i A_{t,i} / \sum_{i\le t} n_i",
    needs=("A", "n"),
)
@np.errstate(over="ignore", invalid="ignore")  # an overflow is returned as N/A, not printed
def _micro_average_accuracy_series(A: np.ndarray, n: np.ndarray) -> np.ndarray | NA:
    """``Σ_{i<=t} A[t][i]·n[i] / Σ_{i<=t} n[i]`` for every t (Renate 0.5.2 ``micro_average_accuracy``); NA when the
    pooled sums overflow float64."""
    total = np.cumsum(n)
    if total[0] == 0:
        raise MetricInputError(
            "num_instances: the total test size of the tasks up to task_id 0 is zero; micro average accuracy "
            "is undefined"
        )
    values = (np.tril(A) @ n) / total
    return values if np.isfinite(values).all() else NA(MICRO_OVERFLOW)


@CONTINUAL.metric(
    "forgetting",
    higher_is_better=False,
    bounds=(-1.0, 1.0),
    title="Forgetting",
    description="Mean over earlier tasks of the best accuracy in any earlier row minus the current accuracy "
    "(Chaudhry et al.; Renate forgetting, max over all rows k<t; may be negative).",
    latex=r"\frac{1}{t}\sum_{i<t} \max_{k<t} A_{k,i} - A_{t,i}",
    needs=("A",),
)
def _forgetting_series(A: np.ndarray) -> np.ndarray:
    """``(1/t) Σ_{i<t} (max_{k<t} A[k][i] − A[t][i])`` for every t, 0 at t = 0 (Chaudhry et al. 2018 as Renate
    0.5.2 ``forgetting`` computes it: the max over every earlier row)."""
    T = A.shape[0]
    best_so_far = np.maximum.accumulate(A, axis=0)  # best_so_far[k, i] = max_{k' <= k} A[k', i]
    return _mean_lower(best_so_far[:-1] - A[1:], T)


@CONTINUAL.metric(
    "backward_transfer",
    higher_is_better=True,
    bounds=(-1.0, 1.0),
    title="Backward transfer",
    description="Mean over earlier tasks of current accuracy minus accuracy right after learning it (Renate backward_transfer).",
    latex=r"\frac{1}{t}\sum_{i<t} A_{t,i} - A_{i,i}",
    needs=("A",),
)
def _backward_transfer_series(A: np.ndarray) -> np.ndarray:
    """``(1/t) Σ_{i<t} (A[t][i] − A[i][i])`` for every t, 0 at t = 0 (Renate 0.5.2 ``backward_transfer``)."""
    T = A.shape[0]
    return _mean_lower(A[1:] - np.diag(A)[None, :], T)


@CONTINUAL.metric(
    "forward_transfer",
    higher_is_better=True,
    bounds=(-1.0, 1.0),
    title="Forward transfer",
    description="Mean over tasks 1..t of accuracy before learning the task (after task i-1) minus accuracy "
    "at initialisation (Renate forward_transfer).",
    latex=r"\frac{1}{t}\sum_{1\le i\le t} A_{i-1,i} - b_i",
    needs=("A", "b"),
)
def _forward_transfer_series(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(1/t) Σ_{1<=i<=t} (A[i−1][i] − b[i])`` for every t, 0 at t = 0 (Renate 0.5.2 ``forward_transfer``)."""
    T = A.shape[0]
    out = np.zeros(T)
    if T > 1:
        out[1:] = np.cumsum(_fwt_terms(A, b)) / np.arange(1, T)
    return out


@CONTINUAL.metric(
    "forgetting_avalanche",
    higher_is_better=False,
    bounds=(-1.0, 1.0),
    description="Avalanche StreamForgetting: mean over earlier tasks of accuracy right after learning it "
    "minus current accuracy (no max; equals -backward_transfer).",
    latex=r"\frac{1}{t}\sum_{i<t} A_{i,i} - A_{t,i}",
    needs=("A",),
)
def _forgetting_avalanche_series(A: np.ndarray) -> np.ndarray:
    """``(1/t) Σ_{i<t} (A[i][i] − A[t][i])`` for every t, 0 at t = 0 (Avalanche ``StreamForgetting``)."""
    T = A.shape[0]
    return _mean_lower(np.diag(A)[None, :] - A[1:], T)


@CONTINUAL.metric(
    "forgetting_since_learned",
    higher_is_better=False,
    bounds=(-1.0, 1.0),
    description="Forgetting with the max over the rows since task i was learned (k in [i, t)); never "
    "counts accuracy a task had before it was trained.",
    latex=r"\frac{1}{t}\sum_{i<t} \max_{i\le k<t} A_{k,i} - A_{t,i}",
    needs=("A",),
)
def _forgetting_since_learned_series(A: np.ndarray) -> np.ndarray:
    """``(1/t) Σ_{i<t} (max_{i<=k<t} A[k][i] − A[t][i])`` for every t, 0 at t = 0 (the max only since task i was
    learned; not a Renate metric)."""
    T = A.shape[0]
    rows, cols = np.indices(A.shape)
    learned = np.where(rows >= cols, A, -np.inf)  # only rows k >= i count for task i
    best_since = np.maximum.accumulate(learned, axis=0)
    return _mean_lower(best_since[:-1] - A[1:], T)


@CONTINUAL.metric(
    "forward_transfer_avalanche",
    higher_is_better=True,
    bounds=(-1.0, 1.0),
    description="Avalanche StreamForwardTransfer: like forward_transfer but one task ahead (after task t "
    "it already counts task t+1).",
    latex=r"\frac{1}{m}\sum_{1\le i\le m} A_{i-1,i} - b_i,\ m=\min(t+1, T-1)",
    needs=("A", "b"),
)
def _forward_transfer_avalanche_series(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(1/m) Σ_{1<=i<=m} (A[i−1][i] − b[i])``, ``m = min(t + 1, T − 1)``, for every t; 0 when T = 1 (Avalanche
    ``StreamForwardTransfer``)."""
    T = A.shape[0]
    if T == 1:
        return np.zeros(1)
    fwt = np.cumsum(_fwt_terms(A, b)) / np.arange(1, T)  # fwt[m-1] averages terms i = 1..m
    m = np.minimum(np.arange(T) + 1, T - 1)
    return fwt[m - 1]


# ------------------------------------------------------------------------------------- per-step API


def average_accuracy(A, task_id: int) -> float:
    """Average accuracy after learning task ``t``: ``(1/(t+1)) Σ_{i<=t} A[t][i]``.

    Matches renate.evaluation.metrics.classification.average_accuracy (Renate 0.5.2).
    """
    A = _check_matrix(A)
    t = _check_task_id(task_id, A.shape[0])
    return float(_average_accuracy_series(A[: t + 1, : t + 1])[t])


@np.errstate(over="ignore", invalid="ignore")  # an overflow is returned as N/A, not printed
def micro_average_accuracy(A, task_id: int, num_instances) -> float | NA:
    """Micro average accuracy after task ``t``: ``Σ_{i<=t} A[t][i]·n[i] / Σ_{i<=t} n[i]``.

    The share of correctly classified test samples of tasks ``0..t`` pooled. ``num_instances`` holds the
    test size of every task (length T, whole non-negative numbers, ``Σ_{i<=t} n[i] > 0``); sizes so large
    that the sums overflow float64 (1e308) give :class:`NA` with the reason.
    Matches renate.evaluation.metrics.classification.micro_average_accuracy (Renate 0.5.2).
    """
    A = _check_matrix(A)
    T = A.shape[0]
    t = _check_task_id(task_id, T)
    n = _check_sizes(num_instances, T)
    total = n[: t + 1].sum()
    if total == 0:
        raise MetricInputError(
            f"num_instances: the total test size of tasks 0..{t} is zero; micro average accuracy is undefined"
        )
    value = A[t, : t + 1] @ n[: t + 1] / total
    return float(value) if np.isfinite(value) else NA(MICRO_OVERFLOW)


def forgetting(A, task_id: int) -> float:
    """Forgetting after task ``t``: ``(1/t) Σ_{i<t} ( max_{k<t} A[k][i] − A[t][i] )``, 0.0 at ``t = 0``.

    Chaudhry et al. (2018) as Renate computes it: the max runs over ALL earlier rows ``k < t``, including
    rows before task ``i`` was learned, so the value may be negative (see ``forgetting_since_learned`` for
    the max over ``k in [i, t)`` only).
    Matches renate.evaluation.metrics.classification.forgetting (Renate 0.5.2).
    """
    A = _check_matrix(A)
    t = _check_task_id(task_id, A.shape[0])
    return float(_forgetting_series(A[: t + 1, : t + 1])[t])


def backward_transfer(A, task_id: int) -> float:
    """Backward transfer after task ``t``: ``(1/t) Σ_{i<t} ( A[t][i] − A[i][i] )``, 0.0 at ``t = 0``.

    Matches renate.evaluation.metrics.classification.backward_transfer (Renate 0.5.2).
    """
    A = _check_matrix(A)
    t = _check_task_id(task_id, A.shape[0])
    return float(_backward_transfer_series(A[: t + 1, : t + 1])[t])


def forward_transfer(A, task_id: int, init_accuracy) -> float:
    """Forward transfer after task ``t``: ``(1/t) Σ_{1<=i<=t} ( A[i−1][i] − b[i] )``, 0.0 at ``t = 0``.

    ``init_accuracy`` is ``b`` (length T): the accuracy on every task before any update (Renate's
    ``results["accuracy_init"][0]``).
    Matches renate.evaluation.metrics.classification.forward_transfer (Renate 0.5.2).
    """
    A = _check_matrix(A)
    T = A.shape[0]
    t = _check_task_id(task_id, T)
    b = _check_init(init_accuracy, T)
    return float(_forward_transfer_series(A[: t + 1, : t + 1], b[: t + 1])[t])


def forgetting_avalanche(A, task_id: int) -> float:
    """Avalanche-style forgetting after task ``t``: ``(1/t) Σ_{i<t} ( A[i][i] − A[t][i] )``, 0.0 at ``t = 0``.

    What Avalanche's ``StreamForgetting`` reports after training experience ``t``: for each experience
    trained before, its accuracy right after it was trained minus its current accuracy, averaged (an
    empty average is 0). No max over rows, so it equals ``-backward_transfer``. Not a Renate metric.
    """
    A = _check_matrix(A)
    t = _check_task_id(task_id, A.shape[0])
    return float(_forgetting_avalanche_series(A[: t + 1, : t + 1])[t])


def forgetting_since_learned(A, task_id: int) -> float:
    """Forgetting with the max since learning: ``(1/t) Σ_{i<t} ( max_{i<=k<t} A[k][i] − A[t][i] )``.

    0.0 at ``t = 0``. Unlike Renate's ``forgetting`` the best accuracy is taken only from row ``i`` (right
    after task ``i`` was learned) onwards, so accuracy a task happened to have before it was trained does
    not count. Each term is >= ``A[i][i] − A[t][i]``. Not a Renate metric.
    """
    A = _check_matrix(A)
    t = _check_task_id(task_id, A.shape[0])
    return float(_forgetting_since_learned_series(A[: t + 1, : t + 1])[t])


def forward_transfer_avalanche(A, task_id: int, init_accuracy) -> float:
    """Avalanche-style forward transfer after task ``t``, one task ahead of Renate's.

    ``(1/m) Σ_{1<=i<=m} ( A[i−1][i] − b[i] )`` with ``m = min(t + 1, T − 1)``: after training task ``t``
    Avalanche's ``StreamForwardTransfer`` already counts task ``t+1`` (evaluated after its predecessor).
    0.0 when ``T = 1`` (empty average). Equals ``forward_transfer`` at ``t = T − 1``. Not a Renate metric.
    """
    A = _check_matrix(A)
    T = A.shape[0]
    t = _check_task_id(task_id, T)
    b = _check_init(init_accuracy, T)
    return float(_forward_transfer_avalanche_series(A, b)[t])


# ------------------------------------------------------------------------------------------ bundles


def continual_metrics(A, *, init_accuracy=None, num_instances=None) -> MetricResults:
    """All continual metrics of ``A``: the final value (at ``t = T − 1``) of each and a Series over ``t``.

    Every metric registered in :data:`CONTINUAL` is computed, in order, from ``A`` and, when it needs them,
    ``b = init_accuracy`` (the forward-transfer metrics) and ``n = num_instances`` (the micro average); when
    one is None those metrics are N/A with the reason. Names as in ``SPECS``; series steps are task ids ``0..T-1``.
    """
    A = _check_matrix(A)
    T = A.shape[0]
    inputs = {
        "A": A,
        "n": None if num_instances is None else _check_sizes(num_instances, T),
        "b": None if init_accuracy is None else _check_init(init_accuracy, T),
    }
    results = MetricResults()
    steps = np.arange(T)
    for _, values, _ in CONTINUAL.compute(inputs):
        for name, per_step in values.items():
            if isinstance(per_step, NA):
                results.set(name, per_step)
            else:
                results.set(name, per_step[-1])
                results.series[name] = Series(steps, per_step)
    return results


def from_renate_results(results: dict) -> tuple[np.ndarray, np.ndarray | None]:
    """``(A, b)`` from a Renate results dict (``results["accuracy"]``, optional ``results["accuracy_init"]``).

    ``b`` is None when ``accuracy_init`` is absent. Values are checked as ``continual_metrics`` does.
    """
    if not isinstance(results, dict):
        raise MetricInputError(f"results: expected a Renate results dict, got {type(results).__name__}")
    if "accuracy" not in results:
        raise MetricInputError(
            f"results: expected a Renate results dict with key 'accuracy', got keys {sorted(results)}"
        )
    A = _check_matrix(results["accuracy"])
    b = None
    if "accuracy_init" in results:
        init = as_array("results['accuracy_init']", results["accuracy_init"], shape=(1, A.shape[0]))
        b = _check_init(init[0], A.shape[0])
    return A, b
