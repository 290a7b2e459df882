"""Open-world novelty detection (SAIL-ON OND): K+1 classification over trial streams in mini-batches.

``condition: system``: the agent is told nothing and must detect the change itself.
``condition: given``: from the batch that holds the red light on, the agent is told its index.
A baseline agent runs on the same trials (M3-M6). The agent never sees the stream's labels.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from agents.ond.base import OndBatch
from metrics.ond import OndTrial, program_metrics
from metrics.results import MetricResults
from runner.protocols.base import AgentOutputError, Protocol
from runner.protocols.ond_record import OndRecord
from runner.protocols.ond_trials import TrialPlan, plan_trials, split_classes

CONDITIONS = ("system", "given")


class OndProtocol(Protocol):
    name = "ond"

    def __init__(self, condition: str = "system", known_classes: int = 6, train_fraction: float = 0.5,
                 num_trials: int = 20, trials_without_novelty: int = 2, pre_novelty: int = 60,
                 post_novelty: int = 140, novel_fraction: float = 0.5, novel_classes_per_trial: int = 2,
                 batch_size: int = 10, normalize: bool = False, sum_tolerance: float = 1e-6):
        if condition not in CONDITIONS:
            raise ValueError(f"protocol.condition must be one of {list(CONDITIONS)}, got {condition!r}")
        if batch_size < 1:
            raise ValueError(f"protocol.batch_size must be >= 1, got {batch_size}")
        self.condition = condition
        self.known_classes, self.train_fraction = int(known_classes), float(train_fraction)
        self.num_trials, self.trials_without_novelty = int(num_trials), int(trials_without_novelty)
        self.pre_novelty, self.post_novelty = int(pre_novelty), int(post_novelty)
        self.novel_fraction, self.novel_classes_per_trial = float(novel_fraction), int(novel_classes_per_trial)
        self.batch_size, self.normalize, self.sum_tolerance = int(batch_size), bool(normalize), float(sum_tolerance)
        self._record: OndRecord | None = None

    def tags(self) -> dict[str, str]:
        return {"condition": self.condition}

    # -- running ---------------------------------------------------------------------------------------
    def run(self, *, domain, agent, rng, baseline=None, progress=True) -> OndRecord:
        data = domain.load()
        split = split_classes(data, known_classes=self.known_classes, train_fraction=self.train_fraction, rng=rng)
        plans = plan_trials(data, split, num_trials=self.num_trials, trials_without_novelty=self.trials_without_novelty,
                            pre_novelty=self.pre_novelty, post_novelty=self.post_novelty,
                            novel_fraction=self.novel_fraction, novel_classes_per_trial=self.novel_classes_per_trial, rng=rng)
        train_features = data.features[split.train_rows]
        train_labels = np.searchsorted(split.known_classes, data.labels[split.train_rows]) + 1
        runners = {"agent": agent} | ({"baseline": baseline} if baseline is not None else {})
        # Each agent gets its own generator so adding a baseline never changes the agent's numbers.
        for role, seed_seq in zip(runners, rng.bit_generator.seed_seq.spawn(len(runners))):
            runners[role].fit(train_features.copy(), train_labels.copy(), num_known=self.known_classes,
                              rng=np.random.default_rng(seed_seq))
        self._record = OndRecord(condition=self.condition, known_classes=split.known_classes,
                                 novel_classes=split.novel_classes, class_names=data.class_names,
                                 trials=[], baseline_trials=[] if baseline is not None else None)
        for plan in tqdm(plans, desc=f"OND trials ({self.condition})", disable=not progress, leave=False):
            # A trial is added only when agent and baseline both completed it: partial records stay aligned.
            finished = {role: self._run_trial(role, who, plan, data.features) for role, who in runners.items()}
            self._record.trials.append(finished["agent"])
            if baseline is not None:
                self._record.baseline_trials.append(finished["baseline"])
        return self._record

    def batches(self, plan: TrialPlan, features: np.ndarray):
        """The mini-batches of one trial as the agent sees them (features and, if given, the red light)."""
        n = len(plan.sample_rows)
        for b, start in enumerate(range(0, n, self.batch_size)):
            index = np.arange(start, min(start + self.batch_size, n))
            told = (self.condition == "given" and plan.red_light is not None and plan.red_light <= index[-1])
            yield OndBatch(trial_id=plan.trial_id, batch_index=b, sample_index=index,
                           features=features[plan.sample_rows[index]].copy(),
                           red_light_index=plan.red_light if told else None)

    def _run_trial(self, role: str, agent, plan: TrialPlan, features: np.ndarray) -> OndTrial:
        n = len(plan.sample_rows)
        p_world = np.empty(n)
        p_class = np.empty((n, self.known_classes + 1))
        agent.start_trial(plan.trial_id, n)
        for batch in self.batches(plan, features):
            out = agent.predict_batch(batch)
            world, scores = self._check_output(role, plan.trial_id, batch, out)
            p_world[batch.sample_index] = world
            p_class[batch.sample_index] = scores
        return OndTrial(gt_class=plan.gt_class, gt_novel=plan.gt_novel, red_light=plan.red_light,
                        p_world_changed=p_world, p_class=p_class, batch_size=self.batch_size, trial_id=plan.trial_id)

    def _check_output(self, role, trial_id, batch: OndBatch, out) -> tuple[np.ndarray, np.ndarray]:
        where = f"{role} output for trial {trial_id!r}, batch {batch.batch_index}"
        n, width = len(batch.sample_index), self.known_classes + 1
        if not isinstance(out, tuple) or len(out) != 2:
            raise AgentOutputError(f"{where}: predict_batch must return (p_world_changed, p_class), got {type(out).__name__}")
        try:
            world = np.asarray(out[0], dtype=np.float64)
            scores = np.asarray(out[1], dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise AgentOutputError(f"{where}: outputs must be numeric arrays ({exc})") from None
        for name, arr, shape in (("p_world_changed", world, (n,)), ("p_class", scores, (n, width))):
            if arr.shape != shape:
                raise AgentOutputError(f"{where}: {name} has shape {arr.shape}, expected {shape} (batch size {n}"
                                       + (f", K+1 = {width} columns, column 0 = unknown)" if name == "p_class" else ")"))
            if not np.all(np.isfinite(arr)):
                raise AgentOutputError(f"{where}: {name} contains NaN or inf (row {int(np.argwhere(~np.isfinite(arr))[0][0])})")
            if arr.min() < 0.0 or arr.max() > 1.0:
                raise AgentOutputError(f"{where}: {name} must lie in [0, 1], got values from {arr.min():.6g} to {arr.max():.6g}")
        sums = scores.sum(axis=1)
        if self.normalize:
            if np.any(sums <= 0):
                raise AgentOutputError(f"{where}: p_class row {int(np.argmin(sums))} sums to 0; cannot normalize")
            scores = scores / sums[:, None]
        elif np.any(np.abs(sums - 1.0) > self.sum_tolerance):
            row = int(np.argmax(np.abs(sums - 1.0)))
            raise AgentOutputError(f"{where}: p_class row {row} sums to {sums[row]:.9g}, expected 1 within {self.sum_tolerance:g} "
                                   "(set protocol.normalize=true to rescale)")
        return world, scores

    def record_so_far(self) -> OndRecord | None:
        if self._record is None or not self._record.trials:
            return None
        return self._record

    # -- metrics and figures ---------------------------------------------------------------------------
    def evaluate(self, record: OndRecord, settings: Mapping[str, Any]) -> MetricResults:
        return evaluate_ond_record(record, settings)

    def figures(self, record: OndRecord, results: MetricResults, settings: Mapping[str, Any]) -> dict[str, Any]:
        from runner.plots.ond import ond_figures

        return ond_figures(record, results, threshold=float(settings.get("threshold", 0.5)))


METRIC_OPTIONS = ("threshold", "asymptotic_width", "nrp_window", "threshold_grid")


def evaluate_ond_record(record: OndRecord, settings: Mapping[str, Any]) -> MetricResults:
    """Program metrics of the agent (with the baseline for M3-M6), plus the baseline's own metrics
    under ``baseline.``; ``settings`` is the ``metrics`` config node."""
    options = {k: settings[k] for k in METRIC_OPTIONS if k in settings and settings[k] is not None}
    results = program_metrics(record.trials, record.baseline_trials, condition=record.condition, **options)
    if record.baseline_trials:
        base = program_metrics(record.baseline_trials, None, condition=record.condition, **options)
        keep = {k: v for k, v in base.values.items() if not k.startswith(("m3_", "m4_", "m5_", "m6_"))}
        results.update(MetricResults(values=keep, series=base.series), prefix="baseline.")
    return results
