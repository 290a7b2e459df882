"""Any scikit-learn classifier as an OND agent (``agent=ond/sklearn``), named in YAML: no Python to write.

- ``classifier``: anything with ``fit(X, y)`` and ``predict_proba(X)`` (a ``Pipeline`` too), trained on the
  known classes' training split (labels 1..K); its probabilities are the known-class scores.
- ``novelty``: the novelty score of a sample (higher = more novel):
  ``max_softmax`` = 1 - the largest class probability; ``energy`` = -logsumexp of the classifier's
  ``decision_function`` (its logits; Liu et al. 2020), which the classifier must have; or an outlier detector
  (``IsolationForest``, ``LocalOutlierFactor(novelty=True)``, ``OneClassSVM``, a Pipeline ending in one: anything
  with ``fit(X)`` and ``score_samples(X)`` or ``decision_function(X)``, where lower means more abnormal, as in
  scikit-learn) fitted on the known training features, score = -score_samples (or -decision_function).
- Calibration on known classes only: a stratified ``calibration_fraction`` of the training split (drawn from the
  agent's generator) is held out; copies of the classifier and detector fitted on the rest score it, and the
  ``unknown_quantile`` of those scores is the threshold ``t``, their standard deviation the scale ``s``. Those
  fits are the agent's models (split conformal: the threshold holds for the scores it is applied to);
  ``refit: true`` refits both on the whole split instead, which shifts the scale of scores that depend on the
  training set's size (IsolationForest's path lengths, OneClassSVM's offset), so the threshold does not hold for them.
  ``p_unknown = sigmoid(temperature * (score - t) / s)``; the known-class scores are the classifier's
  probabilities times ``1 - p_unknown`` (column 0 of ``p_class`` is "unknown").
- ``P(world changed)``: knn_novelty's test. Within a trial, the count of samples whose score is above the
  calibration scores' ``world_quantile`` among the last ``window`` samples (the recent unknown fraction) is
  tested against Binomial(n, 1 - world_quantile); P = 1 - min(1, p-value x ``tests_per_trial``), kept monotone.
  From the red light on (``condition: given``) P is 1 and the threshold drops by ``given_shift`` x ``s``.
- Seeds: every ``random_state`` left at None (a Pipeline's steps too) is drawn from the agent's generator; a
  value set in the YAML is kept.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import logsumexp

from owl_eval.errors import ConfigError
from owl_eval.protocols.adapters import (
    describe,
    first_method,
    fresh,
    require_methods,
    resolve,
    seed_estimator,
)
from owl_eval.protocols.base import AgentOutputError, real_array
from owl_eval.protocols.ond.agents.calibration import CalibratedNovelty
from owl_eval.protocols.ond.agents.calibration import check_output as _check
from owl_eval.protocols.ond.agents.inputs import flat_features
from owl_eval.protocols.ond.api import OndBatch
from owl_eval.typed import as_bool

SCORES = ("max_softmax", "energy")
DETECTOR_SCORES = ("score_samples", "decision_function")


class SklearnNoveltyAgent(CalibratedNovelty):
    def __init__(
        self,
        classifier: Any,
        novelty: Any = "max_softmax",
        calibration_fraction: float = 0.25,
        unknown_quantile: float = 0.95,
        temperature: float = 8.0,
        refit: bool = False,
        world_quantile: float = 0.95,
        window: int = 20,
        tests_per_trial: float = 100.0,
        given_shift: float = 1.0,
    ):
        self.classifier = resolve(classifier, "agent.classifier")
        need = "an OND classifier needs fit(X, y) and predict_proba(X)"
        if isinstance(self.classifier, str) or self.classifier is None:
            raise ConfigError(
                f"agent.classifier: expected a scikit-learn classifier (a node with _target_, e.g. "
                f"sklearn.linear_model.LogisticRegression), got {self.classifier!r}"
            )
        require_methods(
            self.classifier,
            "agent.classifier",
            ("fit", "predict_proba"),
            need=need,
            hint="wrap it in sklearn.calibration.CalibratedClassifierCV for probabilities",
        )
        self.novelty = resolve(novelty, "agent.novelty")
        if isinstance(self.novelty, str):
            if self.novelty not in SCORES:
                raise ConfigError(
                    f"agent.novelty: expected one of {list(SCORES)} or an outlier detector (a node with _target_, "
                    f"e.g. sklearn.ensemble.IsolationForest), got {self.novelty!r}"
                )
            if self.novelty == "energy":
                require_methods(
                    self.classifier,
                    "agent.classifier",
                    ("decision_function",),
                    need="agent.novelty=energy needs the classifier's logits",
                    hint="choose agent.novelty=max_softmax or an outlier detector",
                )
            self.detector_score = ""
        else:
            detector_need = (
                "an outlier detector needs fit(X) and score_samples(X) or decision_function(X) (a "
                "LocalOutlierFactor needs novelty: true)"
            )
            require_methods(self.novelty, "agent.novelty", ("fit",), need=detector_need)
            self.detector_score = first_method(self.novelty, "agent.novelty", DETECTOR_SCORES, need=detector_need)
        self._calibration_settings(
            calibration_fraction, unknown_quantile, temperature, world_quantile, window, tests_per_trial, given_shift
        )
        self.refit = as_bool(refit, "agent.refit")

    @property
    def uses_detector(self) -> bool:
        return not isinstance(self.novelty, str)

    # -- training ------------------------------------------------------------------------------------------
    def fit(self, features, labels, *, num_known, rng):
        X, y = flat_features(features), np.asarray(labels)
        self.num_known = int(num_known)
        held = self._held_out(y, rng)
        self.held_out = held  # the calibration rows of the training split (bool mask)
        # one seed each, drawn whether or not used: the calibration fits and the final ones share them
        seeds = rng.spawn(2)
        clf_seed, det_seed = (int(s.integers(2**31 - 1)) for s in seeds)
        fit_rows = ~held
        clf, det = self._fit_models(X[fit_rows], y[fit_rows], clf_seed, det_seed)
        _, scores = self._scores(X[held], clf, det, "calibration")
        self._calibrate(scores)
        self.model, self.detector = self._fit_models(X, y, clf_seed, det_seed) if self.refit else (clf, det)

    def _fit_models(self, X, y, clf_seed: int, det_seed: int):
        clf = seed_estimator(fresh(self.classifier), np.random.default_rng(clf_seed))
        clf.fit(X, y)
        classes = np.asarray(getattr(clf, "classes_", np.arange(1, self.num_known + 1)))
        if classes.shape != (self.num_known,) or not np.array_equal(classes, np.arange(1, self.num_known + 1)):
            raise AgentOutputError(
                f"agent.classifier ({describe(clf)}): after fit, classes_ is {classes.tolist()}, expected the "
                f"labels 1..{self.num_known}"
            )
        det = None
        if self.uses_detector:
            det = seed_estimator(fresh(self.novelty), np.random.default_rng(det_seed))
            det.fit(X)
        return clf, det

    # -- scoring -------------------------------------------------------------------------------------------
    def _scores(self, X: np.ndarray, clf, det, when: str) -> tuple[np.ndarray, np.ndarray]:
        """Known-class probabilities ``[n, K]`` (columns for labels 1..K) and novelty scores ``[n]``."""
        n, k = len(X), self.num_known
        where = f"agent ({when})"
        proba = real_array(clf.predict_proba(X), "agent.classifier.predict_proba(X)", where=where).astype(float)
        _check(proba, (n, k), "agent.classifier.predict_proba(X)", where, f"(n samples, K = {k} known classes)")
        if self.uses_detector:
            raw = real_array(
                getattr(det, self.detector_score)(X), f"agent.novelty.{self.detector_score}(X)", where=where
            )
            score = -raw.astype(float)
            _check(score, (n,), f"agent.novelty.{self.detector_score}(X)", where, "(one score per sample)")
        elif self.novelty == "energy":
            logits = real_array(clf.decision_function(X), "agent.classifier.decision_function(X)", where=where)
            logits = logits.astype(float)
            if logits.ndim == 1:  # a binary classifier's one margin: logits (0, margin)
                logits = np.column_stack([np.zeros(n), logits])
            _check(logits, (n, k), "agent.classifier.decision_function(X)", where, f"(n samples, K = {k} logits)")
            score = -logsumexp(logits, axis=1)
        else:
            score = 1.0 - proba.max(axis=1)
        return proba, score

    def predict_batch(self, batch: OndBatch):
        proba, score = self._scores(flat_features(batch.features), self.model, self.detector, "predict")
        return self._outputs(proba, score, batch)
