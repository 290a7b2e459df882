"""All trials of a test as flat arrays: per-trial quantities are segment sums or ``reduceat``.

Every registered OND metric is a function of a :class:`FlatTrials`; what several of them read (the rank of the
true class, running counts of top-k hits, the first detection at a threshold) is computed once per scoring and
kept on the object (:meth:`FlatTrials.shared`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np

from owl_eval.metrics.results import NA
from owl_eval.metrics.validation import MetricInputError
from owl_eval.protocols.ond.metrics.rank import true_class_rank
from owl_eval.protocols.ond.metrics.trial import OndTrial


class FlatTrials:
    """Trials concatenated: sample arrays of length sum(N_t), per-trial bounds into them."""

    def __init__(self, trials: Sequence[OndTrial], *, what: str = "trials"):
        if isinstance(trials, OndTrial) or not isinstance(trials, Sequence):
            raise MetricInputError(f"{what}: expected a list of OndTrial, got {type(trials).__name__}")
        if len(trials) == 0:
            raise MetricInputError(f"{what}: expected at least one OndTrial, got an empty list")
        for i, trial in enumerate(trials):
            if not isinstance(trial, OndTrial):
                raise MetricInputError(f"{what}[{i}]: expected an OndTrial, got {type(trial).__name__}")
        n_columns = {t.p_class.shape[1] for t in trials}
        if len(n_columns) > 1:
            first = trials[0].p_class.shape[1]
            i = next(i for i, t in enumerate(trials) if t.p_class.shape[1] != first)
            raise MetricInputError(
                f"{what}[{i}] ({trials[i].trial_id!r}): p_class has {trials[i].p_class.shape[1]} columns, "
                f"{what}[0] has {first}; all trials must share the K+1 classes"
            )
        self.trials = trials
        self.ids = [t.trial_id or f"#{i}" for i, t in enumerate(trials)]
        self.lengths = np.fromiter((t.gt_class.size for t in trials), np.int64, len(trials))
        self.starts = np.concatenate(([0], np.cumsum(self.lengths)[:-1]))
        self.ends = self.starts + self.lengths
        self.red_light = np.fromiter(
            (-1 if t.red_light is None else t.red_light for t in trials), np.int64, len(trials)
        )
        self.has_novelty = self.red_light >= 0
        # post-novelty starts at the red light; a trial without novelty is all pre-novelty
        self.post_start = np.where(self.has_novelty, self.starts + self.red_light, self.ends)
        self.batch_size = np.fromiter((t.batch_size for t in trials), np.int64, len(trials))
        self.gt_class = np.concatenate([t.gt_class for t in trials])
        self.gt_novel = np.concatenate([t.gt_novel for t in trials]).astype(bool)
        self.p_world_changed = np.concatenate([t.p_world_changed for t in trials])
        self.p_class = np.concatenate([t.p_class for t in trials])
        self._shared: dict[Hashable, Any] = {}

    def shared(self, key: Hashable, compute: Callable[[], Any]) -> Any:
        """``compute()`` once for these trials: arrays several metrics read (e.g. the first detection at one
        threshold, read by M1, M2 and M2.1), so that computing the metrics one by one costs no more than
        computing them together."""
        if key not in self._shared:
            self._shared[key] = compute()
        return self._shared[key]

    @functools.cached_property
    def rank(self) -> np.ndarray:
        """Per sample, the 0-based rank of the true class among the K+1 scores (ties toward the lower column;
        :func:`~owl_eval.protocols.ond.metrics.blocks.rank_of_true_class`). The arrays were checked by OndTrial."""
        return true_class_rank(self.gt_class, self.p_class)

    def topk_running(self, k: int) -> np.ndarray:
        """Running count of the samples whose true class is among the ``k`` highest scores."""
        return self.shared(("topk_running", k), lambda: self.cumulative(self.rank < k))

    def topk_accuracy(self, k: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """Per trial, top-``k`` accuracy on the samples ``[lo_t, hi_t)`` (flat bounds); NaN on an empty segment."""
        return ratio_or_nan(self.segment_sums(self.topk_running(k), lo, hi), hi - lo)

    def segments(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """The flat bounds of the whole trials (``""``), of pre-novelty ``[:red_light]`` and of post-novelty
        ``[red_light:]``, by the suffix of the names they give (``top1``, ``top1_pre``, ``top1_post``)."""
        return {
            "": (self.starts, self.ends),
            "_pre": (self.starts, self.post_start),
            "_post": (self.post_start, self.ends),
        }

    @functools.cached_property
    def trial_of_sample(self) -> np.ndarray:
        return np.repeat(np.arange(self.n_trials), self.lengths)

    @functools.cached_property
    def local_index(self) -> np.ndarray:
        """0-based position of each sample inside its trial."""
        return np.arange(self.gt_class.size) - np.repeat(self.starts, self.lengths)

    @functools.cached_property
    def novel_running(self) -> np.ndarray:
        """Running count of gt_novel (threshold-independent: shared by every threshold of a grid)."""
        return self.cumulative(self.gt_novel)

    @property
    def n_trials(self) -> int:
        return len(self.trials)

    def check_aligned(self, baseline: FlatTrials) -> None:
        """The baseline must run on the very same trials: same lengths, red lights and ground truth."""
        if baseline.n_trials != self.n_trials:
            raise MetricInputError(
                f"baseline: {baseline.n_trials} trials for {self.n_trials} agent trials; they must be aligned"
            )
        for name, mine, theirs in (
            ("length", self.lengths, baseline.lengths),
            ("red_light", self.red_light, baseline.red_light),
        ):
            differ = mine != theirs
            if differ.any():
                i = int(np.argmax(differ))
                raise MetricInputError(
                    f"baseline[{i}] ({baseline.ids[i]!r}): {name} {theirs[i]} differs from trials[{i}] ({self.ids[i]!r}) {name} {mine[i]}"
                )
        if baseline.p_class.shape[1] != self.p_class.shape[1]:
            raise MetricInputError(
                f"baseline: p_class has {baseline.p_class.shape[1]} columns, the agent's has {self.p_class.shape[1]}"
            )
        for name, mine, theirs in (
            ("gt_class", self.gt_class, baseline.gt_class),
            ("gt_novel", self.gt_novel, baseline.gt_novel),
        ):
            differ = mine != theirs
            if differ.any():
                j = int(np.argmax(differ))
                i = int(self.trial_of_sample[j])
                raise MetricInputError(
                    f"baseline[{i}] ({baseline.ids[i]!r}): {name} differs from trials[{i}] ({self.ids[i]!r}) "
                    f"at sample {int(self.local_index[j])}; the baseline must run on the same trials"
                )

    @staticmethod
    def cumulative(values: np.ndarray) -> np.ndarray:
        """Running count with a leading 0, so that a segment sum is two look-ups."""
        out = np.empty(values.size + 1, dtype=np.int64)
        out[0] = 0
        np.cumsum(values, dtype=np.int64, out=out[1:])
        return out

    @staticmethod
    def segment_sums(running: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        """sum(values[lo_t:hi_t]) per trial from ``running = cumulative(values)`` (absolute flat bounds;
        an empty segment gives 0)."""
        return running[hi] - running[lo]

    def asymptotic_start(self, width: int) -> np.ndarray:
        """Start of the last ``width`` samples of each trial (the whole trial when it is shorter)."""
        return np.maximum(self.starts, self.ends - width)

    def first_detection(self, threshold: float) -> np.ndarray:
        """Per trial: first 0-based index with p_world_changed >= threshold, -1 when never."""
        never = np.iinfo(np.int64).max
        candidate = np.where(self.p_world_changed >= threshold, self.local_index, never)
        first = np.minimum.reduceat(candidate, self.starts)
        return np.where(first == never, -1, first)


def mean_over(values: np.ndarray, included: np.ndarray, what: str) -> float | NA:
    if not included.any():
        return NA(what)
    return float(values[included].mean())


def ratio_or_nan(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1), np.nan)


def zero_if_undefined(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    # sail-on-client's m_ndp convention: precision/recall/F1 with an empty denominator are 0
    return np.where(denominator > 0, numerator / np.where(denominator > 0, denominator, 1), 0.0)
