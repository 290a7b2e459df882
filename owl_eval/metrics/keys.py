"""A reported metric name as a value: :class:`MetricKey`, the declared name plus what qualifies it.

A protocol reports more names than it declares: the baseline agent's value of a metric, the metric at one
detection threshold, a series of it over batches, over thresholds or over tasks, its value on one task, a
template's value for one K, the seconds a phase of the job took. Each is a :class:`MetricKey` made from
fields, never from a string::

    MetricKey("top1")                                   top1
    MetricKey("top1", agent="baseline")                 baseline.top1
    MetricKey("m2_cdt_pct", threshold=0.3)              m2_cdt_pct@0.3
    MetricKey("top1", axis="batch")                     top1_batch
    MetricKey("m2_cdt_pct", axis="threshold")           m2_cdt_pct_vs_threshold
    MetricKey("forgetting", axis="task")                by_task/forgetting
    MetricKey("accuracy", task="3")                     task/3/accuracy
    MetricKey("min_ade_{k}_marginal", k=5)              min_ade_5_marginal
    MetricKey("total_s", timing=True)                   time/total_s

Design: a ``MetricKey`` is a ``str`` whose text is the name as reported (the right column above, exactly the
names printed, written to ``metrics_na.json`` and logged), carrying read-only fields. So a key hashes and
compares equal to its rendered name, and every lookup by the plain reported name keeps working without parsing
(``results["top1"]``, ``results.values["min_ade_20_marginal"]``); dictionaries of keys serialise to JSON as
dictionaries of names do; printed lists show the same text (``repr`` is ``str``'s). The text is made from the
fields, once, in the constructor; nothing builds a key from a string other than a plain name
(:meth:`MetricKey.of`, which refuses text in one of the qualified forms above), so nothing reads fields back
out of text. Code that needs a field reads the field (``key.agent``, ``key.threshold``), never the text.
A string operation on a key (``key + "_x"``) gives a plain ``str``, no key: make a new key with
:meth:`MetricKey.with_fields` instead. Two keys whose fields render alike (``MetricKey("a_batch")`` and
``MetricKey("a", axis="batch")``) are one name (the text is the name); protocols make only the second.

Why a ``str`` subclass rather than a frozen dataclass: a dataclass would need the same equality and hash with its
text to keep lookups by name, plus its own JSON, sorting and printing, and every consumer that only passes names
along (figures, ``metrics_na.json``, logs, the ~144 lookups of the tests) would change; as a ``str`` they need no
change, and the fields are what the code that needs them (tracking, the registry, selection, thresholds) reads.

The MLflow key of a metric key is made in one place, ``owl_eval.tracking.keys.mlflow_key``.
"""

from __future__ import annotations

import math
from typing import Any, NoReturn

__all__ = ["AXES", "QUALIFIERS", "MetricKey", "rendered_around"]

#: the series axes a key can add to a declared scalar: per mini-batch (``_batch``), per detection threshold
#: (``_vs_threshold``), per task of a sequence (``by_task/``)
AXES = ("batch", "threshold", "task")
AGENTS = ("", "baseline")
#: the qualifiers a protocol's descriptor says its keys give a declared name (``Protocol.key_qualifiers``): the
#: fields each sets; ``task`` is open (any task's name)
QUALIFIERS: dict[str, dict[str, Any]] = {
    "baseline": {"agent": "baseline"},
    "task": {"task": None},
    "batch": {"axis": "batch"},
    "vs_threshold": {"axis": "threshold"},
    "by_task": {"axis": "task"},
}
# text a plain name (MetricKey.of) may not be: the qualified forms, which only fields make
_QUALIFIED_PREFIXES = ("baseline.", "time/", "task/", "by_task/")
_FIELDS = ("name", "agent", "task", "k", "threshold", "axis", "timing")


