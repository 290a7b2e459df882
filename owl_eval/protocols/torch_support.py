"""What the torch adapters share (``agent=ond/torch``, ``agent=continual/torch``): a ``torch.nn.Module`` named in
YAML, built under a seed drawn from the agent's generator, trained by a small loop, checked for its output width.

- ``module``: a config node (``{_target_: torch.nn.Sequential, _args_: [...]}``; the agent configs set
  ``_recursive_: false`` so the node reaches the adapter unbuilt and is built by ``hydra.utils.instantiate`` at
  each run, under the run's seed: every parameter, a custom module's own ones included, is drawn from it), an
  already built ``torch.nn.Module`` (deep-copied at each run, then every submodule's ``reset_parameters()``
  called under the seed: parameters a custom module makes without one keep their values) or a callable that
  returns one (a class, a ``_partial_: true`` factory).
- ``optimizer``: a config node (``{_target_: torch.optim.Adam, lr: 0.001}``, built as a partial: ``_partial_:
  true`` may be left out), a dotted-path string or a callable ``optimizer(params) -> torch.optim.Optimizer``.
- Determinism: each agent has one torch random stream, :class:`TorchStream`: ``torch.manual_seed(seed)`` inside
  ``torch.random.fork_rng``, its state kept between calls, so the process's global generator is left as it was,
  and the agent's draws (the weights, the shuffles, dropout) are those of a script that calls
  ``torch.manual_seed(seed)`` once and then does the same steps in the same order. The same config and seed
  give the same numbers on the same machine and torch build (torch does not promise bitwise equality across
  versions, thread counts or devices).

torch is optional (the ``torch`` extra); without it the adapters' configs fail with one line naming the extra.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import numpy as np

from owl_eval.errors import ConfigError
from owl_eval.protocols.adapters import _import, describe, has_method, require_call
from owl_eval.protocols.base import AgentOutputError
from owl_eval.typed import as_int, as_str

INSTALL_HINT = 'pip install -e ".[torch]"'
SEED_HIGH = 2**31 - 1


def flat(exc: BaseException) -> str:
    """An exception's message on one line (Hydra's span several)."""
    return "; ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or type(exc).__name__


def require_torch(key: str):
    """The ``torch`` module, or one :class:`ConfigError` naming ``key`` and the extra that installs it."""
    try:
        import torch
    except ImportError:
        raise ConfigError(f"{key}: needs torch, which is not installed here ({INSTALL_HINT})") from None
    return torch


def as_device(value: Any, key: str = "agent.device"):
    """``cpu``, ``cuda``, ``cuda:1``, ``mps``: a device torch knows and this machine has."""
    torch = require_torch(key)
    text = as_str(str(value), key)
    try:
        device = torch.device(text)
    except (RuntimeError, ValueError) as exc:
        raise ConfigError(f"{key}: {text!r} is not a torch device ({exc}); e.g. cpu or cuda") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"{key}: {text!r}, but this torch ({torch.__version__}) sees no CUDA device; use cpu")
    if device.type == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"{key}: {text!r}, but this machine has no MPS device; use cpu")
    return device


class TorchStream:
    """One agent's torch random numbers (and thread count): seeded once, resumed by every ``with stream.active():``.

    Inside ``active()`` the global generator (and the CUDA device's, for a CUDA agent) holds the stream's state and
    torch runs ops on ``threads`` threads (None: torch's own setting); on leaving, the state is saved and the
    process's own generator state and thread count are put back. One thread is the adapters' default: a small
    network gains nothing from more, and torch's thread pool on a busy machine (parallel test workers, a sweep's
    jobs) is up to 60 times slower than one thread (measured: 200 Adam steps of a 64-64-10 MLP, 29 s against 0.5 s)."""

    def __init__(self, seed: int, device, threads: int | None = 1):
        self.torch = require_torch("agent")
        self.threads = threads
        self.cuda = device.type == "cuda"
        self.device_index = device.index if device.index is not None else 0
        with self.torch.random.fork_rng(devices=[self.device_index] if self.cuda else []):
            self.torch.manual_seed(int(seed))
            self.cpu_state = self.torch.get_rng_state()
            self.cuda_state = self.torch.cuda.get_rng_state(self.device_index) if self.cuda else None

    @contextmanager
    def active(self) -> Iterator[None]:
        torch = self.torch
        threads = torch.get_num_threads()
        with torch.random.fork_rng(devices=[self.device_index] if self.cuda else []):
            torch.set_rng_state(self.cpu_state)
            if self.cuda:
                torch.cuda.set_rng_state(self.cuda_state, self.device_index)
            if self.threads is not None and self.threads != threads:
                torch.set_num_threads(self.threads)
            try:
                yield
            finally:
                self.cpu_state = torch.get_rng_state()
                if self.cuda:
                    self.cuda_state = torch.cuda.get_rng_state(self.device_index)
                if torch.get_num_threads() != threads:
                    torch.set_num_threads(threads)


def as_threads(value: Any, key: str = "agent.threads") -> int | None:
    return None if value is None else as_int(value, key, minimum=1)


class ModuleBuilder:
    """``agent.module`` as given (a config node, a module, or a callable that returns one), built afresh by
    :meth:`build` inside the agent's stream. A template is built once at construction (under a fixed seed,
    the global generator untouched) to check that it is a ``torch.nn.Module``: before any run."""

    def __init__(self, value: Any, key: str = "agent.module"):
        self.torch = require_torch(key)
        self.key = key
        if isinstance(value, str) and "." in value and " " not in value:
            value = _import(value, key)
        if value is None or isinstance(value, (str, int, float, bool)):
            raise ConfigError(
                f"{key}: expected a torch.nn.Module (a node with _target_, e.g. torch.nn.Sequential), got {value!r}"
            )
        self.value = value
        with self.torch.random.fork_rng(devices=[]):
            self.torch.manual_seed(0)
            template = self._build()
        if not isinstance(template, self.torch.nn.Module):
            raise ConfigError(
                f"{key} ({describe(template)}) is not a torch.nn.Module; name a module class with _target_ "
                "(e.g. torch.nn.Sequential of torch.nn.Linear and torch.nn.ReLU, or your own nn.Module)"
            )
        self.template = template

    def _build(self) -> Any:
        value = self.value
        if isinstance(value, Mapping):
            from hydra.errors import InstantiationException
            from hydra.utils import instantiate

            try:
                return instantiate(dict(value), _convert_="all")
            except InstantiationException as exc:
                cause = exc.__cause__ or exc
                raise ConfigError(f"{self.key}: cannot build {value.get('_target_')!r} ({flat(cause)})") from None
        if isinstance(value, self.torch.nn.Module):
            module = copy.deepcopy(value)
            for sub in module.modules():
                if has_method(sub, "reset_parameters"):
                    sub.reset_parameters()
            return module
        if callable(value):
            try:
                return value()
            except Exception as exc:
                raise ConfigError(
                    f"{self.key} ({describe(value)}): calling it without arguments failed ({flat(exc)})"
                ) from None
        return value

    def build(self, device) -> Any:
        """A fresh module on ``device``; call inside the agent's :meth:`TorchStream.active`."""
        return self._build().to(device)

    def probe(self, sample: int | tuple[int, ...], width: int, device, meaning: str, optimizer: Callable | None = None):
        """Before any run: a module built as a run builds it (under a fixed seed, the process's generator left as it
        was) maps a batch of zeros of the sample's shape to ``width`` outputs (:func:`check_width`), and
        ``optimizer(params)`` accepts its parameters (a negative ``lr`` is refused there); else one
        :class:`ConfigError` naming the key. The run's own module is built afresh under the run's seed."""
        with self.torch.random.fork_rng(devices=[]):
            self.torch.manual_seed(0)
            module = self.build(device)
            check_width(module, sample, width, device, meaning, key=self.key)
            if optimizer is not None:
                key = self.key.rsplit(".", 1)[0] + ".optimizer"
                try:
                    make_optimizer(optimizer, module, key)
                except ConfigError:
                    raise
                except Exception as exc:  # torch's own checks of the optimizer's settings (lr, betas)
                    raise ConfigError(f"{key}: {flat(exc)} (refused by {describe(optimizer)})") from None


