"""Statistics for comparing agents over seeds: interquartile mean, probability of improvement, stratified
bootstrap intervals, performance profiles, paired differences, Holm's correction, and rounding a value to
the digits its interval supports. Pure functions of arrays (numpy and scipy only; no MLflow).

The definitions follow Agarwal et al. 2021, "Deep reinforcement learning at the edge of the statistical
precipice" (NeurIPS), as implemented in rliable (``rliable/metrics.py``, ``rliable/library.py``); each
function names the rliable function it matches and says where it differs on purpose. rliable is not a
dependency (it pulls in ``arch``, ``absl`` and more).

Shapes. Scores are ``(runs, tasks)``: ``scores[n, m]`` is run ``n`` (a seed) on task ``m``; a 1-D array is
``(runs,)`` on one task. Every task has the same number of runs.

Missing values. NaN and inf are refused (:class:`~owl_eval.errors.MetricInputError` naming the argument and
the index): a statistic over runs is only meaningful when the caller decides what a missing run means, so
drop the run (or the seed, for paired data) before calling. :func:`holm` is the exception: a NaN p-value (a
comparison that could not be made) stays NaN and is not counted among the tests.

Randomness. Every bootstrap takes ``rng``: a ``numpy.random.Generator`` or an int seed, required (a verdict
a paper cites must be reproducible). rliable draws from numpy's global state even when given a
``random_state``; here the ``rng`` given is the only source.

Vectorised: the replicates of a bootstrap are drawn as one index array and a statistic is computed on all
of them at once (in blocks that bound memory), never in a Python loop over replicates or runs.

Differences from rliable, on purpose:

- ``rng`` is required and is the only source of randomness (rliable's bootstrap classes draw with
  ``np.random.choice``, numpy's global state, whatever ``random_state`` they are given);
- a statistic for the bootstrap is batched: it takes all replicates at once, (replicates, runs, tasks) per
  sample (rliable calls its ``func`` once per replicate through ``arch``);
- intervals are percentile intervals over runs only: no ``basic``/``bc``/``bca`` method, no
  ``task_bootstrap``; the default ``reps`` is 2000 (rliable's ``get_interval_estimates``: 50000; its
  ``create_performance_profile``: 2000);
- NaN and inf are refused (rliable passes them on to numpy and scipy);
- :func:`probability_of_improvement` and :func:`performance_profile` take ``higher_is_better`` (rliable
  assumes higher is better); the IQM sorts instead of calling ``trim_mean`` and the probability of
  improvement ranks instead of calling ``mannwhitneyu`` (the same values, computed for all replicates at once);
- :func:`paired_difference`, :func:`sign_flip_p_value`, :func:`holm` and :func:`round_to_ci` have no
  rliable counterpart (rliable compares agents with unpaired runs only).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from functools import lru_cache

import numpy as np

from owl_eval.errors import MetricInputError
from owl_eval.metrics.validation import as_array

# A bootstrap holds at most this many numbers in one block of replicates (about 32 MB of float64).
BLOCK_ELEMENTS = 1 << 22
# The paired sign-flip test enumerates all 2**n sign patterns up to this many seeds, then samples them.
EXACT_PERMUTATION_MAX_SEEDS = 16
ALTERNATIVES = ("two-sided", "greater", "less")

Rng = np.random.Generator | int | np.random.SeedSequence
# A batched statistic: arrays of resamples, each (replicates, runs, tasks), to (replicates,) or (replicates, k).
Statistic = Callable[..., np.ndarray]


# -- input checks ----------------------------------------------------------------------------------------
def _scores(name: str, value) -> np.ndarray:
    """``value`` as a float (runs, tasks) array (1-D is one task), finite, at least one run and task."""
    arr = as_array(name, value)
    if arr.ndim not in (1, 2):
        raise MetricInputError(
            f"{name}: expected a 1-D array (runs,) or a 2-D array (runs, tasks), got shape {arr.shape}"
        )
    if arr.ndim == 1:
        arr = arr[:, None]
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise MetricInputError(f"{name}: expected at least one run and one task (runs, tasks), got shape {arr.shape}")
    _finite(name, arr)
    return arr


def _finite(name: str, arr: np.ndarray) -> None:
    bad = ~np.isfinite(arr)
    if bad.any():
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        raise MetricInputError(
            f"{name}: {arr[index]} at index {index} ({int(bad.sum())} non-finite value(s)); "
            "statistics take no missing values: drop the run (or the seed) first"
        )


def _same_tasks(names: Sequence[str], arrays: Sequence[np.ndarray]) -> None:
    tasks = arrays[0].shape[1]
    for name, arr in zip(names[1:], arrays[1:]):
        if arr.shape[1] != tasks:
            raise MetricInputError(
                f"{name}: expected the same tasks as {names[0]} ({tasks}), got shape {arr.shape} "
                f"({arr.shape[1]} tasks); shapes are (runs, tasks)"
            )


def _reps(reps) -> int:
    if isinstance(reps, bool) or not isinstance(reps, int | np.integer) or reps < 1:
        raise MetricInputError(f"reps: expected a whole number of bootstrap replicates >= 1, got {reps!r}")
    return int(reps)


def _confidence(confidence) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, int | float) or not 0 < confidence < 1:
        raise MetricInputError(f"confidence: expected a number strictly between 0 and 1 (0.95), got {confidence!r}")
    return float(confidence)


def _rng(rng) -> np.random.Generator:
    if rng is None:
        raise MetricInputError(
            "rng: expected a numpy Generator or an int seed, got None (bootstrap intervals must be reproducible)"
        )
    if isinstance(rng, bool) or not isinstance(rng, np.random.Generator | int | np.integer | np.random.SeedSequence):
        raise MetricInputError(f"rng: expected a numpy Generator or an int seed, got {type(rng).__name__}")
    return np.random.default_rng(rng)


def _direction(higher_is_better) -> bool:
    if not isinstance(higher_is_better, bool | np.bool_):
        raise MetricInputError(f"higher_is_better: expected True or False, got {higher_is_better!r}")
    return bool(higher_is_better)


# -- statistics over runs and tasks ----------------------------------------------------------------------
def iqm(scores) -> float:
    """Interquartile mean over all runs and tasks: the mean of the middle 50 % of the pooled scores.

    As rliable's ``metrics.aggregate_iqm``: ``scipy.stats.trim_mean(scores, 0.25, axis=None)``, i.e.
    ``int(0.25 * N)`` scores cut from each end of the ``N`` sorted scores.
    """
    return float(batch_iqm(_scores("scores", scores)[None])[0])


def batch_iqm(samples: np.ndarray) -> np.ndarray:
    """:func:`iqm` of each replicate of ``samples`` (replicates, runs, tasks) -> (replicates,).

    ``trim_mean``'s definition written out (sort, drop ``int(0.25 N)`` from each end, average): the same
    values up to the order of summation, and 9x faster on 2000 x 50 scores than scipy's (array-API overhead
    and a partition per row)."""
    pooled = np.sort(samples.reshape(samples.shape[0], -1), axis=1)
    total = pooled.shape[1]
    cut = int(0.25 * total)
    return pooled[:, cut : total - cut].mean(axis=1)


def batch_mean(samples: np.ndarray) -> np.ndarray:
    """Mean over runs and tasks (rliable's ``aggregate_mean``: the mean of the task means) per replicate."""
    return samples.mean(axis=(1, 2))


def batch_median(samples: np.ndarray) -> np.ndarray:
    """Median of the task means (rliable's ``aggregate_median``) per replicate."""
    return np.median(samples.mean(axis=1), axis=1)


def probability_of_improvement(x, y, *, higher_is_better: bool = True) -> float:
    """P(X > Y) + 1/2 P(X = Y) per task, averaged over tasks: the chance that a run of X beats a run of Y.

    ``x`` (runs_x, tasks) and ``y`` (runs_y, tasks) (1-D: one task). As rliable's
    ``metrics.probability_of_improvement``: per task the Mann-Whitney U statistic of X (pairs where X wins,
    ties counted 1/2) divided by ``runs_x * runs_y``, then the mean over tasks. With ``higher_is_better=False``
    a lower score wins (the scores of both are negated).
    """
    a, b = _scores("x", x), _scores("y", y)
    _same_tasks(["x", "y"], [a, b])
    if not _direction(higher_is_better):
        a, b = -a, -b
    return float(batch_probability_of_improvement(a[None], b[None])[0])


def batch_probability_of_improvement(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """:func:`probability_of_improvement` of X over Y for each replicate: x (replicates, runs_x, tasks),
    y (replicates, runs_y, tasks) -> (replicates,). U from the average ranks of the pooled runs of each task:
    ``U_x = (sum of X's ranks) - runs_x (runs_x + 1) / 2``."""
    nx, ny = x.shape[1], y.shape[1]
    ranks = average_ranks(np.concatenate([x, y], axis=1), axis=1)
    u = ranks[:, :nx, :].sum(axis=1) - nx * (nx + 1) / 2  # (replicates, tasks)
    return (u / (nx * ny)).mean(axis=1)


def average_ranks(a: np.ndarray, *, axis: int = -1) -> np.ndarray:
    """Ranks 1..n of the values of ``a`` along ``axis``, tied values sharing the mean of their ranks: as
    ``scipy.stats.rankdata(a, method="average", axis=axis)`` for finite values. Here rather than imported: a
    comparison would otherwise import ``scipy.stats`` (~1 s) for its ranks alone.

    Sorted, a run of equal values at positions ``first..last`` (from 0) all get ``(first + last) / 2 + 1``."""
    values = np.moveaxis(np.asarray(a), axis, -1)
    n = values.shape[-1]
    order = np.argsort(values, axis=-1, kind="stable")
    ordered = np.take_along_axis(values, order, axis=-1)
    position = np.broadcast_to(np.arange(n), ordered.shape)
    starts = np.ones(ordered.shape, dtype=bool)  # a tie run starts here
    starts[..., 1:] = ordered[..., 1:] != ordered[..., :-1]
    ends = np.ones(ordered.shape, dtype=bool)  # a tie run ends here
    ends[..., :-1] = starts[..., 1:]
    first = np.maximum.accumulate(np.where(starts, position, 0), axis=-1)
    last = np.flip(np.minimum.accumulate(np.flip(np.where(ends, position, n - 1), axis=-1), axis=-1), axis=-1)
    ranks = np.empty(ordered.shape, dtype=np.float64)
    np.put_along_axis(ranks, order, (first + last) / 2.0 + 1.0, axis=-1)
    return np.moveaxis(ranks, -1, axis)


STATISTICS: dict[str, Statistic] = {
    "iqm": batch_iqm,
    "mean": batch_mean,
    "median": batch_median,
    "probability_of_improvement": batch_probability_of_improvement,
}


# -- the stratified bootstrap ----------------------------------------------------------------------------
@dataclass(frozen=True)
class Interval:
    """A point estimate and its percentile bootstrap interval (``low``/``high`` NaN when there is none)."""

    estimate: float
    low: float
    high: float
    confidence: float = 0.95

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2

    def __str__(self) -> str:
        return str(round_to_ci(self.estimate, self.low, self.high))


@dataclass(frozen=True)
class Band:
    """A vector statistic (a performance profile) and its pointwise percentile bootstrap band."""

    estimate: np.ndarray
    low: np.ndarray
    high: np.ndarray
    confidence: float = 0.95


def resample_indices(runs: int, tasks: int, replicates: int, rng: np.random.Generator) -> np.ndarray:
    """Run indices of ``replicates`` stratified resamples, (replicates, runs, tasks): within each task
    (stratum) ``runs`` runs drawn with replacement, independently per task and replicate (rliable's
    ``StratifiedBootstrap.update_indices`` draws one such (runs, tasks) array per replicate)."""
    return rng.integers(0, runs, size=(replicates, runs, tasks))


def _statistic(statistic) -> Statistic:
    if isinstance(statistic, str):
        if statistic not in STATISTICS:
            raise MetricInputError(f"statistic: expected a callable or one of {sorted(STATISTICS)}, got {statistic!r}")
        return STATISTICS[statistic]
    if not callable(statistic):
        raise MetricInputError(
            f"statistic: expected a callable or one of {sorted(STATISTICS)}, got {type(statistic).__name__}"
        )
    return statistic


def _apply(fn: Statistic, batch: Sequence[np.ndarray]) -> np.ndarray:
    """``fn`` on a batch of resamples, checked to give (replicates,) or (replicates, k); -> (replicates, k)."""
    count = batch[0].shape[0]
    out = np.asarray(fn(*batch), dtype=float)
    if out.ndim == 1 and out.shape[0] == count:
        return out[:, None]
    if out.ndim == 2 and out.shape[0] == count:
        return out
    shapes = ", ".join(str(b.shape) for b in batch)
    raise MetricInputError(
        f"statistic: expected an array of shape ({count},) or ({count}, k) from resamples of shape {shapes} "
        f"(replicates, runs, tasks), got shape {out.shape}; a statistic takes a batch of resamples "
        "(see owl_eval.stats.STATISTICS)"
    )


def _replicates(
    samples: Sequence[np.ndarray], fn: Statistic, reps: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Point estimate (k,) and bootstrap replicates (reps, k): each sample resampled within its tasks,
    independently of the others (rliable's ``StratifiedIndependentBootstrap`` for two or more)."""
    point = _apply(fn, [s[None] for s in samples])[0]
    per_replicate = max(s.size for s in samples)
    block = max(1, min(reps, BLOCK_ELEMENTS // per_replicate))
    out = np.empty((reps, point.shape[0]))
    tasks = [np.arange(s.shape[1]) for s in samples]
    for start in range(0, reps, block):  # blocks of replicates bound memory; one block for usual sizes
        count = min(block, reps - start)
        batch = [s[resample_indices(s.shape[0], s.shape[1], count, rng), t] for s, t in zip(samples, tasks)]
        out[start : start + count] = _apply(fn, batch)
    return point, out


def _percentiles(replicates: np.ndarray, confidence: float) -> tuple[np.ndarray, np.ndarray]:
    """The percentile interval, as arch's ``conf_int(method="percentile")`` (which rliable calls):
    ``np.percentile`` (linear interpolation) at 100 (1 - c) / 2 and 100 (1 + c) / 2."""
    low, high = np.percentile(replicates, [100 * (1 - confidence) / 2, 100 * (1 + confidence) / 2], axis=0)
    return low, high


def _samples(samples) -> list[np.ndarray]:
    """A tuple is several samples (a list is one array: ``[[1, 2], [3, 4]]`` is 2 runs x 2 tasks)."""
    if isinstance(samples, tuple):
        if not samples:
            raise MetricInputError("samples: expected an array (runs, tasks) or a tuple of them, got ()")
        return [_scores(f"samples[{i}]", s) for i, s in enumerate(samples)]
    return [_scores("samples", samples)]


def stratified_bootstrap_ci(
    samples,
    statistic: str | Statistic,
    *,
    reps: int = 2000,
    confidence: float = 0.95,
    rng: Rng | None = None,
) -> Interval:
    """The statistic of ``samples`` and its percentile interval from a stratified bootstrap over runs.

    ``samples``: one (runs, tasks) array, or a tuple of them for a statistic of several (``(x, y)`` for
    ``"probability_of_improvement"``); each is resampled within its tasks, independently of the others, as
    rliable's ``StratifiedBootstrap`` / ``StratifiedIndependentBootstrap`` with ``task_bootstrap=False``.
    ``statistic``: a name in :data:`STATISTICS` or a batched function taking one (replicates, runs, tasks)
    array per sample and returning (replicates,). The interval: percentiles of the replicates
    (rliable's default ``method="percentile"``; its default ``reps`` is 50000, ours 2000).
    """
    reps, confidence, gen = _reps(reps), _confidence(confidence), _rng(rng)
    fn, arrays = _statistic(statistic), _samples(samples)
    point, out = _replicates(arrays, fn, reps, gen)
    if point.shape[0] != 1:
        raise MetricInputError(
            f"statistic: gives {point.shape[0]} values; stratified_bootstrap_ci takes a scalar statistic "
            "(use stratified_bootstrap_band for a vector)"
        )
    low, high = _percentiles(out[:, 0], confidence)
    return Interval(float(point[0]), float(low), float(high), confidence)


def stratified_bootstrap_band(
    samples,
    statistic: str | Statistic,
    *,
    reps: int = 2000,
    confidence: float = 0.95,
    rng: Rng | None = None,
) -> Band:
    """:func:`stratified_bootstrap_ci` for a vector statistic (replicates, k): a pointwise band."""
    reps, confidence, gen = _reps(reps), _confidence(confidence), _rng(rng)
    point, out = _replicates(_samples(samples), _statistic(statistic), reps, gen)
    low, high = _percentiles(out, confidence)
    return Band(point, low, high, confidence)


def iqm_ci(scores, *, reps: int = 2000, confidence: float = 0.95, rng: Rng | None = None) -> Interval:
    """:func:`iqm` with its stratified bootstrap interval."""
    return stratified_bootstrap_ci(_scores("scores", scores), batch_iqm, reps=reps, confidence=confidence, rng=rng)


def probability_of_improvement_ci(
    x,
    y,
    *,
    higher_is_better: bool = True,
    reps: int = 2000,
    confidence: float = 0.95,
    rng: Rng | None = None,
) -> Interval:
    """:func:`probability_of_improvement` with its interval, x and y resampled independently within each task
    (as rliable's ``get_interval_estimates`` with ``[x, y]``)."""
    a, b = _scores("x", x), _scores("y", y)
    _same_tasks(["x", "y"], [a, b])
    if not _direction(higher_is_better):
        a, b = -a, -b
    return stratified_bootstrap_ci((a, b), batch_probability_of_improvement, reps=reps, confidence=confidence, rng=rng)


# -- performance profiles --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Profile:
    """A run-score distribution: ``fraction[i]`` of the runs score above ``taus[i]`` (below, when lower is
    better); ``low``/``high`` the pointwise bootstrap band, or None."""

    taus: np.ndarray
    fraction: np.ndarray
    low: np.ndarray | None = None
    high: np.ndarray | None = None


def _profile_statistic(taus: np.ndarray, higher_is_better: bool) -> Statistic:
    def fraction(samples: np.ndarray) -> np.ndarray:
        # (replicates, runs, tasks, 1) against (taus,): the mean over runs and tasks of score > tau
        s = samples[..., None]
        beats = s > taus if higher_is_better else s < taus
        return beats.mean(axis=(1, 2))

    return fraction


def performance_profile(
    scores,
    taus,
    *,
    higher_is_better: bool = True,
    band: bool = False,
    reps: int = 2000,
    confidence: float = 0.95,
    rng: Rng | None = None,
) -> Profile:
    """The score distribution at each threshold: the fraction of runs with score > tau, i.e. the mean over
    tasks of the fraction of that task's runs above tau (the two agree: every task has the same runs).

    As rliable's ``create_performance_profile(use_score_distribution=True)`` (its ``run_score_deviation``:
    ``np.mean(scores > tau)``). ``higher_is_better=False`` counts scores below tau instead (rliable has no
    direction). ``band=True`` adds a pointwise stratified bootstrap band (rliable always computes one and
    takes no ``random_state`` for it; here ``rng`` is required for the band).
    """
    arr = _scores("scores", scores)
    thresholds = as_array("taus", taus)
    if thresholds.ndim != 1 or thresholds.size == 0:
        raise MetricInputError(f"taus: expected a 1-D array of at least one threshold, got shape {thresholds.shape}")
    _finite("taus", thresholds)
    fn = _profile_statistic(thresholds, _direction(higher_is_better))
    if not band:
        return Profile(thresholds, _apply(fn, [arr[None]])[0])
    b = stratified_bootstrap_band(arr, fn, reps=reps, confidence=confidence, rng=rng)
    return Profile(thresholds, b.estimate, b.low, b.high)


# -- paired comparisons ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class PairedDifference:
    """``difference`` = mean(a - b) over the paired seeds, in the metric's units (its sign as measured, not
    flipped); ``low``/``high`` its percentile bootstrap interval over seeds; ``p_value`` the two-sided p of
    "no difference" (:func:`sign_flip_p_value`); ``exact``: whether the
    permutation test enumerated every sign pattern. NaN interval and p-value with one seed."""

    difference: float
    low: float
    high: float
    p_value: float
    n: int
    higher_is_better: bool = True
    exact: bool = True
    confidence: float = 0.95


def _paired(a, b) -> tuple[np.ndarray, np.ndarray]:
    x, y = as_array("a", a), as_array("b", b)
    for name, arr in (("a", x), ("b", y)):
        if arr.ndim not in (1, 2) or arr.shape[0] == 0 or arr.size == 0:
            raise MetricInputError(
                f"{name}: expected a 1-D array (seeds,) or a 2-D array (seeds, trials) with at least one seed, "
                f"got shape {arr.shape}"
            )
        _finite(name, arr)
    if x.shape != y.shape:
        raise MetricInputError(
            f"b: expected the shape of a {x.shape} (values aligned by seed, and by trial if 2-D), got {y.shape}"
        )
    return x, y


@lru_cache(maxsize=EXACT_PERMUTATION_MAX_SEEDS + 1)
def _all_signs(n: int) -> np.ndarray:
    """Every +-1 pattern of n seeds, (2**n, n); row 0 is all +1."""
    bits = (np.arange(2**n)[:, None] >> np.arange(n)) & 1
    return 1.0 - 2.0 * bits


def sign_flip_p_value(
    difference, *, alternative: str = "two-sided", permutations: int = 10000, rng: Rng | None = None
) -> tuple[float, bool]:
    """Paired permutation p-value of "the mean of ``difference`` (per-seed differences) is 0". Under that null the
    sign of each seed's difference is a coin flip (the pair's two values are exchangeable).

    ``alternative``: ``"two-sided"`` (the share of sign patterns whose mean is at least as far from 0 as the observed
    one, either side), ``"greater"`` (mean >= the observed) or ``"less"`` (mean <= the observed), as
    ``scipy.stats.permutation_test(..., permutation_type="samples")`` with the mean as statistic. Two-sided, the
    order of the pair does not matter: ``difference`` and ``-difference`` give the same p.

    Exact (all 2**n patterns, the observed one included) for n <= :data:`EXACT_PERMUTATION_MAX_SEEDS`;
    otherwise ``permutations`` random patterns, p = (1 + hits) / (1 + permutations) (never 0). Returns
    (p, exact). The smallest exact p is 2/2**n two-sided (:func:`smallest_p_value`): 0.25 with 3 seeds, 1/16 with 5,
    1/512 with 10.
    """
    d = as_array("difference", difference, ndim=1)
    _finite("difference", d)
    n = d.size
    if n == 0:
        raise MetricInputError("difference: expected at least one seed, got an empty array")
    if alternative not in ALTERNATIVES:
        raise MetricInputError(f"alternative: expected one of {list(ALTERNATIVES)}, got {alternative!r}")
    if isinstance(permutations, bool) or not isinstance(permutations, int) or permutations < 1:
        raise MetricInputError(f"permutations: expected a whole number >= 1, got {permutations!r}")
    observed = d.mean()
    tol = 1e-9 * max(float(np.abs(d).mean()), np.finfo(float).tiny)  # sums in another order may differ in the last bits

    def extreme(means: np.ndarray) -> np.ndarray:
        if alternative == "two-sided":
            return np.abs(means) >= abs(observed) - tol
        if alternative == "greater":
            return means >= observed - tol
        return means <= observed + tol

    if n <= EXACT_PERMUTATION_MAX_SEEDS:
        return float(np.mean(extreme(_all_signs(n) @ d / n))), True
    gen = _rng(rng)
    hits = 0
    block = max(1, BLOCK_ELEMENTS // n)
    for start in range(0, permutations, block):  # blocks of patterns bound memory
        count = min(block, permutations - start)
        signs = gen.integers(0, 2, size=(count, n)) * 2.0 - 1.0
        hits += int(np.sum(extreme(signs @ d / n)))
    return (1 + hits) / (1 + permutations), False


def smallest_p_value(n: int, *, permutations: int = 10000) -> float:
    """The smallest two-sided p :func:`sign_flip_p_value` can give with ``n`` seeds: 2/2**n when exact (n <= 16),
    1/(1 + permutations) otherwise; 1 with no seed. Below ``alpha`` only from 6 seeds on (2/2**5 = 0.0625)."""
    if n < 1:
        return 1.0
    if n <= EXACT_PERMUTATION_MAX_SEEDS:
        return min(1.0, 2.0 / 2.0**n)
    return 1.0 / (1 + permutations)


def paired_difference(
    a,
    b,
    *,
    higher_is_better: bool = True,
    reps: int = 2000,
    confidence: float = 0.95,
    rng: Rng | None = None,
    permutations: int = 10000,
) -> PairedDifference:
    """Agent a against agent b run on the same seeds: ``a[i]`` and ``b[i]`` come from seed i (2-D: seed i,
    trial j, trials paired too; the seed is the unit resampled, a seed's trials are averaged first).

    - ``difference``: mean(a - b) in the metric's units (not flipped for ``higher_is_better=False``);
    - interval: percentile bootstrap of the mean of the per-seed differences, seeds resampled with
      replacement (the paired analogue of the stratified bootstrap, one task);
    - ``p_value``: the two-sided paired sign-flip permutation test of "no difference" (:func:`sign_flip_p_value`,
      exact up to 16 seeds) on the per-seed differences: the same p whichever agent is ``a``. Chosen over the
      bootstrap share of replicates <= 0 (anti-conservative with few seeds: the percentile bootstrap is too
      narrow at n = 5-10) and over Wilcoxon (it tests the median of the differences, not the mean this row
      reports); it feeds :func:`holm`. Which agent is better is then read from the sign of the difference
      and ``higher_is_better``.
    With one seed the interval and p-value are NaN.
    """
    x, y = _paired(a, b)
    better = _direction(higher_is_better)
    reps, confidence, gen = _reps(reps), _confidence(confidence), _rng(rng)
    d = (x - y).reshape(x.shape[0], -1).mean(axis=1)  # per-seed difference
    n = d.size
    diff = float(d.mean())
    if n < 2:
        return PairedDifference(diff, math.nan, math.nan, math.nan, n, better, True, confidence)
    idx = gen.integers(0, n, size=(reps, n))
    low, high = _percentiles(d[idx].mean(axis=1), confidence)
    p, exact = sign_flip_p_value(d, permutations=permutations, rng=gen)
    return PairedDifference(diff, float(low), float(high), p, n, better, exact, confidence)


def holm(p_values) -> np.ndarray:
    """Holm-Bonferroni adjusted p-values, in the order given: sorted ascending, the i-th (from 0) of m
    multiplied by m - i, a running maximum taken (step-down: never smaller than an earlier one), capped at 1.
    As ``statsmodels.stats.multitest.multipletests(p, method="holm")[1]``. NaN entries stay NaN and are not
    counted in m (statsmodels has no NaN rule)."""
    p = as_array("p_values", p_values, low=0.0, high=1.0)
    if p.ndim != 1:
        raise MetricInputError(f"p_values: expected a 1-D array of p-values, got shape {p.shape}")
    out = np.full(p.shape, np.nan)
    given = ~np.isnan(p)
    q = p[given]
    m = q.size
    order = np.argsort(q, kind="stable")
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * q[order]))
    sorted_back = np.empty(m)
    sorted_back[order] = adjusted
    out[given] = sorted_back
    return out


# -- rounding --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RoundedCI:
    """A value and its interval as text, rounded to ``decimals`` (None: no interval, the value given to
    3 significant digits)."""

    value: str
    low: str | None
    high: str | None
    decimals: int | None

    def __str__(self) -> str:
        if self.low is None or self.high is None:
            return self.value
        return f"{self.value} [{self.low}, {self.high}]"


SIGNIFICANT_WITHOUT_INTERVAL = 3


def _decimals_for(half_width: float) -> int:
    """Decimal places that keep 1 significant digit of the half-width, or 2 when its first digit is 1."""
    mantissa, exponent = f"{half_width:.6e}".split("e")
    digits = 2 if mantissa[0] == "1" else 1
    return digits - 1 - int(exponent)


def _text(x: float, decimals: int, sign: bool = False) -> str:
    """``x`` rounded half away from zero as written (``Decimal(repr(x))``): 0.125 -> 0.13, 2.675 -> 2.68."""
    q = Decimal(repr(float(x))).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP)
    if q == 0:
        q = abs(q)  # no "-0.00"
    text = f"{q:f}"
    return f"+{text}" if sign and q > 0 else text


def round_to_ci(value, low=math.nan, high=math.nan, *, sign: bool = False) -> RoundedCI:
    """``value``, ``low`` and ``high`` rounded to the decimal place the interval supports.

    Rule: the half-width h = (high - low) / 2 keeps one significant digit, or two when its first digit is 1
    (0.032 -> 0.03, 0.014 -> 0.014); the value and both bounds are rounded to that decimal place (half away
    from zero, on the number as written): 0.8123 [0.7801, 0.8444] (h 0.032) -> 0.81 [0.78, 0.84];
    0.8123 [0.7981, 0.8265] (h 0.0142) -> 0.812 [0.798, 0.827]; 1234 [1000, 1468] (h 234) -> 1200 [1000, 1500].
    No interval (a NaN bound: one seed) or a zero width (every replicate equal): the value to 3
    significant digits, the bounds (if any) likewise. ``sign``: a leading ``+`` on a positive value.
    A NaN value gives ``"n/a"``.
    """
    try:
        v, lo, hi = float(value), float(low), float(high)
    except (TypeError, ValueError):
        raise MetricInputError(f"round_to_ci: expected numbers, got {value!r}, {low!r}, {high!r}") from None
    if math.isnan(v):
        return RoundedCI("n/a", None, None, None)
    if math.isinf(v):
        return RoundedCI(str(v), None, None, None)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        d = _significant_decimals(v)
        return RoundedCI(_text(v, d, sign), None, None, None)
    if lo > hi:
        raise MetricInputError(f"low: expected low <= high, got low {lo!r} > high {hi!r}")
    half = (hi - lo) / 2
    if half == 0:
        d = _significant_decimals(v)
        return RoundedCI(_text(v, d, sign), _text(lo, d), _text(hi, d), None)
    d = _decimals_for(half)
    return RoundedCI(_text(v, d, sign), _text(lo, d), _text(hi, d), d)


def plus_minus(value: float, half_width: float) -> str:
    """``value ± half_width`` rounded by :func:`round_to_ci`'s rule (the half-width keeps one significant digit,
    two when it starts with 1): 0.85, 0.124 -> ``0.85 ± 0.12``; 0.91, 0.0994 -> ``0.91 ± 0.10``. A half-width
    that is rounding noise of the value (below 1e-9 of it, e.g. 2.2e-16 when every seed scored the same) is
    ``± 0``, the value to 3 significant digits."""
    v, h = float(value), float(half_width)
    if not (math.isfinite(v) and math.isfinite(h)) or h < 0:
        raise MetricInputError(
            f"plus_minus: expected a finite value and half-width >= 0, got {value!r}, {half_width!r}"
        )
    if h <= 1e-9 * max(1.0, abs(v)):
        text = _text(v, _significant_decimals(v))
        return f"{text.rstrip('0').rstrip('.') if '.' in text else text} ± 0"
    d = _decimals_for(h)
    return f"{_text(v, d)} ± {_text(h, d)}"


def significant(value: float, digits: int = 3) -> str:
    """``value`` rounded to ``digits`` significant digits, without an exponent between 1e-4 and 1e6."""
    if not math.isfinite(value):
        return str(value)
    rounded = float(f"{value:.{digits}g}")
    if rounded == 0:
        return "0"
    if 1e-4 <= abs(rounded) < 1e6:
        text = f"{rounded:.{max(0, digits - 1 - math.floor(math.log10(abs(rounded))))}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    return f"{rounded:.{digits - 1}e}"


def _significant_decimals(x: float) -> int:
    if x == 0 or not math.isfinite(x):
        return SIGNIFICANT_WITHOUT_INTERVAL - 1
    exponent = int(f"{x:.{SIGNIFICANT_WITHOUT_INTERVAL - 1}e}".split("e")[1])
    return SIGNIFICANT_WITHOUT_INTERVAL - 1 - exponent
