"""The data of one OND trial (:class:`OndTrial`), checked when it is built."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from owl_eval.metrics.validation import MetricInputError, as_array

DETECTION_THRESHOLD_GRID: tuple[float, ...] = (0.175, 0.225, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
NRP_WINDOWS = ("post", "asymptotic")
CONDITIONS = ("system", "given")
ROW_SUM_TOLERANCE = 1e-6


@dataclass
class OndTrial:
    """One OND trial: ground truth and one agent's outputs, checked on construction.

    ``gt_class[N]`` (0 = unknown/novel, 1..K known), ``gt_novel[N]`` (0/1), ``red_light`` (0-based index
    of the first novel sample, None when the trial has no novelty), ``p_world_changed[N]`` in [0, 1],
    ``p_class[N, K+1]`` (column 0 = unknown, rows sum to 1 within 1e-6), ``batch_size`` (samples per
    mini-batch; the last batch may be shorter). Arrays are converted once (int64 / float64) here so
    that the program metrics only concatenate them.
    """

    gt_class: np.ndarray
    gt_novel: np.ndarray
    red_light: int | None
    p_world_changed: np.ndarray
    p_class: np.ndarray
    batch_size: int
    trial_id: str = ""

    def __post_init__(self):
        who = f"trial {self.trial_id!r}" if self.trial_id else "trial (no trial_id)"
        if (
            isinstance(self.batch_size, (bool, np.bool_))
            or not isinstance(self.batch_size, (int, np.integer))
            or self.batch_size < 1
        ):
            raise MetricInputError(f"{who}: batch_size must be a positive int, got {self.batch_size!r}")
        self.batch_size = int(self.batch_size)

        def where(index: int) -> str:
            return f"sample {index} (batch {index // self.batch_size}, batch_size {self.batch_size})"

        gt_class = as_array(f"{who}: gt_class", self.gt_class, ndim=1, allow_nan=False)
        n = gt_class.size
        if n == 0:
            raise MetricInputError(f"{who}: gt_class is empty; a trial needs at least one sample")
        non_integer = gt_class != np.round(gt_class)
        if non_integer.any():
            i = int(np.argmax(non_integer))
            raise MetricInputError(
                f"{who}: gt_class must hold integer class ids, got {gt_class[i].item()!r} at {where(i)}"
            )

        p_class = as_array(f"{who}: p_class", self.p_class, shape=(n, None))
        if p_class.shape[1] < 2:
            raise MetricInputError(
                f"{who}: p_class needs K+1 >= 2 columns (column 0 = unknown), got shape {p_class.shape}"
            )
        _check_probabilities(f"{who}: p_class", p_class, where)
        row_error = np.abs(p_class.sum(axis=1) - 1.0)
        if (row_error > ROW_SUM_TOLERANCE).any():
            i = int(np.argmax(row_error > ROW_SUM_TOLERANCE))
            raise MetricInputError(
                f"{who}: p_class rows must sum to 1 within {ROW_SUM_TOLERANCE:g}; row at {where(i)} sums to "
                f"{p_class[i].sum().item()!r} (normalise the scores, or set normalize: true in the protocol config)"
            )
        n_columns = p_class.shape[1]
        outside = (gt_class < 0) | (gt_class >= n_columns)
        if outside.any():
            i = int(np.argmax(outside))
            raise MetricInputError(
                f"{who}: gt_class must lie in [0, {n_columns - 1}] (p_class has {n_columns} columns), got {gt_class[i]:g} at {where(i)}"
            )

        gt_novel = as_array(f"{who}: gt_novel", self.gt_novel, shape=(n,), allow_nan=False)
        not_binary = (gt_novel != 0) & (gt_novel != 1)
        if not_binary.any():
            i = int(np.argmax(not_binary))
            raise MetricInputError(f"{who}: gt_novel must be 0/1, got {gt_novel[i].item()!r} at {where(i)}")

        p_world_changed = as_array(f"{who}: p_world_changed", self.p_world_changed, shape=(n,))
        _check_probabilities(f"{who}: p_world_changed", p_world_changed, where)

        novel_positions = np.flatnonzero(gt_novel)
        first_novel = int(novel_positions[0]) if novel_positions.size else None
        red_light = self.red_light
        if red_light is not None:
            if isinstance(red_light, (bool, np.bool_)) or not isinstance(red_light, (int, np.integer)):
                raise MetricInputError(f"{who}: red_light must be an int index or None, got {red_light!r}")
            red_light = int(red_light)
            if not 0 <= red_light < n:
                raise MetricInputError(f"{who}: red_light must be a 0-based index in [0, {n - 1}], got {red_light}")
        if red_light != first_novel:
            raise MetricInputError(
                f"{who}: red_light is {red_light!r} but the first novel sample in gt_novel is at index {first_novel!r}; "
                "red_light must be the 0-based index of the first novel sample (None when there is none)"
            )

        self.gt_class = gt_class.astype(np.int64)
        self.gt_novel = gt_novel.astype(np.int64)
        self.red_light = red_light
        self.p_world_changed = p_world_changed
        self.p_class = p_class

    @property
    def n_samples(self) -> int:
        return int(self.gt_class.size)


def _check_probabilities(name: str, values: np.ndarray, where) -> None:
    nan = np.isnan(values)
    if nan.any():
        i = np.unravel_index(int(np.argmax(nan)), values.shape)
        raise MetricInputError(f"{name}: NaN at {where(int(i[0]))}{_column_text(i)}; expected scores in [0, 1]")
    outside = (values < 0.0) | (values > 1.0)
    if outside.any():
        i = np.unravel_index(int(np.argmax(outside)), values.shape)
        raise MetricInputError(
            f"{name}: value {values[i].item()!r} at {where(int(i[0]))}{_column_text(i)} is outside [0, 1]"
        )


def _column_text(index: tuple) -> str:
    return f", column {int(index[1])}" if len(index) > 1 else ""
