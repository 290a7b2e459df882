"""Open-world novelty detection (SAIL-ON OND): K+1 classification over trial streams in mini-batches.

``condition: system``: the agent is told nothing and must detect the change itself.
``condition: given``: from the batch that holds the red light on, the agent is told its index.
A baseline agent runs on the same trials (M3-M6). The agent never sees the stream's labels.
"""

from __future__ import annotations

import numpy as np
from tqdm.auto import tqdm

from owl_eval.datasets.classification import LabeledData
from owl_eval.errors import ConfigError
from owl_eval.protocols.base import AgentOutputError, ProtocolDriver, keep_partial, real_array
from owl_eval.protocols.interfaces import Method, choices, class_name, require_interface
from owl_eval.protocols.ond.api import OndBatch
from owl_eval.protocols.ond.metrics import OndTrial
from owl_eval.protocols.ond.record import OndRecord
from owl_eval.protocols.ond.trials import (
    TrialPlan,
    check_domain_fits,
    fewest_training_samples,
    known_class_ids,
    plan_trials,
    split_classes,
)
from owl_eval.typed import as_bool, as_choice, as_float, as_int

CONDITIONS = ("system", "given")
# What the protocol calls on an agent (and on the baseline), in the order a mismatch is reported.
AGENT_METHODS = (
    Method("predict_batch", "predict_batch(batch)", args=1),
    Method("fit", "fit(features, labels, *, num_known, rng)", args=2, keywords=("num_known", "rng")),
    Method("start_trial", "start_trial(trial_id, num_samples)", args=2),
)
DOMAIN_METHODS = (Method("load", "load() (labelled features)"),)


