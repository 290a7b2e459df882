"""Any ``torch.nn.Module`` classifier as a continual learner (``agent=continual/torch``), named in YAML, trained
task after task with one of three strategies: ``finetune``, ``replay`` or ``ewc``.

- ``setup``: the learner's generator is split in two (``data_rng, torch_rng = rng.spawn(2)``); one integer
  ``s = torch_rng.integers(2**31 - 1)`` seeds the learner's torch stream (``torch.manual_seed(s)``, the process's
  global generator left as it was; :mod:`owl_eval.protocols.torch_support`), from which the network is built and
  probed once (two rows of zeros, eval mode: a lazy layer gets its size; an output width other than
  ``num_classes`` is one error naming ``agent.module``, the expected and the actual shape: the same probe runs
  before any run exists, :meth:`TorchContinualLearner.check_model`); then the optimizer is
  made, once for the whole sequence (Adam's moments carry over from task to task).
- ``learn(task_id, X, y)``: ``epochs`` passes of mini-batch cross-entropy over the task's training data (with the
  replay buffer's samples for ``replay``), each pass in the order of ``torch.randperm(n)`` from the stream.
- ``finetune``: nothing else (the lower bound: it forgets).
- ``replay: {size, per_task}``: past samples mixed into each task's data, as ``agent=continual/sklearn`` does:
  one reservoir of ``size`` samples over everything seen (``per_task: false``, each seen sample kept with equal
  probability; Vitter's algorithm R) or ``size`` samples of every past task (``per_task: true``), drawn from
  ``data_rng`` after the task is learned.
- ``ewc: {lambda, fisher_samples}``: elastic weight consolidation (Kirkpatrick et al. 2017, "Overcoming
  catastrophic forgetting in neural networks", PNAS 114(13), eq. 3): while learning task B after task A the loss
  is ``L(θ) = L_B(θ) + Σ_i (λ/2) F_i (θ_i - θ*_A,i)²``, with ``θ*_A`` the parameters after task A and ``F`` the
  diagonal of the Fisher information at ``θ*_A``. After several tasks there is one such penalty per past task
  (the paper's "two separate penalties"). ``F_i`` is the empirical Fisher: the mean over the task's training
  samples (all, or ``fisher_samples`` of them drawn from ``data_rng``) of ``(∂ log p(y|x, θ) / ∂θ_i)²`` at the
  true label, one sample at a time in eval mode.
- ``predict(X, task_id)``: the argmax of the logits (eval mode, no gradient); given a task id whose classes are
  known (declared by the protocol, or seen in training), among that task's classes. Before the first task the
  untrained network answers (its random initial weights: the protocol's ``b`` row).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from owl_eval.errors import ConfigError
from owl_eval.protocols.continual.agents.base import TaskClassMemory, check_xy
from owl_eval.protocols.continual.agents.replay import ReservoirBuffer
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
from owl_eval.typed import as_bool, as_choice, as_float, as_int, check_keys

STRATEGIES = ("finetune", "replay", "ewc")


def _node(value: Any, key: str, keys: tuple[str, ...]) -> dict:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key}: expected null or a mapping with keys {list(keys)}, got {value!r}")
    check_keys(value, keys, key)
    return dict(value)


class TorchContinualLearner(TaskClassMemory):
    def __init__(
        self,
        module: Any,
        optimizer: Any = None,
        epochs: int = 5,
        batch_size: int = 32,
        strategy: str = "finetune",
        replay: dict | None = None,
        ewc: dict | None = None,
        device: str = "cpu",
        threads: int | None = 1,
    ):
        self.builder = ModuleBuilder(module, "agent.module")
        self.module = self.builder.template  # the unseeded template; each setup builds its own
        self.optimizer = optimizer_factory(optimizer, "agent.optimizer")
        self.epochs = as_int(epochs, "agent.epochs", minimum=1)
        self.batch_size = as_int(batch_size, "agent.batch_size", minimum=1)
        self.strategy = as_choice(strategy, "agent.strategy", STRATEGIES)
        self.replay = _node(replay, "agent.replay", ("size", "per_task"))
        self.replay_size = as_int(self.replay.get("size", 200), "agent.replay.size", minimum=1)
        self.replay_per_task = as_bool(self.replay.get("per_task", False), "agent.replay.per_task")
        self.ewc = _node(ewc, "agent.ewc", ("lambda", "fisher_samples"))
        self.ewc_lambda = as_float(self.ewc.get("lambda", 100.0), "agent.ewc.lambda", minimum=0.0)
        samples = self.ewc.get("fisher_samples")
        self.fisher_samples = None if samples is None else as_int(samples, "agent.ewc.fisher_samples", minimum=1)
        self._device = as_device(device, "agent.device")
        self.device = str(device)
        self.threads = as_threads(threads, "agent.threads")
        self.model: Any = None

    # -- before any run ------------------------------------------------------------------------------------
    def check_model(self, *, driver, domain, role: str = "agent") -> None:
        """The module, built as ``setup`` builds it, maps a batch of zeros ``[2, domain.num_features]`` to one logit
        per class of the sequence (``domain.num_classes``), and the optimizer takes its parameters: a wrong output
        width is one error before the run exists, not a FAILED run."""
        num_features, num_classes = int(domain.num_features), int(domain.num_classes)
        with named_for(role):
            self.builder.probe(num_features, num_classes, self._device, f"class ({num_classes})", self.optimizer)

    # -- setup ---------------------------------------------------------------------------------------------
    def setup(self, num_features: int, num_classes: int, rng: np.random.Generator) -> None:
        self.num_features, self.num_classes = int(num_features), int(num_classes)
        self._reset_task_classes()
        self._data_rng, torch_rng = rng.spawn(2)
        self.seed = int(torch_rng.integers(SEED_HIGH))
        self.stream = TorchStream(self.seed, self._device, self.threads)
        with self.stream.active():
            self.model = self.builder.build(self._device)
            check_width(self.model, self.num_features, self.num_classes, self._device, f"class ({num_classes})")
            self.opt = make_optimizer(self.optimizer, self.model)
        self.reservoir = ReservoirBuffer(self.replay_size, self.num_features)
        self.per_task: list[tuple[np.ndarray, np.ndarray]] = []
        # EWC: per past task, the Fisher diagonal and the parameters after it (tensors in parameter order)
        self.anchors: list[tuple[list, list]] = []

    # -- learning ------------------------------------------------------------------------------------------
    def _buffer(self) -> tuple[np.ndarray, np.ndarray] | None:
        if self.strategy != "replay":
            return None
        if self.replay_per_task:
            if not self.per_task:
                return None
            return np.concatenate([x for x, _ in self.per_task]), np.concatenate([y for _, y in self.per_task])
        if self.reservoir.size == 0:
            return None
        return self.reservoir.X[: self.reservoir.size].copy(), self.reservoir.y[: self.reservoir.size].copy()

    def _penalty(self):
        """EWC's ``Σ_tasks Σ_i (λ/2) F_i (θ_i - θ*_i)²`` at the current parameters."""
        params = [p for p in self.model.parameters() if p.requires_grad]
        total = 0.0
        for fisher, anchor in self.anchors:
            for p, f, a in zip(params, fisher, anchor):
                total = total + (f * (p - a) ** 2).sum()
        return (self.ewc_lambda / 2.0) * total

    def learn(self, task_id: int, X: np.ndarray, y: np.ndarray) -> None:
        if self.model is None:
            raise RuntimeError("TorchContinualLearner.learn called before setup")
        torch = self.builder.torch
        X, y = check_xy(X, y, self.num_features, self.num_classes, f"agent.learn(task {task_id})")
        self._record_seen(task_id, y)
        old = self._buffer()
        data_X, data_y = (X, y) if old is None else (np.concatenate([X, old[0]]), np.concatenate([y, old[1]]))
        penalty = self._penalty if self.strategy == "ewc" and self.anchors and self.ewc_lambda > 0 else None
        with self.stream.active():
            train_epochs(
                self.model,
                self.opt,
                as_tensor(data_X, self._device),
                torch.as_tensor(data_y, dtype=torch.long, device=self._device),
                epochs=self.epochs,
                batch_size=self.batch_size,
                penalty=penalty,
                where=f"agent.module (task {task_id})",
            )
            if self.strategy == "ewc":
                self.anchors.append(self._fisher(X, y))
        self._remember(X, y)

    def _fisher(self, X: np.ndarray, y: np.ndarray) -> tuple[list, list]:
        """The empirical Fisher diagonal on the task's samples and the parameters it was taken at."""
        torch = self.builder.torch
        rows = np.arange(len(y))
        if self.fisher_samples is not None and self.fisher_samples < len(y):
            rows = np.sort(self._data_rng.choice(len(y), size=self.fisher_samples, replace=False))
        params = [p for p in self.model.parameters() if p.requires_grad]
        fisher = [torch.zeros_like(p) for p in params]
        self.model.eval()
        Xt = as_tensor(X[rows], self._device)
        yt = torch.as_tensor(y[rows], dtype=torch.long, device=self._device)
        for i in range(len(rows)):
            log_p = torch.nn.functional.log_softmax(self.model(Xt[i : i + 1]), dim=1)[0, yt[i]]
            grads = torch.autograd.grad(log_p, params, allow_unused=True)
            for f, g in zip(fisher, grads):
                if g is not None:
                    f += g.detach() ** 2
        fisher = [f / len(rows) for f in fisher]
        return fisher, [p.detach().clone() for p in params]

    def _remember(self, X: np.ndarray, y: np.ndarray) -> None:
        if self.strategy != "replay":
            return
        if self.replay_per_task:
            keep = self._data_rng.choice(len(y), size=min(self.replay_size, len(y)), replace=False)
            self.per_task.append((X[keep], y[keep]))
        else:
            self.reservoir.add(X, y, self._data_rng)

    # -- predicting ----------------------------------------------------------------------------------------
    def predict(self, X, task_id: int | None = None) -> np.ndarray:
        if self.model is None:
            raise RuntimeError("TorchContinualLearner.predict called before setup")
        X, _ = check_xy(X, None, self.num_features, self.num_classes, "agent.predict")
        with self.stream.active():
            out = logits(self.model, X, self._device)
        return np.argmax(self._mask_logits(out, task_id), axis=1).astype(np.int64)