def _render(
    name: str, agent: str, task: str | None, k: str | None, threshold: float | None, axis: str | None, timing: bool
) -> str:
    """The reported name of the fields (``k`` already as text)."""
    if timing:
        return "time/" + name
    text = name.replace("{k}", k) if k is not None else name
    if axis == "batch":
        text += "_batch"
    elif axis == "threshold":
        text += "_vs_threshold"
    elif axis == "task":
        text = "by_task/" + text
    if task is not None:
        text = f"task/{task}/{text}"
    if threshold is not None:
        text += f"@{threshold:g}"
    if agent:
        text = f"{agent}.{text}"
    return text


_GAP = "\x00"


def rendered_around(open_field: str, name: str, **fields: Any) -> tuple[str, str]:
    """The reported name of a key with one open field left as a gap, as (the text before, the text after): what a
    name written by a user (``metrics.names``) is compared with when that field can be anything.
    ``open_field``: ``"task"`` (a per-task key), ``"k"`` (a template's K) or ``"name"`` (a timing's phase)."""
    values = {"agent": "", "task": None, "k": None, "threshold": None, "axis": None, "timing": False} | fields
    if open_field == "name":
        name = _GAP
    elif open_field in ("task", "k"):
        values[open_field] = _GAP
    else:
        raise ValueError(f"rendered_around: the open field is task, k or name, got {open_field!r}")
    if values["k"] is not None and values["k"] != _GAP:
        values["k"] = str(int(values["k"]))
    before, _, after = _render(name, **values).partition(_GAP)
    return before, after


def _restore(*fields: Any) -> MetricKey:
    return MetricKey(*fields[:1], **dict(zip(_FIELDS[1:], fields[1:])))


