"""A metric is declared where it is computed: one decorator on the pure function, one set per protocol.

A protocol keeps its metrics in a :class:`MetricSet`. ``@SET.metric(name, ...)`` on a pure function registers
the function with its declaration: the reported name and what it means (a
:class:`~owl_eval.metrics.results.MetricSpec`: better direction, bounds, description, ``series``), the inputs
the function reads (``needs``: its keyword arguments, e.g. the accuracy matrix ``A``) and when it is N/A (a
needed input that is missing, or an :class:`NAIf` rule, each with the reason). The protocol's scoring
computes every registered metric (:meth:`MetricSet.compute`), and the metric module exposes
``SPECS = SET.specs``, which :mod:`owl_eval.evaluation.registry` reads. Adding a metric is therefore one
decorated function in one of the protocol's metric modules::

    @CONTINUAL.metric("learning_accuracy", higher_is_better=True, bounds=(0.0, 1.0), needs=("A",),
                      description="accuracy on each task right after learning it, mean over tasks 0..t")
    def _learning_accuracy_series(A):
        return np.cumsum(np.diag(A)) / np.arange(1, A.shape[0] + 1)

Names computed together (the rates of one confusion table, a top-k table) are one function decorated with
``@SET.family(SET.spec(...), SET.spec(...), ...)`` returning ``{name: value}``: every name's declaration
is still in the decorator, on top of the code that computes it.

Order: metrics are computed, and declared in ``SPECS``, module by module in the set's ``order`` (modules it
does not list come last), and in each module in the order of their decorators, so the order of reported names
does not depend on which module happens to be imported first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar, overload

from owl_eval.metrics.results import NA, MetricSpec

__all__ = ["NAIf", "Declared", "MetricSet", "SpecView"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class NAIf:
    """An N/A rule: when ``when(**inputs)`` is true the metric is not computed and is :class:`NA` with ``reason``.

    ``when`` receives the inputs the metric ``needs``, by keyword (write it as ``lambda options, **_: ...``).
    ``names``: the names this rule makes N/A, when not every name the metric reports under the rule
    (:attr:`Declared.na_names`) should be.
    """

    reason: str
    when: Callable[..., bool]
    names: tuple[str, ...] | None = None


@dataclass(frozen=True, eq=False)
class Declared:
    """One registered metric function: the declarations of the names it reports and how it is computed.

    ``fn(**{k: inputs[k] for k in needs})`` returns the value of a single metric (a number, :class:`NA`, or
    whatever the protocol's scoring stores, e.g. a per-step array), or ``{name: value}`` for a ``family``.
    ``na_names(**inputs)``: the names that are N/A when a needed input is missing or a rule holds (default: every
    declared name that is not a series). ``tags`` and ``extra`` carry what one protocol's scoring needs to know
    (OND: ``"threshold_grid"``; trajectory: the chunk ``finalize`` function).
    """

    fn: Callable[..., Any]
    specs: tuple[MetricSpec, ...]
    needs: tuple[str, ...] = ()
    na: tuple[NAIf, ...] = ()
    na_names: Callable[..., Sequence[str]] | None = None
    family: bool = False
    tags: frozenset[str] = frozenset()
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def spec(self) -> MetricSpec:
        """The declaration of a single metric (a family has several: :attr:`specs`)."""
        if self.family:
            raise TypeError(f"{self.fn.__qualname__} declares a family of {len(self.specs)} names; read .specs")
        return self.specs[0]

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def module(self) -> str:
        return getattr(self.fn, "__module__", "") or ""

    def arguments(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """The inputs this metric reads, by keyword; a name the scoring does not provide is an error."""
        unknown = [k for k in self.needs if k not in inputs]
        if unknown:
            raise ValueError(
                f"metric {self.specs[0].name!r} ({self.fn.__qualname__}) needs {unknown}; "
                f"the scoring provides {sorted(inputs)}"
            )
        return {k: inputs[k] for k in self.needs}

    def names_when_na(self, arguments: Mapping[str, Any]) -> tuple[str, ...]:
        if self.na_names is not None:
            return tuple(self.na_names(**arguments))
        return tuple(s.name for s in self.specs if not s.series)

    def __call__(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        value = self.fn(**arguments)
        return dict(value) if self.family else {self.specs[0].name: value}


class MetricSet:
    """The registered metrics of one protocol (see the module docstring).

    ``missing``: the reason a metric is N/A when an input it ``needs`` is None (``{"b": "init_accuracy ... was
    not given"}``); ``order``: the metric modules in the order their metrics are reported; ``derived``: the
    declarations of names made from the registered ones (OND: each threshold-grid metric at every threshold),
    listed in ``SPECS`` after them.
    """

    def __init__(
        self,
        protocol: str,
        *,
        missing: Mapping[str, str] | None = None,
        order: Sequence[str] = (),
        derived: Callable[[Iterable[Declared]], Iterable[MetricSpec]] | None = None,
    ):
        self.protocol = protocol
        self.missing = dict(missing or {})
        self.order = tuple(order)
        self.derived = derived
        # Registration order; the one mutable state: ``SPECS`` and iteration are read from it every time, so a
        # registration (or a test removing one) is seen everywhere at once.
        self.entries: list[Declared] = []
        self.specs = SpecView(self)

    # -- declaring ----------------------------------------------------------------------------------------------

    def spec(
        self,
        name: str,
        higher_is_better: bool | None,
        bounds: tuple[float, float] = (-math.inf, math.inf),
        *,
        description: str = "",
        title: str = "",
        latex: str | None = None,
        log_scale: bool = False,
        combine: str = "none",
        series: bool = False,
    ) -> MetricSpec:
        """The declaration of one name of this protocol (for :meth:`family`); ``title``: its short table label."""
        return MetricSpec(
            name=name,
            protocol=self.protocol,
            higher_is_better=higher_is_better,
            bounds=bounds,
            log_scale=log_scale,
            description=description,
            title=title,
            latex=latex,
            combine=combine,
            series=series,
        )

    def metric(
        self,
        name: str,
        *,
        higher_is_better: bool | None,
        bounds: tuple[float, float] = (-math.inf, math.inf),
        description: str = "",
        title: str = "",
        latex: str | None = None,
        log_scale: bool = False,
        combine: str = "none",
        series: bool = False,
        needs: Sequence[str] = (),
        na: Sequence[NAIf] = (),
        tags: Iterable[str] = (),
        **extra: Any,
    ) -> Callable[[F], F]:
        """Decorator: register ``fn(**needed inputs) -> value`` as the metric ``name`` (returned unchanged).

        ``higher_is_better``: True, False or None (counts, diagnostics: never called "best"); ``bounds``: the
        value's range; ``title``: a short label for tables (:attr:`MetricSpec.title`); ``series``: the name holds
        one value per step; ``needs``: the inputs ``fn`` reads, by keyword (a None input makes the metric N/A with
        the set's ``missing`` reason); ``na``: rules making it N/A (:class:`NAIf`), checked in order after the inputs.
        """
        declaration = self.spec(
            name,
            higher_is_better,
            bounds,
            description=description,
            title=title,
            latex=latex,
            log_scale=log_scale,
            combine=combine,
            series=series,
        )

        def register(fn: F) -> F:
            self.add(Declared(fn, (declaration,), tuple(needs), tuple(na), None, False, frozenset(tags), extra))
            return fn

        return register

    def family(
        self,
        *specs: MetricSpec,
        needs: Sequence[str] = (),
        na: Sequence[NAIf] = (),
        na_names: Callable[..., Sequence[str]] | None = None,
        tags: Iterable[str] = (),
        **extra: Any,
    ) -> Callable[[F], F]:
        """Decorator: register ``fn(**needed inputs) -> {name: value}`` as the metrics ``specs`` declare
        (made with :meth:`spec`); ``na_names(**needed inputs)``: the names that are N/A when an input is
        missing or a rule holds (default: every declared name that is not a series)."""

        def register(fn: F) -> F:
            self.add(Declared(fn, tuple(specs), tuple(needs), tuple(na), na_names, True, frozenset(tags), extra))
            return fn

        return register

    def add(self, entry: Declared) -> Declared:
        """Register ``entry``; a name declared twice in one protocol is an error."""
        if not entry.specs:
            raise ValueError(f"{entry.fn.__qualname__}: a metric declares at least one name")
        for spec in entry.specs:
            if spec.protocol != self.protocol:
                raise ValueError(f"{spec.name!r} is declared for {spec.protocol!r}, not {self.protocol!r}")
        taken = {s.name for e in self.entries for s in e.specs}
        twice = [s.name for s in entry.specs if s.name in taken]
        if twice:
            raise ValueError(f"protocol {self.protocol!r} already declares {twice} ({entry.fn.__qualname__})")
        self.entries.append(entry)
        return entry

    def remove(self, fn: Callable[..., Any]) -> None:
        """Unregister the metric(s) ``fn`` was registered as."""
        self.entries[:] = [e for e in self.entries if e.fn is not fn]

    @contextmanager
    def scoped(self) -> Iterator[MetricSet]:
        """Registrations made inside the ``with`` block are removed when it ends (tests, notebooks)."""
        saved = list(self.entries)
        try:
            yield self
        finally:
            self.entries[:] = saved

    # -- reading ------------------------------------------------------------------------------------------------

    def __iter__(self) -> Iterator[Declared]:
        rank = {module: i for i, module in enumerate(self.order)}
        positions = sorted(range(len(self.entries)), key=lambda i: (rank.get(self.entries[i].module, len(rank)), i))
        return iter([self.entries[i] for i in positions])

    def __len__(self) -> int:
        return len(self.entries)

    def tagged(self, tag: str) -> list[Declared]:
        return [e for e in self if tag in e.tags]

    def na_rule(self, entry: Declared, arguments: Mapping[str, Any]) -> NAIf | None:
        """The rule that makes ``entry`` N/A before it is computed (a missing input first, then its own rules in
        order), or None."""
        for name in entry.needs:
            if arguments[name] is None:
                return NAIf(self.missing.get(name, f"{name} was not given"), _always)
        return next((rule for rule in entry.na if rule.when(**arguments)), None)

    def evaluate(self, entry: Declared, inputs: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
        """``({name: value}, None)`` computed by ``entry``, or ``({name: NA(reason)}, reason)`` when it is N/A
        by a declared rule (a missing input or an :class:`NAIf`) and so was not computed."""
        arguments = entry.arguments(inputs)
        rule = self.na_rule(entry, arguments)
        if rule is None:
            return entry(arguments), None
        names = rule.names if rule.names is not None else entry.names_when_na(arguments)
        return {name: NA(rule.reason) for name in names}, rule.reason

    def compute(
        self, inputs: Mapping[str, Any], *, where: Callable[[Declared], bool] | None = None
    ) -> Iterator[tuple[Declared, dict[str, Any], str | None]]:
        """Every registered metric (those ``where`` keeps) on ``inputs``, in order: ``(entry, {name: value},
        reason)`` with ``reason`` the N/A rule that held, or None when the values were computed."""
        for entry in self:
            if where is None or where(entry):
                values, reason = self.evaluate(entry, inputs)
                yield entry, values, reason


def _always(**_: Any) -> bool:
    return True


class SpecView(Sequence[MetricSpec]):
    """Every declaration of a :class:`MetricSet`, always current: a metric module's ``SPECS``."""

    def __init__(self, metrics: MetricSet):
        self._metrics = metrics

    def _current(self) -> list[MetricSpec]:
        out = [spec for entry in self._metrics for spec in entry.specs]
        if self._metrics.derived is not None:
            out += self._metrics.derived(self._metrics)
        return out

    def __iter__(self) -> Iterator[MetricSpec]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())

    @overload
    def __getitem__(self, index: int) -> MetricSpec: ...
    @overload
    def __getitem__(self, index: slice) -> list[MetricSpec]: ...
    def __getitem__(self, index: int | slice) -> MetricSpec | list[MetricSpec]:
        return self._current()[index]

    def __repr__(self) -> str:
        return f"SpecView({self._metrics.protocol!r}, {len(self)} names)"
