"""Building domain, protocol and agents from config nodes, with errors that name the config key.

Before a node is instantiated, every nested node with a ``_target_`` is checked against what its target accepts
(:func:`check_node`): a key the target's signature lacks (``protocol.num_trails``, ``agent.classifier.n_estimatorz``)
is one :func:`owl_eval.typed.check_keys` error naming the closest valid key, and a scikit-learn estimator's given
parameters pass the estimator's own parameter validation (``n_estimators=lots``: scikit-learn would only notice in
``fit``, mid-run). :func:`unknown_key_error` words the same way what Hydra refuses on the command line (a key not
in the composed node, ``protocol.num_trails=2``).
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Mapping
from typing import Any

from omegaconf import DictConfig, OmegaConf

from owl_eval.errors import ConfigError
from owl_eval.typed import check_keys

# Keys Hydra's instantiate reads itself; never a parameter of the target.
INSTANTIATE_KEYS = ("_target_", "_args_", "_recursive_", "_convert_", "_partial_")


def plain(node) -> Any:
    """A resolved plain-Python copy of a config node (dicts and lists)."""
    if isinstance(node, DictConfig) or OmegaConf.is_config(node):
        return OmegaConf.to_container(node, resolve=True)
    return node


def build_part(cfg: DictConfig, key: str) -> Any:
    """Instantiate ``cfg[key]`` (a node with ``_target_``); a failure names the key and the target."""
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate

    node = cfg.get(key)
    if node is None:
        raise ValueError(f"config has no '{key}' node; choose one with '{key}=<option>'")
    if "_target_" not in node:
        raise ValueError(f"config node '{key}' has no _target_ (got keys {sorted(node.keys())})")
    check_node(plain(node), key)
    try:
        return instantiate(node, _convert_="all")
    except InstantiationException as exc:
        cause = exc.__cause__ or exc
        if isinstance(cause, ConfigError):
            # Already names its key; an agent built as the baseline names it under ``baseline.``.
            text = str(cause)
            if key != "agent" and text.startswith("agent."):
                text = f"{key}.{text[len('agent.') :]}"
            raise ConfigError(text) from None
        raise ValueError(f"could not build '{key}' ({node['_target_']}): {cause}") from None


# -- checks before instantiating ----------------------------------------------------------------------------


def target_of(node: Mapping) -> Any | None:
    """The object a node's ``_target_`` names, or None when it cannot be found (``instantiate`` then reports it)."""
    target = node.get("_target_")
    if not isinstance(target, str):
        return target if callable(target) else None
    from hydra._internal.utils import _locate  # what instantiate resolves with (hydra.utils.get_object logs errors)

    try:
        return _locate(target)
    except Exception:  # not importable, or an import error inside: instantiate's own message says which
        return None


def accepted_keywords(target: Any) -> tuple[list[str], bool] | None:
    """The keyword parameters ``target`` takes (in order) and whether it takes any keyword (``**kwargs``), or None
    when its signature cannot be read (a builtin)."""
    try:
        signature = inspect.signature(target)
    except (TypeError, ValueError):
        return None
    names = [
        p.name
        for p in signature.parameters.values()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]
    return names, any(p.kind is inspect.Parameter.VAR_KEYWORD for p in signature.parameters.values())


def check_node(node: Any, where: str) -> None:
    """Every node with a ``_target_`` in ``node`` (``where`` is its config key) gets only keys its target takes,
    and a scikit-learn estimator's given values pass its parameter validation; nested nodes are checked too (also
    under ``_recursive_: false``: the agent builds them later, mid-run)."""
    if isinstance(node, Mapping):
        target = target_of(node) if "_target_" in node else None
        if target is not None:
            keys = [k for k in node if k not in INSTANTIATE_KEYS]
            accepted = accepted_keywords(target)
            if accepted is not None and not accepted[1]:
                check_keys(dict.fromkeys(keys), accepted[0], where)
            check_estimator_params(target, {k: node[k] for k in keys}, where)
        for key, value in node.items():
            if key != "_target_":
                check_node(value, f"{where}.{key}")
    elif isinstance(node, (list, tuple)):
        for i, value in enumerate(node):
            check_node(value, f"{where}[{i}]")


def _holds_node(value: Any) -> bool:
    """Whether ``value`` is or holds a mapping (a nested node, built by Hydra into an object later)."""
    if isinstance(value, Mapping):
        return True
    if isinstance(value, (list, tuple)):
        return any(_holds_node(v) for v in value)
    return False


def check_estimator_params(target: Any, values: Mapping[str, Any], where: str) -> None:
    """``target`` a scikit-learn estimator class: each given value passes the class's parameter constraints
    (the check ``estimator._validate_params()`` makes, which scikit-learn runs only in ``fit``); nested nodes (an
    estimator inside a pipeline) are checked as their own node. Anything else: nothing to check."""
    import sys

    if "sklearn" not in sys.modules or not isinstance(target, type):  # the target's import brought sklearn in
        return
    from sklearn.base import BaseEstimator

    constraints = getattr(target, "_parameter_constraints", None)
    if not issubclass(target, BaseEstimator) or not isinstance(constraints, dict):
        return
    try:
        from sklearn.utils._param_validation import InvalidParameterError, validate_parameter_constraints
    except ImportError:  # a scikit-learn without parameter validation (< 1.2): fit will tell
        return
    for key, value in values.items():
        if key not in constraints or _holds_node(value):
            continue
        try:
            validate_parameter_constraints(constraints, {key: value}, caller_name=target.__name__)
        except InvalidParameterError as exc:
            raise ConfigError(f"{where}.{key}: {exc}") from None


# -- Hydra's refusals on the command line ------------------------------------------------------------------


def unknown_key_error(exc: BaseException) -> ConfigError | None:
    """The :func:`owl_eval.typed.check_keys` error for a key Hydra refused because the composed node lacks it
    (``protocol.num_trails=2``: "Key 'num_trails' is not in struct"), found in ``exc``'s chain; the valid keys are
    the node's and, for a node with a ``_target_``, every keyword its target takes. None when ``exc`` is about
    something else, or when the target takes the key (then Hydra's own hint, ``+key=value``, is the right one)."""
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError

    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, (ConfigAttributeError, ConfigKeyError)) and "not in struct" in str(current):
            error = _struct_error(current)
            if error is not None:
                return error
        current = current.__cause__ or current.__context__
    return None


def _struct_error(exc: BaseException) -> ConfigError | None:
    parent = getattr(exc, "parent_node", None)
    where, _, key = str(getattr(exc, "full_key", None) or "").rpartition(".")
    if not where or not key or not isinstance(parent, DictConfig):
        return None  # a top-level key: Hydra's message names it
    valid = [str(k) for k in parent.keys() if k not in INSTANTIATE_KEYS]
    if "_target_" in parent:
        try:
            target = target_of({"_target_": parent.get("_target_")})
        except Exception:
            target = None
        accepted = accepted_keywords(target) if target is not None else None
        if accepted is not None:
            if key in accepted[0]:
                return None  # the target takes it: Hydra's "+key=value" hint says how to add it
            valid += [k for k in accepted[0] if k not in valid]
            if accepted[1] and not difflib.get_close_matches(key, valid, n=1):
                return None  # ``**kwargs`` may take it, and it is no typo of a named one: Hydra's hint stands
    try:
        check_keys({key: None}, valid, where)
    except ConfigError as error:
        return error
    return None
