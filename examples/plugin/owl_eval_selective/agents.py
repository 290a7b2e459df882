"""The baseline selective classifier: softmax response (Geifman & El-Yaniv, "Selective Classification for Deep
Neural Networks", NeurIPS 2017), the maximum predicted class probability as the confidence."""

from __future__ import annotations

import numpy as np

from owl_eval.typed import as_float, as_int

__all__ = ["SoftmaxConfidence"]


class SoftmaxConfidence:
    """Multinomial logistic regression (scikit-learn, L2-regularised, lbfgs); predicts the most probable class
    and reports its probability as the confidence.

    ``C``: inverse regularisation strength; ``max_iter``: lbfgs iterations. The model's ``random_state`` is
    drawn from the ``rng`` the protocol gives ``fit``, so a run is reproducible from its seed.
    """

    def __init__(self, C: float = 1.0, max_iter: int = 1000):
        self.C = as_float(C, "agent.C", minimum=0.0, open_minimum=True)
        self.max_iter = as_int(max_iter, "agent.max_iter", minimum=1)
        self._model = None

    def fit(self, features: np.ndarray, labels: np.ndarray, *, rng: np.random.Generator) -> None:
        from sklearn.linear_model import LogisticRegression

        seed = int(rng.integers(2**31 - 1))
        self._model = LogisticRegression(C=self.C, max_iter=self.max_iter, random_state=seed)
        self._model.fit(np.asarray(features, dtype=np.float64), np.asarray(labels))

    def predict(self, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if self._model is None:
            raise RuntimeError("SoftmaxConfidence.predict called before fit")
        proba = self._model.predict_proba(np.asarray(features, dtype=np.float64))
        best = proba.argmax(axis=1)
        return self._model.classes_[best], proba[np.arange(len(best)), best]
