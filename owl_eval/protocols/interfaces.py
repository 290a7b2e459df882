"""Checking that an agent, baseline or domain has what a protocol will call, before any run exists.

A protocol lists the methods it calls (:class:`Method`: the name and how it is called); an object that
lacks one, or whose method cannot be called that way, is one :class:`~owl_eval.errors.ConfigError` naming the
config key (``agent``, ``baseline``, ``domain``), the object's class, the missing call and the options to
choose from: an RL agent under OND is "agent (owl_eval.protocols.lifelong_rl.agents.q_learning.QLearningAgent) is not an OND agent: it
has no predict_batch(batch) method; choose agent=ond/<option> (...)". Without this check the mismatch
shows as an AttributeError in the middle of the run, which leaves a FAILED run behind.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass

from owl_eval.errors import ConfigError


@dataclass(frozen=True)
class Method:
    """A method the protocol calls: ``name``, as ``call`` (for the message), with ``args`` positional
    arguments and the keyword arguments ``keywords`` (checked against the method's signature)."""

    name: str
    call: str
    args: int = 0
    keywords: tuple[str, ...] = ()


def class_name(obj: object) -> str:
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def choices(group: str, prefix: str = "", extra: Sequence[str] = ()) -> str:
    """``group=<prefix>/<option> (a, b, ...)``: the config options of ``group`` under ``prefix``."""
    from owl_eval.paths import group_options

    found = [o for o in group_options(group) if not prefix or o.startswith(prefix + "/")]
    options = [*found, *extra]
    shown = f"{prefix}/<option>" if prefix else "<option>"
    return f"{group}={shown}" + (f" ({', '.join(options)})" if options else "")


def require_interface(obj: object, methods: Sequence[Method], *, role: str, kind: str, choose: str) -> None:
    """``obj`` (the ``role`` config node: agent, baseline, domain) has every method, callable as listed.

    ``kind`` names what the protocol needs ("an OND agent"); ``choose`` is the hint (see :func:`choices`)."""
    for method in methods:
        bound = getattr(obj, method.name, None)
        if not callable(bound):
            raise ConfigError(
                f"{role} ({class_name(obj)}) is not {kind}: it has no {method.call} method; choose {choose}"
            )
        try:
            signature = inspect.signature(bound)
        except (TypeError, ValueError):  # a builtin or a C extension: nothing to check against
            continue
        try:
            signature.bind(*([None] * method.args), **{k: None for k in method.keywords})
        except TypeError as exc:
            raise ConfigError(
                f"{role} ({class_name(obj)}) is not {kind}: its {method.name}({plain(signature)}) cannot "
                f"be called as {method.call} ({exc}); choose {choose}"
            ) from None


def plain(signature: inspect.Signature) -> str:
    """The parameters of ``signature`` by name only (annotations and defaults left out): ``a, b, *, rng``."""
    out, star = [], False
    for p in signature.parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            out.append(f"*{p.name}")
            star = True
        elif p.kind is p.VAR_KEYWORD:
            out.append(f"**{p.name}")
        else:
            if p.kind is p.KEYWORD_ONLY and not star:
                out.append("*")
                star = True
            out.append(p.name)
    return ", ".join(out)


def require_attributes(obj: object, names: Sequence[str], *, role: str, kind: str, choose: str) -> None:
    """``obj`` has every attribute of ``names`` (e.g. a continual domain's ``num_classes``)."""
    for name in names:
        if not hasattr(obj, name):
            raise ConfigError(
                f"{role} ({class_name(obj)}) is not {kind}: it has no {name!r} attribute; choose {choose}"
            )


def no_baseline(baseline: object, protocol: str) -> None:
    """Protocols that run no baseline agent reject one (it would be built and silently ignored)."""
    if baseline is not None:
        raise ConfigError(
            f"baseline ({class_name(baseline)}): the {protocol} protocol runs no baseline agent; choose baseline=none"
        )