class OndDriver(ProtocolDriver):
    name = "ond"

    def __init__(
        self,
        condition: str = "system",
        known_classes: int | list[str] = 6,
        train_fraction: float = 0.5,
        num_trials: int = 20,
        trials_without_novelty: int = 2,
        pre_novelty: int = 60,
        post_novelty: int = 140,
        novel_fraction: float = 0.5,
        novel_classes_per_trial: int = 2,
        batch_size: int = 10,
        normalize: bool = False,
        sum_tolerance: float = 1e-6,
    ):
        self.condition = as_choice(condition, "protocol.condition", CONDITIONS)
        # a number of classes drawn by the seed, or the classes' names
        self.known_names: tuple[str, ...] | None = None
        if isinstance(known_classes, list | tuple):
            names = tuple(str(n) for n in known_classes)
            twice = sorted({n for n in names if names.count(n) > 1})
            if not names or twice:
                raise ConfigError(
                    f"protocol.known_classes: expected a number of classes or distinct class names, got "
                    f"{list(names)}" + (f" ({twice} given twice)" if twice else "")
                )
            self.known_names = names
            self.known_classes = len(names)
        else:
            self.known_classes = as_int(known_classes, "protocol.known_classes", minimum=1)
        self.train_fraction = as_float(
            train_fraction, "protocol.train_fraction", minimum=0.0, maximum=1.0, open_minimum=True, open_maximum=True
        )
        self.num_trials = as_int(num_trials, "protocol.num_trials", minimum=1)
        self.trials_without_novelty = as_int(trials_without_novelty, "protocol.trials_without_novelty", minimum=0)
        if self.trials_without_novelty > self.num_trials:
            raise ConfigError(
                f"protocol.trials_without_novelty: expected at most protocol.num_trials ({self.num_trials}), "
                f"got {self.trials_without_novelty}"
            )
        self.pre_novelty = as_int(pre_novelty, "protocol.pre_novelty", minimum=0)
        self.post_novelty = as_int(post_novelty, "protocol.post_novelty", minimum=1)
        self.novel_fraction = as_float(
            novel_fraction, "protocol.novel_fraction", minimum=0.0, maximum=1.0, open_minimum=True
        )
        self.novel_classes_per_trial = as_int(novel_classes_per_trial, "protocol.novel_classes_per_trial", minimum=1)
        self.batch_size = as_int(batch_size, "protocol.batch_size", minimum=1)
        self.normalize = as_bool(normalize, "protocol.normalize")
        self.sum_tolerance = as_float(sum_tolerance, "protocol.sum_tolerance", minimum=0.0)

    # -- checks before any run exists ------------------------------------------------------------------
    def check(self, *, domain, agent, baseline=None) -> None:
        """Agent and baseline are OND agents, the domain gives labelled data, and the settings fit it
        (known classes, novel classes per trial, trial lengths, the agents' own needs through their optional
        ``check_training_size(num_samples, role=...)``). A ``ClassificationDomain`` keeps what it loaded, so
        ``run`` does not read the data twice."""
        require_interface(agent, AGENT_METHODS, role="agent", kind="an OND agent", choose=choices("agent", "ond"))
        if baseline is not None:
            require_interface(
                baseline,
                AGENT_METHODS,
                role="baseline",
                kind="an OND agent",
                choose=choices("baseline", "ond", extra=("none",)),
            )
        data = self._data(domain)
        known_ids = self._known_ids(data)
        check_domain_fits(
            data,
            known_classes=self.known_classes,
            train_fraction=self.train_fraction,
            novel_classes_per_trial=self.novel_classes_per_trial,
            pre_novelty=self.pre_novelty,
            post_novelty=self.post_novelty,
            domain_name=str(getattr(domain, "name", class_name(domain))),
            known_ids=known_ids,
        )
        # An agent may say whether the training split is large enough for it (a kNN needs k samples).
        fewest = fewest_training_samples(
            data, known_classes=self.known_classes, train_fraction=self.train_fraction, known_ids=known_ids
        )
        for role, who in (("agent", agent), ("baseline", baseline)):
            if who is not None and callable(getattr(who, "check_training_size", None)):
                who.check_training_size(fewest, role=role)

    def _known_ids(self, data: LabeledData) -> np.ndarray | None:
        """The named known classes' ids (None: drawn by the seed)."""
        return None if self.known_names is None else known_class_ids(data, self.known_names)

    def _data(self, domain) -> LabeledData:
        """The domain's labelled data (checked to be :class:`LabeledData`)."""
        require_interface(
            domain,
            DOMAIN_METHODS,
            role="domain",
            kind="an OND domain",
            choose="domain=<option> (digits, handwriting, activity, image_segments)",
        )
        data = domain.load()
        if not isinstance(data, LabeledData):
            raise ConfigError(
                f"domain ({class_name(domain)}) is not an OND domain: load() returned "
                f"{type(data).__name__}, expected owl_eval.datasets.classification.LabeledData"
            )
        return data

    def tags(self) -> dict[str, str]:
        return {"condition": self.condition}

    # -- running ---------------------------------------------------------------------------------------
    def run(self, *, domain, agent, rng, baseline=None, progress=True) -> OndRecord:
        data = self._data(domain)
        split = split_classes(
            data,
            known_classes=self.known_classes,
            train_fraction=self.train_fraction,
            rng=rng,
            known_ids=self._known_ids(data),
        )
        plans = plan_trials(
            data,
            split,
            num_trials=self.num_trials,
            trials_without_novelty=self.trials_without_novelty,
            pre_novelty=self.pre_novelty,
            post_novelty=self.post_novelty,
            novel_fraction=self.novel_fraction,
            novel_classes_per_trial=self.novel_classes_per_trial,
            rng=rng,
        )
        train_features = data.features[split.train_rows]
        train_labels = np.searchsorted(split.known_classes, data.labels[split.train_rows]) + 1
        runners = {"agent": agent} | ({"baseline": baseline} if baseline is not None else {})
        # Each agent gets its own generator so adding a baseline never changes the agent's numbers.
        for role, seed_seq in zip(runners, rng.bit_generator.seed_seq.spawn(len(runners))):
            runners[role].fit(
                train_features.copy(),
                train_labels.copy(),
                num_known=self.known_classes,
                rng=np.random.default_rng(seed_seq),
            )
        record = OndRecord(
            condition=self.condition,
            known_classes=split.known_classes,
            novel_classes=split.novel_classes,
            class_names=data.class_names,
            trials=[],
            baseline_trials=[] if baseline is not None else None,
        )
        with keep_partial(lambda: record if record.trials else None) as unit_done:
            for plan in tqdm(plans, desc=f"OND trials ({self.condition})", disable=not progress, leave=True):
                # A trial is added only when agent and baseline both completed it: partial records stay aligned.
                finished = {role: self._run_trial(role, who, plan, data.features) for role, who in runners.items()}
                record.trials.append(finished["agent"])
                if record.baseline_trials is not None:
                    record.baseline_trials.append(finished["baseline"])
                unit_done()
        return record

    def batches(self, plan: TrialPlan, features: np.ndarray):
        """The mini-batches of one trial as the agent sees them (features and, if given, the red light)."""
        n = len(plan.sample_rows)
        for b, start in enumerate(range(0, n, self.batch_size)):
            index = np.arange(start, min(start + self.batch_size, n))
            told = self.condition == "given" and plan.red_light is not None and plan.red_light <= index[-1]
            yield OndBatch(
                trial_id=plan.trial_id,
                batch_index=b,
                sample_index=index,
                features=features[plan.sample_rows[index]].copy(),
                red_light_index=plan.red_light if told else None,
            )

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
        return OndTrial(
            gt_class=plan.gt_class,
            gt_novel=plan.gt_novel,
            red_light=plan.red_light,
            p_world_changed=p_world,
            p_class=p_class,
            batch_size=self.batch_size,
            trial_id=plan.trial_id,
        )

    def _check_output(self, role, trial_id, batch: OndBatch, out) -> tuple[np.ndarray, np.ndarray]:
        where = f"{role} output for trial {trial_id!r}, batch {batch.batch_index}"
        n, width = len(batch.sample_index), self.known_classes + 1
        if not isinstance(out, tuple) or len(out) != 2:
            raise AgentOutputError(
                f"{where}: predict_batch must return (p_world_changed, p_class), got {type(out).__name__}"
            )
        world = real_array(out[0], "p_world_changed", where=where).astype(np.float64)
        scores = real_array(out[1], "p_class", where=where).astype(np.float64)
        for name, arr, shape in (("p_world_changed", world, (n,)), ("p_class", scores, (n, width))):
            if arr.shape != shape:
                raise AgentOutputError(
                    f"{where}: {name} has shape {arr.shape}, expected {shape} (batch size {n}"
                    + (f", K+1 = {width} columns, column 0 = unknown)" if name == "p_class" else ")")
                )
            if not np.all(np.isfinite(arr)):
                raise AgentOutputError(
                    f"{where}: {name} contains NaN or inf (row {int(np.argwhere(~np.isfinite(arr))[0][0])})"
                )
            if arr.min() < 0.0 or arr.max() > 1.0:
                raise AgentOutputError(
                    f"{where}: {name} must lie in [0, 1], got values from {arr.min():.6g} to {arr.max():.6g}"
                )
        sums = scores.sum(axis=1)
        if self.normalize:
            if np.any(sums <= 0):
                raise AgentOutputError(f"{where}: p_class row {int(np.argmin(sums))} sums to 0; cannot normalize")
            scores = scores / sums[:, None]
        elif np.any(np.abs(sums - 1.0) > self.sum_tolerance):
            row = int(np.argmax(np.abs(sums - 1.0)))
            raise AgentOutputError(
                f"{where}: p_class row {row} sums to {sums[row]:.9g}, expected 1 within {self.sum_tolerance:g} "
                "(set protocol.normalize=true to rescale)"
            )
        return world, scores
