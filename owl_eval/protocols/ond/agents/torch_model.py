"""Any ``torch.nn.Module`` classifier as an OND agent (``agent=ond/torch``), named in YAML: no Python to write.

- ``module``: a network mapping ``[n, D]`` features to ``[n, K]`` logits, one per known class (labels 1..K are
  its outputs 0..K-1); its output width is checked before training (one error naming ``agent.module``, the
  expected and the actual shape), before any run exists (:meth:`TorchNoveltyAgent.check_model`). How the node is built and seeded: :mod:`owl_eval.protocols.torch_support`.
- Training: ``epochs`` passes of mini-batch cross-entropy (``batch_size``, the order of ``torch.randperm``) with
  ``optimizer`` (a partial, e.g. ``torch.optim.Adam`` with its ``lr``) on ``device`` (``cpu`` by default). With
  ``standardize: true`` the features are z-scored with the mean and standard deviation of the rows the network
  is fitted on (a constant feature is only centred).
- Novelty score (higher = more novel): ``max_softmax`` = 1 - the largest softmax probability (Hendrycks & Gimpel
  2017); ``energy`` = -logsumexp of the logits (Liu et al. 2020).
- Calibration and ``P(world changed)`` as ``agent=ond/sklearn`` (:mod:`owl_eval.protocols.ond.agents.calibration`):
  a stratified ``calibration_fraction`` of the training split is held out, the network is trained on the rest,
  the ``unknown_quantile`` of the held-out scores is the threshold. The known-class scores are the softmax
  probabilities times ``1 - p_unknown``.
- Seeds, from the generator the protocol hands to ``fit``: first the held-out rows (one permutation per class),
  then one integer ``s`` (``rng.integers(2**31 - 1)``): the agent's torch stream is ``torch.manual_seed(s)``, from
  which the network is built, probed once (two rows of zeros, eval mode: this sizes a lazy layer) and trained.
  The process's global torch generator is left as it was.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.special import logsumexp, softmax

from owl_eval.errors import ConfigError
from owl_eval.protocols.ond.agents.calibration import CalibratedNovelty, check_output
from owl_eval.protocols.ond.agents.inputs import torch_inputs
from owl_eval.protocols.ond.api import OndBatch
from owl_eval.protocols.torch_support import (
    SEED_HIGH,
    ModuleBuilder,
    TorchStream,
    as_device,
    as_tensor,
    as_threads,
    check_width,
    logits,
    make_optimizer,
    named_for,
    optimizer_factory,
    train_epochs,
)
from owl_eval.typed import as_bool, as_int

SCORES = ("max_softmax", "energy")


class TorchNoveltyAgent(CalibratedNovelty):
    def __init__(
        self,
        module: Any,
        optimizer: Any = None,
        epochs: int = 30,
        batch_size: int = 32,
        device: str = "cpu",
        threads: int | None = 1,
        standardize: bool = True,
        novelty: str = "max_softmax",
        calibration_fraction: float = 0.25,
        unknown_quantile: float = 0.95,
        temperature: float = 8.0,
        world_quantile: float = 0.95,
        window: int = 20,
        tests_per_trial: float = 100.0,
        given_shift: float = 1.0,
    ):
        self.builder = ModuleBuilder(module, "agent.module")
        self.module = self.builder.template  # the unseeded template; each fit builds its own
        self.optimizer = optimizer_factory(optimizer, "agent.optimizer")
        self.epochs = as_int(epochs, "agent.epochs", minimum=1)
        self.batch_size = as_int(batch_size, "agent.batch_size", minimum=1)
        self._device = as_device(device, "agent.device")
        self.device = str(device)
        self.threads = as_threads(threads, "agent.threads")
        self.standardize = as_bool(standardize, "agent.standardize")
        if novelty not in SCORES:
            raise ConfigError(f"agent.novelty: expected one of {list(SCORES)}, got {novelty!r}")
        self.novelty = novelty
        self._calibration_settings(
            calibration_fraction, unknown_quantile, temperature, world_quantile, window, tests_per_trial, given_shift
        )
        self.model: Any = None

    # -- before any run ------------------------------------------------------------------------------------
    def check_model(self, *, driver, domain, role: str = "agent") -> None:
        """The module, built as ``fit`` builds it, maps a batch of zeros shaped as the domain's samples (as this
        agent feeds them, :func:`torch_inputs`) to one logit per known class (``protocol.known_classes``), and the
        optimizer takes its parameters: a wrong output width is one error before the run exists, not a FAILED run."""
        num_known = int(driver.known_classes)
        sample = tuple(torch_inputs(domain.load().features[:1]).shape[1:])
        with named_for(role):
            self.builder.probe(sample, num_known, self._device, f"known class (K = {num_known})", self.optimizer)

    # -- training ------------------------------------------------------------------------------------------
    def fit(self, features, labels, *, num_known, rng):
        torch = self.builder.torch
        X, y = torch_inputs(features), np.asarray(labels)
        self.num_known = int(num_known)
        held = self._held_out(y, rng)
        self.held_out = held  # the calibration rows of the training split (bool mask)
        self.seed = int(rng.integers(SEED_HIGH))
        fit_rows = ~held
        if self.standardize:
            self.mean = X[fit_rows].mean(axis=0)
            std = X[fit_rows].std(axis=0)
            self.std = np.where(std > 0, std, 1.0)
        self.stream = TorchStream(self.seed, self._device, self.threads)
        with self.stream.active():
            model = self.builder.build(self._device)
            check_width(model, X.shape[1:], self.num_known, self._device, f"known class (K = {self.num_known})")
            optimizer = make_optimizer(self.optimizer, model)
            train_epochs(
                model,
                optimizer,
                as_tensor(self._inputs(X[fit_rows]), self._device),
                torch.as_tensor(y[fit_rows] - 1, dtype=torch.long, device=self._device),
                epochs=self.epochs,
                batch_size=self.batch_size,
                where="agent.module (training)",
            )
        self.model = model.eval()
        _, scores = self._scores(X[held], "calibration")
        self._calibrate(scores)

    def _inputs(self, X: np.ndarray) -> np.ndarray:
        return (X - self.mean) / self.std if self.standardize else X

    # -- scoring -------------------------------------------------------------------------------------------
    def _scores(self, X: np.ndarray, when: str) -> tuple[np.ndarray, np.ndarray]:
        """Known-class probabilities ``[n, K]`` (softmax of the logits) and novelty scores ``[n]``."""
        n, k = len(X), self.num_known
        with self.stream.active():
            out = logits(self.model, self._inputs(X), self._device)
        check_output(out, (n, k), "agent.module(X)", f"agent ({when})", f"(n samples, K = {k} logits)")
        proba = softmax(out, axis=1)
        score = -logsumexp(out, axis=1) if self.novelty == "energy" else 1.0 - proba.max(axis=1)
        return proba, score

    def predict_batch(self, batch: OndBatch):
        if self.model is None:
            raise RuntimeError("TorchNoveltyAgent.predict_batch called before fit")
        proba, score = self._scores(torch_inputs(batch.features), "predict")
        return self._outputs(proba, score, batch)
