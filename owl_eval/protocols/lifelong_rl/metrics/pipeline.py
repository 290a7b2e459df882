"""The l2metrics 3.1 pipeline on columnar logs: filter, regimes, smoothing, normalisation, metrics.

Order of operations (l2metrics ``MetricsReport``): keep complete rows with a value, (agnostic: strip the
variant), number regimes, load STE runs of the log's tasks, smooth train regimes (and every STE regime),
optionally clamp outliers, normalise per task (range over the task's rows and its STE training rows), then
compute block, task and lifetime metrics on the processed values.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np

from owl_eval.metrics.validation import MetricInputError, check_option
from owl_eval.protocols.lifelong_rl.metrics.blocks import (
    episode_means,
    performance_recovery,
    recovery_segments,
    run_starts,
    saturation_segments,
    segment_sum,
    terminal_segments,
)
from owl_eval.protocols.lifelong_rl.metrics.smoothing import WINDOWS, smooth_segments, window_lengths

NORM_SCALE, NORM_OFFSET = 100, 1  # l2metrics Normalizer: values to [1, 101]


@dataclass(frozen=True)
class Smoothing:
    """How curves are smoothed (l2metrics' ``smoothing_method`` and window options).

    ``method``: a window name of :data:`~owl_eval.protocols.lifelong_rl.metrics.smoothing.WINDOWS` or ``"none"``;
    a curve of ``n`` episodes gets the window ``window_length`` when ``n >= window_length``, else
    ``min(int(fraction n), max_window)``; ``evaluations``: evaluation regimes are smoothed too (l2metrics'
    ``smooth_eval_data``), not only training regimes. The saturation metrics smooth with ``fraction`` and
    ``max_window`` alone (:attr:`saturation`).
    """

    method: str
    fraction: float
    window_length: int | None
    max_window: int
    evaluations: bool

    @property
    def saturation(self) -> dict[str, Any]:
        """The saturation smoothing settings (``fraction``, ``max_window``) as keyword arguments."""
        return {"fraction": self.fraction, "max_window": self.max_window}

    def windows(self, lengths: np.ndarray) -> np.ndarray:
        """The window length of each curve of ``lengths`` episodes."""
        return window_lengths(
            lengths, window_len=self.window_length, fraction=self.fraction, max_window=self.max_window
        )


class ValueRange(NamedTuple):
    """The normalisation range of each task, indexed by task code: values map ``low`` -> 1, ``high`` -> 101."""

    low: np.ndarray
    high: np.ndarray


class SteTraining(NamedTuple):
    """The training rows of one single-task-expert run: processed values, their exp_num, and the run."""

    values: np.ndarray
    exp_num: np.ndarray
    run: PreparedLog


class PreparedLog:
    """A filtered log with integer-coded categorical columns and its regime table (``r_*``: one entry per
    regime, in log order; a regime is a run of rows sharing block number, task, type and subtype)."""

    def __init__(self, log, perf: str, variant_mode: str, *, regimes_before_nan: bool = False):
        if perf not in log.columns:
            raise MetricInputError(f"perf_measure: column {perf!r} not in the log (columns: {sorted(log.columns)})")
        keep = log["exp_status"] == "complete"
        log = log if keep.all() else log.take(keep)
        task = _codes(log["task_name"], lambda t: t.lower().split("_")[0] if variant_mode == "agnostic" else t.lower())
        btype = _codes(log["block_type"])
        bsub = _codes(log["block_subtype"])
        if regimes_before_nan:  # STE runs: l2metrics numbers their regimes before dropping NaN rows
            regime = (
                np.cumsum(np.isin(np.arange(len(log)), run_starts(log["block_num"], task[0], btype[0], bsub[0]))) - 1
            )
        values = log[perf].astype(np.float64)
        ok = ~np.isnan(values)
        if not ok.all():
            log, values = log.take(ok), values[ok]
            task, btype, bsub = [(c[ok], cats) for c, cats in (task, btype, bsub)]
            if regimes_before_nan:
                regime = regime[ok]
        self.log, self.values = log, values
        self.exp_num = log["exp_num"]
        self.task_names = task[1]
        self.task = task[0]
        keys = (log["block_num"], task[0], btype[0], bsub[0]) if not regimes_before_nan else (regime,)
        self.r_start = run_starts(*keys)
        self.r_len = np.diff(np.append(self.r_start, len(values)))
        s = self.r_start
        self.r_task = task[0][s]
        self.r_train = np.array([btype[1][c] == "train" for c in btype[0][s]], dtype=bool)
        self.r_wake = np.array([bsub[1][c] == "wake" for c in bsub[0][s]], dtype=bool)
        self.r_block = log["block_num"][s]
        self.regime = np.repeat(np.arange(len(s)), self.r_len)


# l2logger's timestamp format (owl_eval.formats.l2logger.TIMESTAMP_FORMAT; tests/test_layers.py checks they agree)
TIMESTAMP_FORMAT = "%Y%m%dT%H%M%S.%f"


def _codes(arr, fn=None):
    """Integer codes of an object array through its run heads; returns (codes, category list)."""
    starts = run_starts(arr)
    heads = [fn(h) if fn else h for h in arr[starts].tolist()]
    cats: dict = {}
    head_codes = np.array([cats.setdefault(h, len(cats)) for h in heads], dtype=np.int64)
    return np.repeat(head_codes, np.diff(np.append(starts, len(arr)))), list(cats)


def _load(log, perf):
    """Metrics read no files: a log is an ``EpisodeLog`` (or anything with its ``columns`` mapping)."""
    if isinstance(getattr(log, "columns", None), dict):
        return log
    raise MetricInputError(
        f"log: expected an EpisodeLog (read a log directory with "
        f"owl_eval.formats.l2logger.read_log first), got {type(log).__name__}"
    )


#: per-regime metrics by name (:func:`block_table`), one value per regime
BlockMetrics = dict[str, np.ndarray]


@dataclass(frozen=True)
class Preprocessed:
    """A log after l2metrics' preprocessing: its regime table (``log``), its processed values (smoothed, clamped,
    normalised), the processed training rows of each task's STE runs (by task code) and the normalisation range of
    each task (the given ``data_range``, else the observed one; None without either)."""

    log: PreparedLog
    values: np.ndarray
    ste_training: dict[int, list[SteTraining]]
    value_range: ValueRange | None


def prepare(
    log,
    ste_logs,
    *,
    perf_measure: str,
    variant_mode: str,
    smoothing: Smoothing,
    normalization: str,
    data_range,
    clamp_outliers: bool,
) -> Preprocessed:
    """Run the l2metrics preprocessing of ``log`` and its STE logs, in the order of the module docstring."""
    _check_preprocessing_options(variant_mode, smoothing, normalization)
    prepared = PreparedLog(_load(log, perf_measure), perf_measure, variant_mode)
    ntask = len(prepared.task_names)
    ste_runs = _ste_runs_of_tasks(prepared.task_names, _prepared_ste_logs(ste_logs, perf_measure, variant_mode))
    values = _smoothed_log_values(prepared, smoothing)
    ste_training = _smoothed_ste_training(ste_runs, smoothing)
    value_range = None if data_range is None else _user_range(data_range, prepared.task_names, variant_mode)
    if clamp_outliers:
        values, ste_training = _clamp(values, prepared.task, ste_training, ntask, value_range)
    if normalization != "none":
        if value_range is None:
            value_range = _observed_range(values, prepared.task, ste_training, ntask)
        bounds = _normalization_bounds(value_range, normalization)
        values, ste_training = _normalized(values, prepared.task, ste_training, bounds)
    return Preprocessed(prepared, values, ste_training, value_range)


def _check_preprocessing_options(variant_mode: str, smoothing: Smoothing, normalization: str) -> None:
    check_option("variant_mode", variant_mode, ("aware", "agnostic"))
    check_option("smoothing", smoothing.method, WINDOWS + ("none",))
    check_option("normalization", normalization, ("task", "run", "none"))


def _prepared_ste_logs(ste_logs, perf_measure: str, variant_mode: str) -> list[tuple[str, PreparedLog]]:
    """Each STE log with the one task it trains; an STE log training no task or several is refused."""
    prepared = []
    for ste_log in ste_logs:
        run = PreparedLog(_load(ste_log, perf_measure), perf_measure, variant_mode, regimes_before_nan=True)
        trained = sorted({run.task_names[c] for c in run.r_task[run.r_train]})
        if len(trained) != 1:
            raise MetricInputError(
                f"ste_logs: an STE log must train exactly one task, {getattr(ste_log, 'source', None) or ste_log} "
                f"trains {trained}"
            )
        prepared.append((trained[0], run))
    return prepared


def _ste_runs_of_tasks(task_names: list[str], ste_runs: list[tuple[str, PreparedLog]]) -> dict[int, list[PreparedLog]]:
    """The STE runs of each task of the log, by task code (l2metrics ``util.load_ste_data``: the runs of the
    exact task name, else those of every variant of it as a base name); tasks without one are left out."""
    by_task: dict[int, list[PreparedLog]] = {}
    for code, name in enumerate(task_names):
        exact = [run for trained, run in ste_runs if trained == name]
        runs = exact or [run for trained, run in ste_runs if trained.split("_")[0] == name]
        if runs:
            by_task[code] = runs
    return by_task


def _smoothed_regimes(values: np.ndarray, regimes: PreparedLog, selected, smoothing: Smoothing) -> np.ndarray:
    """``values`` with the ``selected`` regimes smoothed (l2metrics' first smoothing pass); a copy."""
    if smoothing.method == "none":
        return values.copy()
    starts, lengths = regimes.r_start[selected], regimes.r_len[selected]
    return smooth_segments(values, starts, lengths, smoothing.windows(lengths), window=smoothing.method)


def _smoothed_log_values(prepared: PreparedLog, smoothing: Smoothing) -> np.ndarray:
    """The log's values with its training regimes smoothed (every regime with ``smoothing.evaluations``)."""
    selected = np.ones(len(prepared.r_start), bool) if smoothing.evaluations else prepared.r_train
    return _smoothed_regimes(prepared.values, prepared, selected, smoothing)


def _smoothed_ste_training(
    ste_runs: dict[int, list[PreparedLog]], smoothing: Smoothing
) -> dict[int, list[SteTraining]]:
    """The training rows of each task's STE runs, every regime of a run smoothed first."""
    smoothed: dict[int, np.ndarray] = {}  # by the run's identity: a run of several tasks is smoothed once
    training: dict[int, list[SteTraining]] = {}
    for code, runs in ste_runs.items():
        training[code] = []
        for run in runs:
            if id(run) not in smoothed:
                smoothed[id(run)] = _smoothed_regimes(run.values, run, slice(None), smoothing)
            rows = run.r_train[run.regime]
            training[code].append(SteTraining(smoothed[id(run)][rows], run.exp_num[rows], run))
    return training


def _observed_range(values: np.ndarray, task: np.ndarray, ste_training: dict[int, list[SteTraining]], ntask: int):
    """Each task's range over its rows of the log and the training rows of its STE runs."""
    low = np.full(ntask, np.inf)
    high = np.full(ntask, -np.inf)
    np.minimum.at(low, task, values)
    np.maximum.at(high, task, values)
    for code, runs in ste_training.items():
        for run in runs:
            if len(run.values):
                low[code], high[code] = min(low[code], run.values.min()), max(high[code], run.values.max())
    return ValueRange(low, high)


def _normalization_bounds(value_range: ValueRange, normalization: str) -> ValueRange:
    """The range each task is normalised over: its own (``"task"``), or the widest over tasks (``"run"``)."""
    if normalization == "run":
        ntask = len(value_range.low)
        return ValueRange(np.full(ntask, value_range.low.min()), np.full(ntask, value_range.high.max()))
    return value_range


def _normalized(
    values: np.ndarray, task: np.ndarray, ste_training: dict[int, list[SteTraining]], bounds: ValueRange
) -> tuple[np.ndarray, dict[int, list[SteTraining]]]:
    """The log's values and the STE training values normalised per task over ``bounds``."""
    low, high = bounds
    normalized_ste = {
        code: [SteTraining(_normalize(v, np.full(len(v), code), low, high), e, run) for v, e, run in runs]
        for code, runs in ste_training.items()
    }
    return _normalize(values, task, low, high), normalized_ste


def _normalize(values, code, lo, hi):
    a, b = lo[code], hi[code]
    with np.errstate(invalid="ignore", divide="ignore"):
        scaled = (values - a) / (b - a) * NORM_SCALE + NORM_OFFSET
    return np.where(a == b, values * 0 + NORM_OFFSET, scaled)  # constant task -> offset, as l2metrics


def _user_range(data_range, names, variant_mode):
    dr = {str(k).lower(): v for k, v in data_range.items()}
    lo, hi = np.empty(len(names)), np.empty(len(names))
    for c, t in enumerate(names):
        entries = [v for k, v in dr.items() if (k.split("_")[0] if variant_mode == "agnostic" else k) == t]
        if not entries:
            raise MetricInputError(f"data_range: no range for task {t!r} (has {sorted(dr)})")
        try:
            lo[c], hi[c] = min(e["min"] for e in entries), max(e["max"] for e in entries)
        except (KeyError, TypeError):
            raise MetricInputError(f"data_range[{t!r}]: expected {{'min': ..., 'max': ...}}, got {entries}") from None
    return ValueRange(lo, hi)


def _clamp(values, task, ste_train, ntask, value_range):
    values = values.copy()
    for c in range(ntask):
        m = task == c
        if value_range is not None:
            lb, ub = value_range.low[c], value_range.high[c]
        else:
            pool = [values[m]] + [v for v, _, _ in ste_train.get(c, [])]
            lb, ub = np.quantile(np.concatenate(pool), (0.1, 0.9))
        values[m] = values[m].clip(lb, ub)
        if c in ste_train:
            ste_train[c] = [SteTraining(v.clip(lb, ub), e, sp) for v, e, sp in ste_train[c]]
    return values, ste_train


def block_table(regimes: PreparedLog, values, *, fraction, max_window) -> BlockMetrics:
    """Per-regime metrics (saturation, time to saturation, terminal performance, averages, recovery)."""
    episode_values, episode_regime, _ = episode_means(values, regimes.exp_num, regimes.regime)
    n_regimes = len(regimes.r_start)
    episode_starts = np.searchsorted(episode_regime, np.arange(n_regimes))
    episode_counts = np.diff(np.append(episode_starts, len(episode_values)))
    episodes = (episode_values, episode_starts, episode_counts)
    sat, tts, _ = saturation_segments(*episodes, fraction=fraction, max_window=max_window)
    term, ett = terminal_segments(*episodes, ~regimes.r_train)
    avg = segment_sum(values, regimes.r_start, regimes.r_len) / regimes.r_len
    reference = _recovery_references(regimes, term)
    rec = recovery_segments(*episodes, reference, regimes.r_len.astype(np.float64))
    return {
        "saturation": sat,
        "eps_to_sat": tts,
        "term_perf": term,
        "eps_to_term_perf": ett.astype(float),
        "avg_perf": avg,
        "recovery_time": rec,
    }


def _recovery_references(regimes: PreparedLog, term_perf: np.ndarray) -> np.ndarray:
    """What each training (wake) regime of a task recovers to: the terminal performance of the task's previous
    training (wake) regime (NaN for its first one and for every other regime)."""
    wake_trainings = np.flatnonzero(regimes.r_train & regimes.r_wake)
    wake_trainings = wake_trainings[np.argsort(regimes.r_task[wake_trainings], kind="stable")]
    later, earlier = wake_trainings[1:], wake_trainings[:-1]
    same_task = regimes.r_task[later] == regimes.r_task[earlier]
    reference = np.full(len(regimes.r_start), np.nan)
    reference[later[same_task]] = term_perf[earlier[same_task]]
    return reference


def runtime_seconds(timestamps) -> float:
    if len(timestamps) == 0:
        return float("nan")
    try:  # the fixed-width format sorts as text: only the extremes are parsed
        return (
            datetime.strptime(max(timestamps), TIMESTAMP_FORMAT) - datetime.strptime(min(timestamps), TIMESTAMP_FORMAT)
        ).total_seconds()
    except ValueError:
        return float("nan")


__all__ = [
    "BlockMetrics",
    "PreparedLog",
    "Preprocessed",
    "Smoothing",
    "SteTraining",
    "ValueRange",
    "prepare",
    "block_table",
    "performance_recovery",
    "runtime_seconds",
]
