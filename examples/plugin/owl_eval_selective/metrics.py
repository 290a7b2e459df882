"""Selective classification metrics: risk-coverage curve, AURC, E-AURC and selective risk at a coverage.

An agent returns, for each of ``n`` test samples, a predicted class and a confidence (higher means more
confident). A selective classifier accepts the samples whose confidence is at least a threshold ``t`` and
abstains on the rest. The loss of a sample is the 0/1 error ``e_i = [y_pred_i != y_true_i]``.

Notation used in every docstring below. Sort the samples by confidence, highest first, and write
``E_k`` for the number of errors among the first ``k`` samples. Let ``t_1 > t_2 > ... > t_m`` be the
distinct confidence values and ``k_j`` the number of samples with confidence ``>= t_j`` (so
``k_1 < ... < k_m = n``; ``k_0 = 0``). Threshold ``t_j`` gives

    coverage  c_j = k_j / n
    risk      r_j = E_{k_j} / k_j      (selective risk: errors among the accepted / accepted)

Ties: samples with equal confidence cannot be told apart by a threshold, so they are accepted or rejected
together: one curve point per distinct value (``ties="group"``, the default everywhere). ``ties="order"``
instead breaks ties by input order (earlier sample first, i.e. a stable sort) and gives one point per
sample (``k_j = j``, ``m = n``); that reproduces reference code that sorts the samples and walks the
sorted list one sample at a time (see :func:`aurc`). Without ties the two are identical.

The coverage-0 point is never part of the curve: no sample is accepted there and the selective risk
0/0 is undefined.

All functions are vectorised numpy (one sort, one cumulative sum); none loops over samples. The metrics the
protocol reports are registered at the end (``@SELECTIVE.metric``): each one's declaration on a function of the
record's arrays and the typed options that calls the functions above.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable

import numpy as np

from owl_eval.metrics.results import Series
from owl_eval_selective.specs import SELECTIVE, SERIES, coverage_name, coverage_spec

__all__ = [
    "SPECS",
    "aurc",
    "coverage_at_risk",
    "excess_aurc",
    "risk_at_coverages",
    "risk_coverage_curve",
    "selective_risk",
]

_TIES = ("group", "order")
_INTEGRATIONS = ("step", "trapezoid")
_OPTIMA = ("empirical", "closed_form")


# ---------------------------------------------------------------------------------------------- validation


def _as_1d(name: str, value, what: str, n: int | None) -> np.ndarray:
    """``value`` as a 1-D non-empty numpy array of length ``n`` (when given); ValueError naming ``name``."""
    length = "" if n is None else f" of length {n} (one per sample, like y_true)"
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{name}: expected a 1-D array of {what}{length}, got {type(value).__name__} ({exc})"
        ) from None
    if arr.ndim != 1:
        raise ValueError(f"{name}: expected a 1-D array of {what}{length}, got shape {arr.shape}")
    if arr.shape[0] == 0:
        raise ValueError(f"{name}: expected a non-empty 1-D array of {what}, got an empty array (shape (0,))")
    if n is not None and arr.shape[0] != n:
        raise ValueError(f"{name}: expected a 1-D array of {what}{length}, got length {arr.shape[0]}")
    return arr


def _labels(name: str, value, n: int | None) -> np.ndarray:
    what = "integer class labels"
    arr = _as_1d(name, value, what, n)
    if arr.dtype.kind in "biu":
        return arr
    if arr.dtype.kind == "f":
        bad = ~np.isfinite(arr) | (arr != np.round(arr))
        if not bad.any():
            return arr.astype(np.int64)
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"{name}: expected a 1-D array of {what} of length {arr.shape[0]}, got the non-integer value {float(arr[i])} at index {i}"
        )
    raise ValueError(f"{name}: expected a 1-D array of {what} of length {arr.shape[0]}, got dtype {arr.dtype}")


def _confidence(value, n: int) -> np.ndarray:
    what = "finite floats"
    arr = _as_1d("confidence", value, what, n)
    if arr.dtype.kind not in "biuf":
        raise ValueError(
            f"confidence: expected a 1-D array of {what} of length {n} (one per sample), got dtype {arr.dtype}"
        )
    arr = arr.astype(np.float64)
    bad = ~np.isfinite(arr)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"confidence: expected a 1-D array of {what} of length {n} (one per sample), "
            f"got {int(bad.sum())} non-finite value(s) (first: {arr[i]} at index {i})"
        )
    return arr


def _errors_and_confidence(y_true, y_pred, confidence) -> tuple[np.ndarray, np.ndarray]:
    true = _labels("y_true", y_true, None)
    pred = _labels("y_pred", y_pred, true.shape[0])
    conf = _confidence(confidence, true.shape[0])
    return pred != true, conf


def _option(name: str, value, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name}: expected one of {list(allowed)}, got {value!r}")
    return value


def _fraction(name: str, value, *, zero_ok: bool) -> float:
    interval = "[0, 1]" if zero_ok else "(0, 1]"
    if isinstance(value, bool | np.bool_) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name}: expected a float in {interval}, got {value!r}")
    v = float(value)
    if not (0.0 <= v <= 1.0) or (v == 0.0 and not zero_ok):  # also rejects NaN
        raise ValueError(f"{name}: expected a float in {interval}, got {value!r}")
    return v


# ------------------------------------------------------------------------------------------------ the curve


def _points(errors: np.ndarray, confidence: np.ndarray, ties: str):
    """Accepted counts ``k_j``, error counts ``E_{k_j}`` and thresholds ``t_j``, by decreasing threshold."""
    order = np.argsort(-confidence, kind="stable")  # highest first; ties keep input order
    conf = confidence[order]
    cum_errors = np.cumsum(errors[order], dtype=np.int64)
    if ties == "group":
        ends = np.flatnonzero(np.append(conf[1:] != conf[:-1], True))  # last sample of each tie block
    else:
        ends = np.arange(conf.shape[0])
    return ends + 1, cum_errors[ends], conf[ends]


def risk_coverage_curve(y_true, y_pred, confidence, *, ties: str = "group"):
    """Risk-coverage curve of a selective classifier, one point per distinct confidence threshold.

    For each distinct confidence value ``t_j`` (from highest to lowest) the classifier accepts the samples
    with ``confidence >= t_j``; the point is ``(c_j, r_j) = (k_j / n, E_{k_j} / k_j)``, see the module
    docstring. Samples with equal confidence are accepted or rejected together, as in FD-Shifts'
    ``selective_risk_stats`` (IML-DKFZ/fd-shifts, ``fd_shifts/analysis/rc_stats_utils.py``), which adds a
    point only where the sorted confidence changes.

    The curve does **not** include a coverage-0 point (risk 0/0 is undefined there). FD-Shifts appends
    ``(0, r_1)`` to draw a flat segment down to coverage 0; :func:`aurc` with
    ``integration="trapezoid"`` integrates that flat segment, but it is not returned here.

    Parameters
    ----------
    y_true, y_pred : array-like of int, shape (n,)
        True and predicted class labels; ``n >= 1``.
    confidence : array-like of float, shape (n,)
        Finite confidence scores, higher = more confident.
    ties : {"group", "order"}, keyword-only
        ``"group"`` (default): one point per distinct confidence value. ``"order"``: ties broken by input
        order (stable sort), one point per sample, ``thresholds`` then repeats tied values.

    Returns
    -------
    coverage : ndarray of float, shape (m,)
        Strictly increasing, in ``(0, 1]``; the last value is 1.0.
    risk : ndarray of float, shape (m,)
        Selective risk at each coverage, in ``[0, 1]``.
    thresholds : ndarray of float, shape (m,)
        The confidence threshold of each point, decreasing (like :func:`sklearn.metrics.roc_curve`).
    """
    ties = _option("ties", ties, _TIES)
    errors, conf = _errors_and_confidence(y_true, y_pred, confidence)
    n = errors.shape[0]
    accepted, n_errors, thresholds = _points(errors, conf, ties)
    return accepted / n, n_errors / accepted, thresholds


# ------------------------------------------------------------------------------------------------ AURC


def _area(accepted: np.ndarray, n_errors: np.ndarray, n: int, integration: str) -> float:
    risk = n_errors / accepted
    if integration == "step":
        return float(np.dot(np.diff(accepted, prepend=0), risk) / n)
    coverage = accepted / n
    return float(coverage[0] * risk[0] + np.sum(np.diff(coverage) * (risk[1:] + risk[:-1]) / 2.0))


def _optimal_area(n_errors_total: int, n: int, integration: str) -> float:
    """AURC of the oracle ranking: every correct sample strictly above every error, no ties."""
    k = np.arange(1, n + 1)
    return _area(k, np.maximum(k - (n - n_errors_total), 0), n, integration)


def aurc(y_true, y_pred, confidence, *, ties: str = "group", integration: str = "step") -> float:
    """Area under the risk-coverage curve (AURC), lower is better.

    Geifman, Uziel & El-Yaniv, "Bias-Reduced Uncertainty Estimation for Deep Neural Classifiers",
    ICLR 2019. Default (``integration="step"``), with the notation of the module docstring::

        AURC = sum_{j=1..m} (k_j - k_{j-1}) / n * r_j

    i.e. the mean, over the ``n`` samples, of the selective risk at the threshold that first accepts the
    sample. Without ties (or with ``ties="order"``) this is ``AURC = (1/n) sum_{k=1..n} E_k / k``: the
    per-sample mean of the risk over the sorted prefixes, which is how the authors' code integrates
    (``RC_curve`` in geifmany/uncertainty_ICLR, ``utils/uncertainty_tools.py``: ``AUC = mean`` of the ``n``
    curve points). It equals the area under the right-continuous step curve ``r(c) = r_j`` for
    ``c in (c_{j-1}, c_j]``, so ``aurc(...) == np.dot(np.diff(coverage, prepend=0), risk)`` for the
    output of :func:`risk_coverage_curve` with the same ``ties``.

    Differences from that file, on purpose:

    * Off-by-one: its loop divides the errors among the top ``k`` samples by ``k + 1`` for ``k < n``
      (``acc / (m - i)`` after ``m - i - 1`` samples remain). We divide by ``k``, as do the widely used
      re-implementations ``coverage_risk``/``aurc_eaurc`` (daintlab/confidence-aware-learning,
      ``metrics.py``) and ``_aurc_rejection_rate_compute`` (ENSTA-U2IS-AI/torch-uncertainty,
      ``src/torch_uncertainty/metrics/classification/risk_coverage.py``).
    * Ties: it sorts with ``np.argsort`` (unstable), so tied samples enter in an arbitrary order and the
      value depends on it. ``ties="group"`` (default) accepts tied samples together: every sample in a
      tie block gets the risk at the block's threshold. ``ties="order"`` breaks ties by input order and
      reproduces ``calc_aurc_eaurc`` of daintlab/confidence-aware-learning exactly (its ``sorted(...,
      reverse=True)`` is stable).

    ``integration="trapezoid"`` matches FD-Shifts' ``RiskCoverageStats(confids, residuals).aurc``
    (IML-DKFZ/fd-shifts, ``fd_shifts/analysis/rc_stats.py``, ``evaluate_auc`` with its default
    ``interpolation="linear"``; FD-Shifts multiplies by ``AUC_DISPLAY_SCALE = 1000``, we do not): the
    trapezoid rule over the distinct-threshold points, plus the flat segment ``(0, r_1)``-``(c_1, r_1)``::

        AURC_trapz = c_1 r_1 + sum_{j=2..m} (c_j - c_{j-1}) (r_j + r_{j-1}) / 2

    torch-uncertainty's ``AURC`` is the trapezoid over the per-sample points on ``[1/n, 1]`` only, divided
    by ``1 - 1/n``: ``(aurc(..., ties="order", integration="trapezoid") - r_1 / n) / (1 - 1/n)``.

    Parameters
    ----------
    y_true, y_pred : array-like of int, shape (n,)
    confidence : array-like of float, shape (n,)
    ties : {"group", "order"}, keyword-only
    integration : {"step", "trapezoid"}, keyword-only

    Returns
    -------
    float in ``[0, 1]``. 0 when every prediction is correct, 1 when every prediction is wrong.
    """
    ties = _option("ties", ties, _TIES)
    integration = _option("integration", integration, _INTEGRATIONS)
    errors, conf = _errors_and_confidence(y_true, y_pred, confidence)
    accepted, n_errors, _ = _points(errors, conf, ties)
    return _area(accepted, n_errors, errors.shape[0], integration)


def excess_aurc(
    y_true,
    y_pred,
    confidence,
    *,
    ties: str = "group",
    integration: str = "step",
    optimal: str = "empirical",
) -> float:
    """Excess AURC (E-AURC): AURC minus the AURC of the best confidence ranking for the same errors.

    Geifman, Uziel & El-Yaniv, ICLR 2019, Sec. 3: ``E-AURC = AURC(kappa) - AURC(kappa*)`` where
    ``kappa*`` ranks every correct prediction above every error. ``AURC`` is :func:`aurc` with the same
    ``ties`` and ``integration``.

    ``optimal="empirical"`` (default) evaluates ``AURC(kappa*)`` exactly on the ``n`` samples: with
    ``M`` errors and the oracle ranking (strict, no ties), ``E_k = max(0, k - (n - M))``, so for the
    default step integration::

        AURC(kappa*) = (1/n) sum_{k=n-M+1..n} (k - (n - M)) / k

    A perfect ranking therefore scores exactly 0 and, with ``integration="step"``, E-AURC is never
    negative (ties among the errors, or between an error and a correct sample, make it positive).
    The trapezoid optimum applies the same trapezoid rule to these per-sample points.

    ``optimal="closed_form"`` uses the paper's closed form, which is the integral of the oracle curve
    ``r*(c) = max(0, 1 - (1 - R)/c)`` over ``c in [0, 1]`` and the large-``n`` limit of the above::

        AURC(kappa*) ~= R + (1 - R) ln(1 - R),      R = M / n (the overall error rate)

    This is what the reference code computes (``kappa_star_aurc`` in ``RC_curve``,
    geifmany/uncertainty_ICLR ``utils/uncertainty_tools.py``; ``aurc_eaurc`` in
    daintlab/confidence-aware-learning ``metrics.py``; ``aurc_optimal`` for binary residuals in
    IML-DKFZ/fd-shifts ``fd_shifts/analysis/rc_stats.py``). Use it to reproduce published numbers; it
    differs from the exact value by O(1/n) and can make E-AURC slightly negative. At ``R = 1`` the
    reference code returns NaN (``0 * log 0``); we use the limit ``(1 - R) ln(1 - R) -> 0``.

    Returns
    -------
    float
    """
    ties = _option("ties", ties, _TIES)
    integration = _option("integration", integration, _INTEGRATIONS)
    optimal = _option("optimal", optimal, _OPTIMA)
    errors, conf = _errors_and_confidence(y_true, y_pred, confidence)
    n = errors.shape[0]
    accepted, n_errors, _ = _points(errors, conf, ties)
    value = _area(accepted, n_errors, n, integration)
    n_wrong = int(n_errors[-1])
    if optimal == "empirical":
        return value - _optimal_area(n_wrong, n, integration)
    rate = n_wrong / n
    return value - (rate + ((1.0 - rate) * math.log(1.0 - rate) if rate < 1.0 else 0.0))


# ------------------------------------------------------------------------------- operating points


def _risks_at(points, n: int, coverages: np.ndarray) -> np.ndarray:
    accepted, n_errors, _ = points
    # first point whose coverage k_j / n is >= c, compared as floats exactly as the curve reports them
    idx = np.searchsorted(accepted / n, coverages, side="left")
    return n_errors[idx] / accepted[idx]


def selective_risk(y_true, y_pred, confidence, *, coverage: float, ties: str = "group") -> float:
    """Selective risk (error rate among the accepted samples) at a target coverage ``c`` in ``(0, 1]``.

    Accept the highest-confidence samples until the coverage reaches ``c``: the operating point is the
    first point of :func:`risk_coverage_curve` with ``c_j >= c``, and the result is its risk ``r_j``.
    With ``ties="order"`` this accepts exactly the top ``k = min{k : k / n >= c}`` samples (ties broken
    by input order), as ``RiskAtxCov`` does (ENSTA-U2IS-AI/torch-uncertainty,
    ``src/torch_uncertainty/metrics/classification/risk_coverage.py``: ``error_rates[ceil(n * c) - 1]``).
    With ``ties="group"`` (default) a tie block straddling the cut is accepted whole, so the achieved
    coverage ``c_j`` can exceed ``c``; no tied sample is split off by its position in the input.

    We compare ``k / n >= c`` in floating point instead of computing ``ceil(n * c)``, which overshoots
    when ``n * c`` rounds up (``n = 100, c = 0.07``: ``100 * 0.07 = 7.000000000000001``, so torch-uncertainty
    accepts 8 samples; we accept 7). Other conventions: SelectiveNet (geifmany/selectivenet,
    ``selectivnet_utils.py``) accepts ``confidence > np.percentile(confidence, 100 - 100 c)`` (interpolated
    percentile, strict inequality); FD-Shifts' ``get_working_point(target_cov=c)`` returns the lowest
    risk over all points with coverage ``>= c``, not the one at ``c``.

    Returns
    -------
    float in ``[0, 1]``.
    """
    coverage = _fraction("coverage", coverage, zero_ok=False)
    ties = _option("ties", ties, _TIES)
    errors, conf = _errors_and_confidence(y_true, y_pred, confidence)
    return float(_risks_at(_points(errors, conf, ties), errors.shape[0], np.array([coverage]))[0])


def risk_at_coverages(
    y_true,
    y_pred,
    confidence,
    *,
    coverages: Iterable[float] = (0.8, 0.9, 0.95),
    ties: str = "group",
) -> dict[float, float]:
    """:func:`selective_risk` at several coverages from one sort: ``{coverage: risk}`` in the given order."""
    if isinstance(coverages, str | bytes) or not isinstance(coverages, Iterable):
        raise ValueError(f"coverages: expected an iterable of floats in (0, 1], got {coverages!r}")
    wanted = [_fraction(f"coverages[{i}]", c, zero_ok=False) for i, c in enumerate(coverages)]
    if not wanted:
        raise ValueError("coverages: expected at least one float in (0, 1], got an empty iterable")
    ties = _option("ties", ties, _TIES)
    errors, conf = _errors_and_confidence(y_true, y_pred, confidence)
    risks = _risks_at(_points(errors, conf, ties), errors.shape[0], np.array(wanted))
    return {c: float(r) for c, r in zip(wanted, risks)}


def coverage_at_risk(y_true, y_pred, confidence, *, risk: float, ties: str = "group") -> float:
    """Largest coverage whose selective risk is at most ``risk`` (in ``[0, 1]``); NaN if there is none.

    ``max{c_j : r_j <= risk}`` over the points of :func:`risk_coverage_curve`. The risk is not monotone
    in the coverage, so this is the largest admissible coverage, not the first crossing; this is the
    rule of ``CovAtxRisk`` (ENSTA-U2IS-AI/torch-uncertainty,
    ``src/torch_uncertainty/metrics/classification/risk_coverage.py``), which also returns NaN when no
    coverage is admissible, and of FD-Shifts' ``get_working_point(target_risk=...)``.

    Returns
    -------
    float in ``(0, 1]``, or NaN.
    """
    target = _fraction("risk", risk, zero_ok=True)
    ties = _option("ties", ties, _TIES)
    errors, conf = _errors_and_confidence(y_true, y_pred, confidence)
    accepted, n_errors, _ = _points(errors, conf, ties)
    ok = n_errors / accepted <= target
    return float(accepted[ok].max() / errors.shape[0]) if ok.any() else math.nan


# ---------------------------------------------------------------------------------------- registered metrics
# What the protocol reports, in this order: functions of the record's arrays and the typed ``metrics`` options
# (owl_eval_selective.options.SelectiveMetricOptions), each declared by its decorator.

_RECORD = ("y_true", "y_pred", "confidence")


@SELECTIVE.metric(
    "accuracy",
    higher_is_better=True,
    bounds=(0.0, 1.0),
    description="Accuracy at full coverage (every test sample accepted): 1 minus the full-coverage risk.",
    latex=r"1 - E_n / n",
    needs=("y_true", "y_pred"),
)
def _accuracy(y_true, y_pred) -> float:
    """``1 - E_n / n``: the share of correct predictions over all ``n`` samples."""
    return float(np.mean(np.asarray(y_pred) == np.asarray(y_true)))


@SELECTIVE.metric(
    "aurc",
    higher_is_better=False,
    bounds=(0.0, 1.0),
    description="Area under the risk-coverage curve (Geifman et al., ICLR 2019): mean over the samples of the "
    "selective risk at the threshold that first accepts the sample (metrics.integration=step).",
    latex=r"\sum_j \frac{k_j - k_{j-1}}{n} r_j",
    needs=(*_RECORD, "options"),
)
def _aurc(y_true, y_pred, confidence, options) -> float:
    """:func:`aurc` with ``metrics.ties`` and ``metrics.integration``."""
    return aurc(y_true, y_pred, confidence, ties=options.ties, integration=options.integration)


@SELECTIVE.metric(
    "excess_aurc",
    higher_is_better=False,
    bounds=(-1.0, 1.0),
    description="E-AURC: AURC minus the AURC of the oracle ranking (every correct prediction above every error) "
    "for the same errors; exact on the n samples (metrics.optimal=empirical), or the paper's closed form.",
    latex=r"\mathrm{AURC} - \mathrm{AURC}(\kappa^*)",
    needs=(*_RECORD, "options"),
)
def _excess_aurc(y_true, y_pred, confidence, options) -> float:
    """:func:`excess_aurc` with ``metrics.ties``, ``metrics.integration`` and ``metrics.optimal``."""
    return excess_aurc(
        y_true, y_pred, confidence, ties=options.ties, integration=options.integration, optimal=options.optimal
    )


@SELECTIVE.family(coverage_spec(), needs=(*_RECORD, "options"))
def _risks_at_coverages(y_true, y_pred, confidence, options) -> dict[str, float]:
    """``risk_at_<k>_coverage``: :func:`selective_risk` at each coverage of ``metrics.coverages`` (k in percent)."""
    risks = risk_at_coverages(y_true, y_pred, confidence, coverages=options.coverages, ties=options.ties)
    return {coverage_name(coverage): risk for coverage, risk in risks.items()}


@SELECTIVE.metric(
    SERIES,
    higher_is_better=False,
    bounds=(0.0, 1.0),
    description="The risk-coverage curve: selective risk at each distinct confidence threshold, step = number of "
    "accepted test samples k_j (coverage k_j / num_test).",
    series=True,
    needs=(*_RECORD, "options"),
)
def _risk_coverage(y_true, y_pred, confidence, options) -> Series:
    """:func:`risk_coverage_curve` as a series: step ``k_j`` (accepted samples), value ``r_j``."""
    coverage, risk, _ = risk_coverage_curve(y_true, y_pred, confidence, ties=options.ties)
    accepted = np.rint(coverage * len(y_true)).astype(np.int64)  # k_j: the curve's coverages are k_j / n
    return Series(accepted, risk)


#: every declaration of the registered selective metrics (what owl-eval's metric registry reads)
SPECS = SELECTIVE.specs
