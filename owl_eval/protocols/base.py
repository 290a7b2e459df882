"""What every protocol's driver provides to the runner (the descriptor, :mod:`owl_eval.protocols.descriptor`,
names the driver class).

A driver is built from config (``_target_``), then the runner calls, in order:
``check(domain=..., agent=..., baseline=...)`` and ``check_models(...)`` before any run exists, then ``run(domain=..., agent=...,
baseline=..., rng=...)`` -> a record (plain numpy arrays in a small dataclass with its own ``save(directory)``).
Scoring the record is not the driver's job: the evaluation the protocol's descriptor names does it
(:func:`owl_eval.evaluation.evaluation_for`). If ``run`` raises (a crashing agent), the record of
what was completed travels on the exception (:func:`keep_partial`, :func:`partial_record`) and the runner logs its
metrics before marking the MLflow run FAILED. A driver holds no state between calls.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Record(Protocol):
    """What every protocol's record is to the shared code: it saves itself (plain arrays, ``.npz``/TSV, never a
    pickle) into a folder, returning the file or folder written; that is the run's ``record`` artifact."""

    def save(self, directory: str | Path) -> Path: ...


PARTIAL_ATTRIBUTE = "owl_eval_partial_record"


def partial_record(exc: BaseException) -> Any | None:
    """The record of the completed part of a ``run`` that raised ``exc`` (see :func:`keep_partial`), or None."""
    return getattr(exc, PARTIAL_ATTRIBUTE, None)


# Where the record so far goes after each completed unit (set in the job's process by the runner: saved to the
# job's scratch folder, so that a job whose process is killed keeps what was completed); None: nowhere.
_progress_sink: Callable[[Callable[[], Any | None]], None] | None = None


def set_progress_sink(sink: Callable[[Callable[[], Any | None]], None] | None) -> None:
    """Send the record so far to ``sink(completed)`` after each unit a driver completes (None: to nowhere)."""
    global _progress_sink
    _progress_sink = sink


@dataclass(frozen=True)
class RecordOnDisk:
    """A record so far that a driver keeps on disk itself (lifelong RL's l2logger log, flushed per episode): what
    the progress sink saves is this small recipe, and ``load()`` (picklable) reads the record back, or None."""

    load: Callable[[], Any | None]


@contextmanager
def keep_partial(completed: Callable[[], Any | None]) -> Iterator[Callable[[], None]]:
    """Around the part of a driver's ``run`` that calls agents: when it raises (a crashing agent, Ctrl-C,
    SIGTERM), ``completed()`` (the record of what was completed, or None) travels on the exception, so the
    runner can log its metrics before the run ends. A driver keeps no state between calls.

    It yields ``unit_done``: the driver calls it after each completed unit (an OND trial, a continual task, a
    trajectory batch), which hands ``completed`` to the progress sink: a job whose process is killed (a hung
    agent past ``agent_timeout``, ``kill -9``) keeps the units completed before (:func:`set_progress_sink`)."""

    def unit_done() -> None:
        if _progress_sink is not None:
            _progress_sink(completed)

    try:
        yield unit_done
    except BaseException as exc:
        if partial_record(exc) is None:
            try:
                part = completed()
            except Exception:  # building the partial record must never hide the agent's own error
                part = None
            if part is not None:
                try:
                    setattr(exc, PARTIAL_ATTRIBUTE, part)
                except (AttributeError, TypeError):  # an exception type without attributes: nothing to carry
                    pass
        raise


def report_on_disk(record: RecordOnDisk) -> None:
    """For a driver whose record so far is on disk already (written as it goes): hands the progress sink the
    recipe that reads it back, once."""
    if _progress_sink is not None:
        _progress_sink(lambda: record)


class AgentOutputError(ValueError):
    """An agent returned something the protocol cannot accept; the message names where and what."""


# What a dtype kind holds, for the message that refuses it (numbers are kinds b, i, u, f).
REFUSED_KINDS = {
    "U": "strings",
    "S": "bytes",
    "O": "Python objects",
    "c": "complex numbers",
    "M": "datetimes",
    "m": "timedeltas",
    "V": "raw records",
}


def real_array(value: Any, what: str, *, where: str) -> np.ndarray:
    """``value`` (an agent's output: an array, a list, a tensor) as a numpy array of real numbers (bool, int or
    float dtype, unchanged). Refused with one :class:`AgentOutputError` naming ``where``, ``what`` and the dtype:
    a masked array (``numpy.ma``: its mask would be dropped silently), strings or bytes (``"0.5"`` would be
    parsed), Python objects, complex numbers (the imaginary part would be dropped), datetimes, ragged lists."""
    if isinstance(value, np.ma.MaskedArray):
        raise AgentOutputError(
            f"{where}: {what} is a masked array (numpy.ma.MaskedArray); return a plain array of real numbers "
            "(its mask would be ignored)"
        )
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as exc:  # ragged nesting, an object numpy cannot read
        raise AgentOutputError(f"{where}: {what} is not an array of real numbers ({exc})") from None
    kind = arr.dtype.kind
    if kind not in "biuf":
        raise AgentOutputError(
            f"{where}: {what} has dtype {arr.dtype} ({REFUSED_KINDS.get(kind, 'not numbers')}), expected real "
            "numbers (bool, int or float)"
        )
    return arr


class ProtocolDriver(ABC):
    #: the protocol's name (its descriptor's ``name``), used in tags and metric declarations
    name: str = ""

    @abstractmethod
    def run(
        self, *, domain: Any, agent: Any, rng: np.random.Generator, baseline: Any = None, progress: bool = True
    ) -> Any:
        """Drive the agent (and the baseline, if the protocol uses one) and return the record."""

    def check(self, *, domain: Any, agent: Any, baseline: Any = None) -> None:  # noqa: B027 (optional hook)
        """Everything that can be checked before a run exists: the agent's (and baseline's) interface, the
        domain's data (paths, sizes) against the protocol's settings. Raises a ``ValueError`` naming the key."""

    def check_models(self, *, domain: Any, agent: Any, baseline: Any = None) -> None:
        """After :meth:`check`, still before a run exists: each agent with a ``check_model(*, driver, domain,
        role)`` method probes its own model against what this protocol and domain need (a torch module's output
        width on a batch of zeros of the domain's input shape); its ``ConfigError`` names ``role``'s key
        (``agent.module``, ``baseline.module``). An agent without the method has nothing to probe."""
        for role, who in (("agent", agent), ("baseline", baseline)):
            probe = getattr(who, "check_model", None) if who is not None else None
            if callable(probe):
                probe(driver=self, domain=domain, role=role)

    def evaluation_context(self) -> dict[str, Any]:
        """What the protocol knows about its data before the run, for checking the metric settings
        (``num_preds``, ``class_names``, ``columns``) and drawing the figures (``plot_scenes``)."""
        return {}

    def tags(self) -> dict[str, str]:
        """Protocol-specific run tags (e.g. the OND condition)."""
        return {}

    def record_tags(self, record: Any) -> dict[str, str]:
        """Tags the finished ``record`` tells, set after the run over :meth:`tags` (what actually happened,
        e.g. which references were reused rather than what the store predicted)."""
        return {}
