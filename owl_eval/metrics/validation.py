"""Input validation shared by every metric module: one clear error naming the array and what was expected."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from owl_eval.errors import MetricInputError  # noqa: F401  (re-exported: metric modules raise it)


def as_array(
    name: str,
    value,
    *,
    ndim: int | None = None,
    shape: Sequence[int | None] | None = None,
    dtype=np.float64,
    finite: bool = False,
    allow_nan: bool = True,
    low: float | None = None,
    high: float | None = None,
) -> np.ndarray:
    """Convert ``value`` to an array and check it; raise :class:`MetricInputError` naming ``name``.

    ``shape`` may hold None for free axes. ``finite`` forbids NaN and inf; ``allow_nan=False`` forbids
    NaN only. ``low``/``high`` bound the non-NaN values (inclusive).
    """
    try:
        arr = np.asarray(value, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise MetricInputError(
            f"{name}: expected numbers convertible to {np.dtype(dtype).name}, got {type(value).__name__} ({exc})"
        ) from None
    if shape is not None:
        ndim = len(shape)
    if ndim is not None and arr.ndim != ndim:
        raise MetricInputError(f"{name}: expected a {ndim}-D array{_shape_text(shape)}, got shape {arr.shape}")
    if shape is not None:
        for axis, (want, got) in enumerate(zip(shape, arr.shape)):
            if want is not None and want != got:
                raise MetricInputError(
                    f"{name}: expected shape {_shape_text(shape, bare=True)}, got {arr.shape} (axis {axis} is {got}, expected {want})"
                )
    if arr.dtype.kind == "f":
        if finite and not np.all(np.isfinite(arr)):
            bad = np.argwhere(~np.isfinite(arr))[0]
            raise MetricInputError(
                f"{name}: expected finite values, got {arr[tuple(bad)]} at index {tuple(int(i) for i in bad)}"
            )
        if not allow_nan and np.isnan(arr).any():
            bad = np.argwhere(np.isnan(arr))[0]
            raise MetricInputError(f"{name}: NaN at index {tuple(int(i) for i in bad)}; expected no missing values")
    if low is not None or high is not None:
        vals = arr[~np.isnan(arr)] if arr.dtype.kind == "f" else arr
        lo = -np.inf if low is None else low
        hi = np.inf if high is None else high
        outside = (vals < lo) | (vals > hi)
        if outside.any():
            raise MetricInputError(
                f"{name}: values must lie in [{lo}, {hi}], got {vals[outside][0]!r} ({int(outside.sum())} value(s) outside)"
            )
    return arr


def check_same_shape(names: Sequence[str], arrays: Sequence[np.ndarray]) -> None:
    first = arrays[0].shape
    for n, a in zip(names[1:], arrays[1:]):
        if a.shape != first:
            raise MetricInputError(f"{n}: shape {a.shape} does not match {names[0]} shape {first}")


def check_option(name: str, value, allowed: Sequence) -> None:
    if value not in allowed:
        raise MetricInputError(f"{name}: expected one of {list(allowed)}, got {value!r}")


def _shape_text(shape, bare: bool = False) -> str:
    if shape is None:
        return ""
    text = "[" + ", ".join("*" if s is None else str(s) for s in shape) + "]"
    return text if bare else f" of shape {text}"