@contextmanager
def named_for(role: str) -> Iterator[None]:
    """A :class:`ConfigError` raised inside names ``role``'s key: an agent's settings are ``agent.*`` to itself,
    ``baseline.*`` when it is built as the baseline."""
    try:
        yield
    except ConfigError as error:
        text = str(error)
        if role != "agent" and text.startswith("agent."):
            raise ConfigError(f"{role}.{text[len('agent.') :]}") from None
        raise


def optimizer_factory(value: Any, key: str = "agent.optimizer") -> Callable:
    """``agent.optimizer`` as a callable ``optimizer(params)``; null is ``torch.optim.Adam`` (lr 0.001)."""
    torch = require_torch(key)
    if value is None:
        return torch.optim.Adam
    if isinstance(value, str):
        value = _import(value, key)
    elif isinstance(value, Mapping):
        from hydra.errors import InstantiationException
        from hydra.utils import instantiate

        if "_target_" not in value:
            raise ConfigError(f"{key}: expected a node with _target_ (e.g. torch.optim.Adam and its lr), got {value!r}")
        try:
            value = instantiate({**value, "_partial_": True}, _convert_="all")
        except InstantiationException as exc:
            raise ConfigError(f"{key}: cannot build {value.get('_target_')!r} ({flat(exc.__cause__ or exc)})") from None
    if not callable(value):
        raise ConfigError(f"{key} ({describe(value)}) is not callable as optimizer(params); name torch.optim.Adam etc.")
    require_call(value, key, "optimizer(params)", 1)
    return value


