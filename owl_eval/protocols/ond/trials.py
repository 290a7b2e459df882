"""Turning a labelled domain into OND trials: known/novel class split, training split, trial streams."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from owl_eval.datasets.classification import LabeledData
from owl_eval.errors import ConfigError


@dataclass(frozen=True)
class TrialPlan:
    """Which domain samples make one trial, in stream order, and their ground truth."""

    trial_id: str
    sample_rows: np.ndarray  # [N] rows of the domain data
    gt_class: np.ndarray  # [N] 0 = novel, 1..K known
    gt_novel: np.ndarray  # [N] 0/1
    red_light: int | None
    novel_classes: tuple[int, ...]


@dataclass(frozen=True)
class OndSplit:
    known_classes: np.ndarray  # domain class ids, sorted; known class j has OND label j+1
    novel_classes: np.ndarray
    train_rows: np.ndarray  # known-class training split (the only data the agent may train on)
    heldout_known_rows: np.ndarray  # known-class samples for the streams


def training_per_class(data: LabeledData, train_fraction: float) -> np.ndarray:
    """Samples of each class in the agent's training split when the class is known: the data set's own training
    split when it has one, else ``train_fraction`` of the class (as :func:`split_classes` rounds it)."""
    if data.train_rows is not None:
        return np.bincount(data.labels[data.train_rows], minlength=data.num_classes).astype(np.int64)
    counts = np.bincount(data.labels, minlength=data.num_classes)
    return np.minimum(np.round(train_fraction * counts), counts).astype(np.int64)


def known_class_ids(data: LabeledData, names: Sequence[str]) -> np.ndarray:
    """The class ids of ``protocol.known_classes`` given by name, sorted; an unknown name is one error."""
    index = {name: i for i, name in enumerate(data.class_names)}
    unknown = [n for n in names if n not in index]
    if unknown:
        shown = ", ".join(data.class_names[:30]) + (" ..." if len(data.class_names) > 30 else "")
        raise ConfigError(f"protocol.known_classes: no class named {unknown} in this domain; its classes: {shown}")
    return np.sort(np.array([index[n] for n in names], dtype=np.int64))


def _fewest(per_class: np.ndarray, known_classes: int, known_ids: np.ndarray | None) -> int:
    """The smallest total of ``per_class`` over the known classes: the named ones, else any draw of that many."""
    if known_ids is not None:
        return int(per_class[known_ids].sum())
    return int(np.sort(per_class)[:known_classes].sum())


def fewest_training_samples(
    data: LabeledData, *, known_classes: int, train_fraction: float, known_ids: np.ndarray | None = None
) -> int:
    """The smallest training split any draw of ``known_classes`` known classes (or the named ones) gives the agent."""
    return _fewest(training_per_class(data, train_fraction), known_classes, known_ids)


def heldout_per_class(data: LabeledData, train_fraction: float) -> np.ndarray:
    """Samples of each class left for the trial streams when the class is known (its training share removed,
    rounded as :func:`split_classes` rounds it; the data set's test split when it has its own)."""
    return np.bincount(data.labels, minlength=data.num_classes) - training_per_class(data, train_fraction)


def check_domain_fits(
    data: LabeledData,
    *,
    known_classes: int,
    train_fraction: float,
    novel_classes_per_trial: int,
    pre_novelty: int,
    post_novelty: int,
    domain_name: str,
    known_ids: np.ndarray | None = None,
) -> None:
    """The protocol's sizes fit the domain for every draw of the known classes (the draw depends on the
    seed, so the check takes the fewest held-out samples any draw of ``known_classes`` classes can give; with
    named known classes, theirs)."""
    num_classes = data.num_classes
    if not 1 <= known_classes < num_classes:
        raise ConfigError(
            f"protocol.known_classes: expected 1..{num_classes - 1} for domain {domain_name!r} "
            f"({num_classes} classes: at least one must stay novel), got {known_classes}"
        )
    if novel_classes_per_trial > num_classes - known_classes:
        raise ConfigError(
            f"protocol.novel_classes_per_trial: expected 1..{num_classes - known_classes} (domain "
            f"{domain_name!r} has {num_classes} classes, protocol.known_classes = {known_classes}), "
            f"got {novel_classes_per_trial}"
        )
    fewest = _fewest(heldout_per_class(data, train_fraction), known_classes, known_ids)
    if pre_novelty + post_novelty > fewest:
        raise ConfigError(
            f"protocol.pre_novelty + protocol.post_novelty = {pre_novelty + post_novelty} exceeds the "
            f"{fewest} held-out known samples domain {domain_name!r} guarantees for {known_classes} known "
            f"classes (train_fraction {train_fraction:g}); shorten the trials"
        )


def split_classes(
    data: LabeledData,
    *,
    known_classes: int,
    train_fraction: float,
    rng: np.random.Generator,
    known_ids: np.ndarray | None = None,
) -> OndSplit:
    """Known and novel classes (``known_ids``, else drawn), the agent's training rows and the known rows left for
    the streams: the data set's own train and test splits when it has them, else ``train_fraction`` of each known
    class (stratified, in a seeded order)."""
    num_classes = data.num_classes
    if not 1 <= known_classes < num_classes:
        raise ConfigError(
            f"protocol.known_classes: expected 1..{num_classes - 1} for this domain ({num_classes} classes), got {known_classes}"
        )
    if not 0.0 < train_fraction < 1.0:
        raise ConfigError(f"protocol.train_fraction: expected (0, 1), got {train_fraction}")
    if known_ids is not None:
        known = np.sort(np.asarray(known_ids, dtype=np.int64))
    else:
        known = np.sort(rng.choice(num_classes, size=known_classes, replace=False))
    novel = np.setdiff1d(np.arange(num_classes), known)
    rows = np.flatnonzero(np.isin(data.labels, known))
    in_train_split = data.in_train
    if in_train_split is not None:  # the data set's own split: its training rows train, its test rows stream
        return OndSplit(known, novel, rows[in_train_split[rows]], rows[~in_train_split[rows]])
    rows = rows[rng.permutation(len(rows))]
    # Stratified: the first train_fraction of each class (in shuffled order) goes to training.
    labels = data.labels[rows]
    order = np.argsort(labels, kind="stable")
    sorted_labels = labels[order]
    first = np.searchsorted(sorted_labels, sorted_labels, side="left")
    counts = np.bincount(sorted_labels, minlength=num_classes)[sorted_labels]
    rank = np.arange(len(order)) - first
    in_train = np.empty(len(rows), dtype=bool)
    in_train[order] = rank < np.round(train_fraction * counts)
    return OndSplit(known, novel, np.sort(rows[in_train]), rows[~in_train])


def plan_trials(
    data: LabeledData,
    split: OndSplit,
    *,
    num_trials: int,
    trials_without_novelty: int,
    pre_novelty: int,
    post_novelty: int,
    novel_fraction: float,
    novel_classes_per_trial: int,
    rng: np.random.Generator,
) -> list[TrialPlan]:
    if not 0 <= trials_without_novelty <= num_trials:
        raise ConfigError(
            f"protocol.trials_without_novelty: expected 0..protocol.num_trials ({num_trials}), got {trials_without_novelty}"
        )
    if not 0.0 < novel_fraction <= 1.0:
        raise ConfigError(f"protocol.novel_fraction: expected (0, 1], got {novel_fraction}")
    if pre_novelty < 0 or post_novelty < 1:
        raise ConfigError(
            f"protocol.pre_novelty: expected >= 0 and protocol.post_novelty >= 1, got {pre_novelty}, {post_novelty}"
        )
    if not 1 <= novel_classes_per_trial <= len(split.novel_classes):
        raise ConfigError(
            f"protocol.novel_classes_per_trial: expected 1..{len(split.novel_classes)}, got {novel_classes_per_trial}"
        )
    num_novel = max(1, int(round(post_novelty * novel_fraction)))
    known_needed = pre_novelty + post_novelty
    if known_needed > len(split.heldout_known_rows):
        raise ConfigError(
            f"protocol.pre_novelty + protocol.post_novelty = {known_needed} exceeds the {len(split.heldout_known_rows)} held-out known samples of this domain"
        )
    label_of = np.zeros(data.num_classes, dtype=np.int64)
    label_of[split.known_classes] = np.arange(1, len(split.known_classes) + 1)
    streamable = data.in_train  # with the data set's own split, novel samples come from its test split too
    streamable = None if streamable is None else ~streamable
    no_novelty = set(rng.choice(num_trials, size=trials_without_novelty, replace=False).tolist())
    plans = []
    for t in range(num_trials):
        known_rows = rng.choice(split.heldout_known_rows, size=known_needed, replace=False)
        if t in no_novelty:
            rows, red_light, chosen = known_rows, None, ()
        else:
            chosen = tuple(
                sorted(rng.choice(split.novel_classes, size=novel_classes_per_trial, replace=False).tolist())
            )
            chosen_mask = np.isin(data.labels, chosen)
            pool = np.flatnonzero(chosen_mask if streamable is None else chosen_mask & streamable)
            novel_rows = rng.choice(pool, size=min(num_novel, len(pool)), replace=False)
            post_known = known_rows[pre_novelty : pre_novelty + post_novelty - len(novel_rows)]
            # The red light is the first novel sample, so the post-novelty part starts with one.
            rest = np.concatenate([novel_rows[1:], post_known])
            post = np.concatenate([novel_rows[:1], rest[rng.permutation(len(rest))]])
            rows, red_light = np.concatenate([known_rows[:pre_novelty], post]), pre_novelty
        gt_class = label_of[data.labels[rows]]
        gt_novel = (gt_class == 0).astype(np.int64)
        plans.append(TrialPlan(f"trial{t:03d}", rows, gt_class, gt_novel, red_light, chosen))
    return plans
