"""The small value types every metric module shares: declarations, N/A values, results."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from owl_eval.metrics.keys import MetricKey

V = TypeVar("V")


@dataclass(frozen=True)
class MetricSpec:
    """Declaration of one reported metric name.

    The one way a metric is declared, for every protocol: a ``SPECS`` list of these in a module the
    protocol's descriptor names (``metric_modules``), next to the pure functions.

    ``higher_is_better`` is None for metrics without a better direction (e.g. counts, diagnostics).
    ``combine`` says how results on chunks of samples combine: ``"mean"`` (weighted by ``weight`` of
    each chunk), ``"sum"``, ``"max"``, or ``"none"`` (must be computed on the whole set).
    ``series``: the name holds one value per step (per task, per episode, per horizon step), not a summary.
    ``title``: a short human name (a few words, no better direction) used as a table or figure label
    (:attr:`display_name`; the name itself when there is none).
    A name holding ``{k}`` (``min_ade_{k}_marginal``) is a template: it declares the name for every whole K
    (:meth:`for_k`).
    """

    name: str
    protocol: str
    higher_is_better: bool | None
    bounds: tuple[float, float] = (-math.inf, math.inf)
    log_scale: bool = False
    description: str = ""
    title: str = ""
    latex: str | None = None
    combine: str = "none"
    series: bool = False

    @property
    def is_template(self) -> bool:
        return "{k}" in self.name

    def for_k(self, k: int) -> MetricSpec:
        """The declaration of a template's name for one K (``min_ade_{k}_marginal`` -> ``min_ade_20_marginal``)."""
        return dataclasses.replace(
            self,
            name=self.name.format(k=k),
            description=self.description.replace("K ", f"{k} "),
            title=self.title.replace("{k}", str(k)),
            latex=(self.latex or "").replace("{k}", str(k)) or None,
        )

    @property
    def display_name(self) -> str:
        """The label of the name in tables and figures: its :attr:`title`, or the name when it has none."""
        return self.title or self.name

    @property
    def direction(self) -> str:
        if self.higher_is_better is None:
            return "none"
        return "maximize" if self.higher_is_better else "minimize"


def count_spec(name: str, protocol: str, description: str) -> MetricSpec:
    """A count the runner or a driver reports (scenes, episodes, tasks): no better direction, so a
    comparison never calls one "best"."""
    return MetricSpec(name, protocol, None, (0.0, math.inf), description=description)


@dataclass(frozen=True)
class NA:
    """A metric value that cannot be computed, with the reason (logged instead of a number)."""

    reason: str

    def __bool__(self) -> bool:  # an N/A is never mistaken for a truthy number
        return False


@dataclass(frozen=True)
class Series:
    """A per-step series (per batch, per task, per block, per horizon step)."""

    steps: np.ndarray
    values: np.ndarray

    def __post_init__(self):
        steps = np.asarray(self.steps, dtype=np.int64)
        values = np.asarray(self.values, dtype=np.float64)
        if steps.shape != values.shape or steps.ndim != 1:
            raise ValueError(
                f"Series steps and values must be 1-D of equal length, got {steps.shape} and {values.shape}"
            )
        object.__setattr__(self, "steps", steps)
        object.__setattr__(self, "values", values)


class KeyedDict(dict[MetricKey, V]):
    """A dict whose keys are :class:`MetricKey`: a plain name (``"top1"``) set as a key becomes ``MetricKey("top1")``
    (:meth:`MetricKey.of`; text in a qualified form such as ``"baseline.top1"`` is refused). Looking up by the
    reported name works as for any dict (a key equals its reported name)."""

    def __init__(self, items: Mapping[Any, V] | Iterable[tuple[Any, V]] = (), /, **more: V):
        super().__init__()
        self.update(items, **more)

    def __setitem__(self, key: str, value: V) -> None:
        super().__setitem__(MetricKey.of(key), value)

    # a lookup takes the reported name as well as the key
    def __getitem__(self, key: str) -> V:
        return super().__getitem__(key)  # type: ignore[index]

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)  # type: ignore[arg-type]

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key, default)  # type: ignore[call-overload]

    def pop(self, key: str, *default: Any) -> Any:
        return super().pop(key, *default)  # type: ignore[call-overload]

    def update(self, items: Any = (), /, **more: V) -> None:
        pairs = items.items() if isinstance(items, Mapping) else items
        for key, value in [*pairs, *more.items()]:
            self[key] = value

    def setdefault(self, key: str, default: Any = None) -> V:
        if key not in self:
            self[key] = default
        return self[key]

    def copy(self) -> KeyedDict[V]:
        return KeyedDict(self)

    def __ior__(self, other: Any) -> KeyedDict[V]:  # type: ignore[override,misc]
        self.update(other)
        return self


def _keyed(items: Mapping[Any, V] | None) -> KeyedDict[V]:
    return items if isinstance(items, KeyedDict) else KeyedDict(items or {})


@dataclass(init=False)
class MetricResults:
    """What a protocol's evaluation returns: scalar values, N/A reasons and per-step series, keyed by
    :class:`~owl_eval.metrics.keys.MetricKey` (a plain name set as a key becomes its key; a lookup by the
    reported name, ``results["top1"]``, ``results.values["baseline.top1"]``, finds the key).

    ``values`` holds only real numbers; every metric that could not be computed is in ``na`` with its
    reason, so nothing is silently dropped.
    """

    values: KeyedDict[float]
    na: KeyedDict[str]
    series: KeyedDict[Series]

    def __init__(
        self,
        values: Mapping[Any, float] | None = None,
        na: Mapping[Any, str] | None = None,
        series: Mapping[Any, Series] | None = None,
    ):
        self.values = _keyed(values)
        self.na = _keyed(na)
        self.series = _keyed(series)

    def set(self, name: MetricKey | str, value) -> None:
        """Store ``value`` (a number or :class:`NA`) under ``name``; NaN becomes N/A with a reason."""
        name = MetricKey.of(name)
        if isinstance(value, NA):
            self.na[name] = value.reason
            self.values.pop(name, None)
            return
        value = float(value)
        if math.isnan(value):
            self.na[name] = "the value is undefined (NaN) for these inputs"
            return
        self.values[name] = value
        self.na.pop(name, None)

    def update(self, other: MetricResults, *, agent: str = "") -> None:
        """Add ``other``'s values, N/A reasons and series; ``agent``: every key of ``other`` as that agent's
        (``agent="baseline"``: ``top1`` becomes ``MetricKey("top1", agent="baseline")``, reported ``baseline.top1``)."""

        def keyed(key: MetricKey) -> MetricKey:
            return key.with_fields(agent=agent) if agent else key

        for k, v in other.values.items():
            self.values[keyed(k)] = v
        for k, r in other.na.items():
            self.na[keyed(k)] = r
        for k, s in other.series.items():
            self.series[keyed(k)] = s

    def __getitem__(self, name: str):
        if name in self.values:
            return self.values[name]
        if name in self.na:
            return NA(self.na[name])
        raise KeyError(name)

    def __contains__(self, name: str) -> bool:
        return name in self.values or name in self.na