def make_optimizer(factory: Callable, module, key: str = "agent.optimizer"):
    torch = require_torch(key)
    optimizer = factory(module.parameters())
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ConfigError(f"{key}: optimizer(params) returned {describe(optimizer)}, not a torch.optim.Optimizer")
    return optimizer


def as_tensor(X: np.ndarray, device, dtype=None):
    torch = require_torch("agent")
    return torch.as_tensor(np.ascontiguousarray(X), dtype=dtype or torch.float32, device=device)


def check_width(
    module, num_features: int | tuple[int, ...], width: int, device, meaning: str, key: str = "agent.module"
) -> None:
    """The module maps a batch ``[2, num_features]`` (``[2, C, H, W]`` for images: ``num_features`` a sample's
    shape) to ``[2, width]`` (one logit per class); else one :class:`ConfigError` naming ``key``, the expected and
    the actual output shape. The probe (two samples of zeros, eval mode, no gradient) is also what sets the size of
    a lazy layer (``torch.nn.LazyLinear``)."""
    torch = require_torch(key)
    sample = tuple(num_features) if isinstance(num_features, tuple) else (int(num_features),)
    batch = (2, *sample)
    must = f"its input width must be {sample[0]}" if len(sample) == 1 else f"it must take images of shape {sample}"
    module.eval()
    try:
        with torch.no_grad():
            out = module(torch.zeros(batch, dtype=torch.float32, device=device))
    except Exception as exc:
        raise ConfigError(
            f"{key} ({describe(module)}) fails on a batch of shape {batch} ({type(exc).__name__}: {flat(exc)}); {must}"
        ) from None
    shape = tuple(getattr(out, "shape", ()))
    if not isinstance(out, torch.Tensor) or shape != (2, width):
        raise ConfigError(
            f"{key} ({describe(module)}) outputs shape {shape} for a batch of shape {batch}, expected "
            f"(2, {width}): one logit per {meaning}; make its last layer's out_features {width}"
        )


def train_epochs(
    module,
    optimizer,
    X,
    y,
    *,
    epochs: int,
    batch_size: int,
    penalty: Callable[[], Any] | None = None,
    where: str = "agent",
) -> None:
    """``epochs`` passes of mini-batch cross-entropy training over the tensors ``X``, ``y``, each pass in the order
    of ``torch.randperm(n)`` (the agent's stream must be active); ``penalty()`` is added to each batch's loss."""
    torch = require_torch("agent")
    module.train()
    n = int(y.shape[0])
    for epoch in range(epochs):
        order = torch.randperm(n).to(X.device)
        for start in range(0, n, batch_size):
            rows = order[start : start + batch_size]
            loss = torch.nn.functional.cross_entropy(module(X[rows]), y[rows])
            if penalty is not None:
                loss = loss + penalty()
            if not torch.isfinite(loss):
                raise AgentOutputError(
                    f"{where}: the training loss is {loss.item()} in epoch {epoch} (rows {start}..{start + len(rows) - 1}"
                    " of the shuffled data); lower agent.optimizer.lr"
                )
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


def logits(module, X: np.ndarray, device, batch: int = 4096) -> np.ndarray:
    """The module's outputs for ``X`` in eval mode, without gradients, as float64 ``[n, width]``."""
    torch = require_torch("agent")
    module.eval()
    out = []
    with torch.no_grad():
        for start in range(0, max(len(X), 1), batch):  # an empty X still gives [0, width]
            out.append(module(as_tensor(X[start : start + batch], device)).detach().cpu().double().numpy())
    return np.concatenate(out)
