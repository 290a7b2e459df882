"""What the adapter agents share: a user's object named in YAML (a scikit-learn estimator, a function, a policy)
checked for the methods the adapter will call, copied fresh and seeded from the agent's generator.

The adapters (``agent=ond/sklearn``, ``continual/sklearn``, ``trajectory/callable``, ``lifelong_rl/policy``) take
the user's object as a nested config node (``classifier: {_target_: sklearn.linear_model.LogisticRegression}``),
which Hydra builds before the adapter; a function is named with ``_partial_: true`` (or as a dotted-path
string). Every check here is one :class:`~owl_eval.errors.ConfigError` naming the agent's key, the object and the
missing method, before any run exists.
"""

from __future__ import annotations

import copy
import importlib
import inspect
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from owl_eval.errors import ConfigError

SEED_HIGH = 2**31 - 1  # scikit-learn's random_state must fit in 32 bits


def describe(obj: Any) -> str:
    """``module.Name`` of a class, function or functools.partial; else the object's class."""
    target = getattr(obj, "func", obj)  # functools.partial (Hydra's _partial_: true)
    if inspect.isfunction(target) or inspect.isclass(target) or inspect.isbuiltin(target):
        return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', repr(target))}"
    return f"{type(obj).__module__}.{type(obj).__qualname__}"


def resolve(value: Any, key: str) -> Any:
    """A dotted-path string (``my_module.my_function``) as the object it names (a class: an instance built with
    no arguments); anything else as it is."""
    if not (isinstance(value, str) and "." in value and " " not in value):
        return value
    found = _import(value, key)
    if inspect.isclass(found):
        try:
            return found()
        except Exception as exc:
            raise ConfigError(
                f"{key}: cannot build {value}() without arguments ({exc}); use a node with _target_"
            ) from None
    return found


def _import(path: str, key: str) -> Any:
    """The object at ``package.module.attribute[.attribute...]``: the longest importable module, then attributes."""
    parts = path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError as exc:
            if cut == 1:
                raise ConfigError(f"{key}: cannot import {path!r} ({exc})") from None
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                raise ConfigError(f"{key}: cannot import {path!r} ({'.'.join(parts[:cut])} has no {name!r})")
            obj = getattr(obj, name)
        return obj
    raise ConfigError(f"{key}: cannot import {path!r}")


def has_method(obj: Any, name: str) -> bool:
    """``obj.name`` exists and is callable (scikit-learn's ``available_if`` methods, such as a Pipeline's
    ``predict_proba``, raise AttributeError when the last step lacks them: they count as missing)."""
    try:
        return callable(getattr(obj, name))
    except AttributeError:
        return False


def require_methods(obj: Any, key: str, names: Sequence[str], *, need: str, hint: str = "") -> None:
    """``obj`` (the config node ``key``) has every method of ``names``; else one error naming the first missing."""
    for name in names:
        if not has_method(obj, name):
            raise ConfigError(
                f"{key} ({describe(obj)}) has no {name}() method; {need}" + (f" ({hint})" if hint else "")
            )


def first_method(obj: Any, key: str, names: Sequence[str], *, need: str) -> str:
    """The first of ``names`` that ``obj`` has (e.g. ``score_samples``, else ``decision_function``)."""
    for name in names:
        if has_method(obj, name):
            return name
    shown = " or ".join(f"{n}()" for n in names)
    raise ConfigError(f"{key} ({describe(obj)}) has no {shown} method; {need}")


def keywords(func: Callable, names: Iterable[str]) -> set[str]:
    """Which of ``names`` ``func`` takes as keyword arguments (all of them when it takes ``**kwargs``; none when
    its signature cannot be read)."""
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return set()
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return set(names)
    usable = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return {n for n in names if n in params and params[n].kind in usable}


def require_call(func: Callable, key: str, call: str, args: int, given: Iterable[str] = ()) -> None:
    """``func`` can be called with ``args`` positional arguments and the keywords ``given`` (the message shows
    ``call``)."""
    try:
        signature = inspect.signature(func)
    except (TypeError, ValueError):  # a builtin or an extension type: nothing to check against
        return
    try:
        signature.bind(*([None] * args), **{k: None for k in given})
    except TypeError as exc:
        raise ConfigError(f"{key} ({describe(func)}) cannot be called as {call} ({exc})") from None


def fresh(estimator: Any) -> Any:
    """An unfitted copy: scikit-learn's ``clone`` (same parameters, no fitted state) for estimators, a deep
    copy of anything else."""
    if has_method(estimator, "get_params"):
        from sklearn.base import clone

        try:
            return clone(estimator)
        except (TypeError, RuntimeError):  # get_params without scikit-learn's contract
            pass
    return copy.deepcopy(estimator)


def seed_estimator(estimator: Any, rng: np.random.Generator) -> Any:
    """Every ``random_state`` parameter left at None (a Pipeline's steps included) set to a seed drawn from
    ``rng``, so the run's seed decides the estimator's randomness; a value the user set is kept. One seed is
    drawn whether or not one is used, so what follows in ``rng`` does not depend on the estimator."""
    seed = int(rng.integers(SEED_HIGH))
    if not has_method(estimator, "get_params") or not has_method(estimator, "set_params"):
        return estimator
    try:
        params = estimator.get_params(deep=True)
    except TypeError:
        return estimator
    unset = sorted(k for k, v in params.items() if (k == "random_state" or k.endswith("__random_state")) and v is None)
    if unset:
        estimator.set_params(**{k: seed for k in unset})
    return estimator