class MetricKey(str):
    """One reported metric name: ``name`` (as declared; a template holding ``{k}`` when ``k`` is given) and
    its qualifiers. Equal to, and hashed as, its reported name (see the module docstring).

    - ``agent``: ``""`` (the evaluated agent) or ``"baseline"`` (the OND baseline agent's own value);
    - ``task``: the task a per-task value is of (continual ``task/<i>/accuracy``, lifelong-RL ``task/<task>/...``);
    - ``k``: the K of a template's name (``min_ade_{k}_marginal`` with ``k=5``);
    - ``threshold``: the detection threshold of one point of a threshold sweep;
    - ``axis``: the series axis the key adds to a declared scalar (:data:`AXES`), None for a scalar or for a
      name declared as a series itself;
    - ``timing``: ``name`` is a phase of the job, its value seconds (``time/<name>``).
    """

    __slots__ = ("_name", "_agent", "_task", "_k", "_threshold", "_axis", "_timing")
    _name: str
    _agent: str
    _task: str | None
    _k: int | None
    _threshold: float | None
    _axis: str | None
    _timing: bool

    def __new__(
        cls,
        name: str,
        *,
        agent: str = "",
        task: str | int | None = None,
        k: int | None = None,
        threshold: float | None = None,
        axis: str | None = None,
        timing: bool = False,
    ) -> MetricKey:
        if not isinstance(name, str) or not name:
            raise ValueError(f"MetricKey: the name must be a non-empty string, got {name!r}")
        name = str(name)  # a MetricKey given as a name is its text
        if "@" in name:
            raise ValueError(f"MetricKey({name!r}): '@' marks a threshold; give threshold= instead")
        if agent not in AGENTS:
            raise ValueError(f"MetricKey({name!r}): agent must be one of {AGENTS}, got {agent!r}")
        if axis is not None and axis not in AXES:
            raise ValueError(f"MetricKey({name!r}): axis must be one of {AXES} or None, got {axis!r}")
        if isinstance(task, bool) or (task is not None and not isinstance(task, (str, int))):
            raise ValueError(f"MetricKey({name!r}): task must be a string or an int, got {task!r}")
        task = None if task is None else str(task)
        if task is not None and (not task or "/" in task):
            raise ValueError(f"MetricKey({name!r}): a task is a non-empty name without '/', got {task!r}")
        if (k is not None) != ("{k}" in name):
            raise ValueError(f"MetricKey({name!r}): k is given exactly when the name is a template holding {{k}}")
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise ValueError(f"MetricKey({name!r}): k must be a positive int, got {k!r}")
        if threshold is not None:
            if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not math.isfinite(threshold):
                raise ValueError(f"MetricKey({name!r}): threshold must be a finite number, got {threshold!r}")
            threshold = float(threshold)
            if axis == "threshold":
                raise ValueError(f"MetricKey({name!r}): a point of a threshold sweep is not the sweep's series")
        if timing and (agent or task is not None or k is not None or threshold is not None or axis is not None):
            raise ValueError(f"MetricKey({name!r}): a timing has no other qualifier")
        text = _render(name, agent, task, None if k is None else str(int(k)), threshold, axis, bool(timing))
        self = super().__new__(cls, text)
        for field, value in zip(
            _FIELDS, (name, agent, task, None if k is None else int(k), threshold, axis, bool(timing))
        ):
            object.__setattr__(self, "_" + field, value)
        return self

    @classmethod
    def of(cls, name: str) -> MetricKey:
        """``name`` as a key: a key as it is, a plain string as the plain name it is (``"top1"``, ``"ste/reused"``).
        Text in a qualified form (``baseline.top1``, ``m2@0.3``, ``task/3/accuracy``, ``by_task/x``, ``time/x``)
        is refused: only fields make those (``MetricKey("top1", agent="baseline")``)."""
        if isinstance(name, MetricKey):
            return name
        if not isinstance(name, str):
            raise TypeError(f"a metric name is a MetricKey or a plain name (str), got {type(name).__name__} {name!r}")
        if "@" in name or name.startswith(_QUALIFIED_PREFIXES):
            raise ValueError(
                f"metric name {name!r} is in a qualified form: make it a MetricKey from fields "
                "(agent=, task=, threshold=, axis=, timing=) instead of formatting the text"
            )
        return cls(name)

    # -- the fields, read-only ----------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._name

    @property
    def agent(self) -> str:
        return self._agent

    @property
    def task(self) -> str | None:
        return self._task

    @property
    def k(self) -> int | None:
        return self._k

    @property
    def threshold(self) -> float | None:
        return self._threshold

    @property
    def axis(self) -> str | None:
        return self._axis

    @property
    def timing(self) -> bool:
        return self._timing

    @property
    def plain(self) -> bool:
        """No qualifier but possibly a template's K: the declared metric itself (what a headline lists)."""
        return not (self._agent or self._task is not None or self._threshold is not None or self._axis or self._timing)

    def fields(self) -> dict[str, Any]:
        """Every field by name (JSON-ready; :meth:`from_fields` makes the key again)."""
        return {field: getattr(self, "_" + field) for field in _FIELDS}

    @classmethod
    def from_fields(cls, fields: dict[str, Any]) -> MetricKey:
        """The key of :meth:`fields` (e.g. read from a run's ``metric_keys.json``)."""
        unknown = set(fields) - set(_FIELDS)
        if unknown:
            raise ValueError(f"MetricKey fields: unknown {sorted(unknown)}")
        return cls(fields["name"], **{f: fields[f] for f in _FIELDS[1:] if f in fields})

    def with_fields(self, **changes: Any) -> MetricKey:
        """This key with some fields changed (``key.with_fields(agent="baseline")``)."""
        return MetricKey.from_fields(self.fields() | changes)

    # -- immutable, and pickled by fields --------------------------------------------------------------------
    def __setattr__(self, attribute: str, value: Any) -> NoReturn:
        raise AttributeError(f"MetricKey is read-only (setting {attribute!r})")

    def __delattr__(self, attribute: str) -> NoReturn:
        raise AttributeError(f"MetricKey is read-only (deleting {attribute!r})")

    def __reduce__(self):  # str's pickles the text alone; a key is rebuilt from its fields
        return _restore, tuple(getattr(self, "_" + field) for field in _FIELDS)
