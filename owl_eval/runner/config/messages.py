"""How an error is worded for a person: one line (:func:`one_line`), whatever raised it (our checks, Hydra,
OmegaConf, a full disk), and which errors are the user's (:data:`USER_ERRORS`: the message is the whole story)."""

from __future__ import annotations

from hydra.errors import HydraException
from omegaconf.errors import OmegaConfBaseException

from owl_eval.errors import ConfigError, Terminated

# Errors caused by the config or the input: the message is the whole story.

USER_ERRORS = (
    ValueError,
    ImportError,
    OSError,
    UnicodeError,
    RecursionError,
    OverflowError,
    OmegaConfBaseException,
    HydraException,
)


def _own_error_inside(exc: BaseException) -> ConfigError | None:
    """The ConfigError a resolver raised, from the chain OmegaConf wraps it in, or None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, ConfigError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def one_line(exc: BaseException) -> str:
    """The message of ``exc`` on one line (Hydra's and OmegaConf's messages span several); what OmegaConf refused
    in a typed node (a key the ``metrics`` node lacks) or in any other group's node (``protocol.num_trails=2``) is
    worded as our own checks word it."""
    from owl_eval.runner.config.build import unknown_key_error
    from owl_eval.typed import config_node_error

    ours = config_node_error(exc) or unknown_key_error(exc)
    if ours is not None:
        return str(ours)
    if isinstance(exc, Terminated):
        return str(exc)
    if isinstance(exc, KeyboardInterrupt):
        return "interrupted (Ctrl-C)"
    from owl_eval.tracking.faults import describe_if_full

    full = describe_if_full(exc)  # a full disk met outside a run (creating it, a sweep's parent): no SQL text
    if full is not None:
        return full
    if isinstance(exc, OmegaConfBaseException):
        inner = _own_error_inside(exc)
        if inner is not None:
            return one_line(inner)  # our own check inside a resolver: its message is the whole story
    if isinstance(exc, RecursionError):
        return f"input nested too deeply to read ({exc})"
    text = str(exc).strip() or type(exc).__name__
    parts = [p.strip() for p in text.splitlines() if p.strip()]
    if isinstance(exc, OmegaConfBaseException):
        # OmegaConf appends "full_key: ..., object_type=..." lines; the key is the useful part.
        key = next((p.split(":", 1)[1].strip() for p in parts if p.startswith("full_key:")), "")
        parts = [p for p in parts if not p.startswith(("full_key:", "object_type=", "reference_type="))]
        if key and key not in parts[0]:
            parts[0] = f"{key}: {parts[0]}"
    message = "; ".join(parts)
    cause = exc.__cause__
    if isinstance(exc, HydraException) and cause is not None and str(cause).strip():
        # "Could not override 'x'" alone does not say why; the cause's first line does.
        message += f" ({str(cause).strip().splitlines()[0]})"
    if not isinstance(exc, USER_ERRORS):
        message = f"{type(exc).__name__}: {message}"
    return message
