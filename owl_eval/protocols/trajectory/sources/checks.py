"""Value checks of General-Framework trajectory arrays, shared by the ``trajectories`` source (a user's
``.npz``, chunk by chunk) and the ``record`` source (a saved ``trajectory_record.npz``).

Each check is vectorised over its chunk and raises one :class:`~owl_eval.sources.SourceFormatError` naming
the file, the array and the index of the first bad entry (``'Path_pred' [scene 3, prediction 1, agent 0,
step 7]``) and what was expected.
"""

from __future__ import annotations

import numpy as np

from owl_eval.sources import SourceFormatError

#: The largest coordinate accepted (metres): beyond it a value is not a position but a unit or export
#: error, and from ~1e154 on squared distances overflow float64 (predictions of 1e308 made ADE inf / 1.8e308).
MAX_ABS_COORDINATE = 1e12
ROW_SUM_TOLERANCE = 1e-6


def _index_text(axes, index, offset) -> str:
    parts = [f"{axes[0]} {offset + index[0]}"] + [f"{a} {i}".strip() for a, i in zip(axes[1:], index[1:])]
    return "[" + ", ".join(parts) + "]"


def check_coordinates(where, key: str, xy, counted, axes, *, offset: int = 0, mask_key: str = "Pred_steps") -> None:
    """``xy[..., 2]`` finite and within +-MAX_ABS_COORDINATE wherever ``counted`` (broadcast to ``xy[..., 0]``).

    ``axes`` names the axes before the last (``""`` prints the bare index); ``offset`` is added to axis 0
    (the chunk's first scene)."""
    xy = np.asarray(xy, dtype=np.float64)
    bad = ~(np.abs(xy) <= MAX_ABS_COORDINATE).all(-1) & counted  # NaN compares False: caught too
    if not bad.any():
        return
    index = tuple(int(i) for i in np.argwhere(bad)[0])
    value = xy[index].tolist()
    what = (
        "NaN/inf"
        if not np.isfinite(xy[index]).all()
        else f"beyond +-{MAX_ABS_COORDINATE:g} (metres; larger values are not positions and overflow the squared distances)"
    )
    raise SourceFormatError(
        f"{where}: array {key!r} {_index_text(axes, index, offset)} is {value}: {what}, where "
        f"{mask_key!r} counts the step (a finite position is required)"
    )


def check_log_probs(where, key: str, lp, counted_agents, *, offset: int = 0) -> None:
    """``lp[S, N_P + 1, N_A]``: no NaN for a counted agent, never +inf (-inf, a zero density, is allowed)."""
    v = np.asarray(lp, dtype=np.float64)
    bad = (np.isnan(v) & counted_agents[:, None]) | np.isposinf(v)
    if bad.any():
        s, p, a = (int(i) for i in np.argwhere(bad)[0])
        raise SourceFormatError(
            f"{where}: array {key!r} [scene {offset + s}, column {p}, agent {a}] is {v[s, p, a]} "
            "(NaN for a counted agent, or +inf)"
        )


def check_class_outputs(where, t_key: str, p_key: str, p_true, p_pred, *, rows: int | None, row: str = "scene"):
    """``P_true[N, C]`` one-hot and ``P_pred[N, C]`` probability rows summing to 1; ``rows`` = the expected N
    (None: any). Returns both as float64."""
    for key, arr in ((t_key, p_true), (p_key, p_pred)):
        if np.asarray(arr).dtype.kind not in "biuf":
            raise SourceFormatError(f"{where}: array {key!r} has dtype {np.asarray(arr).dtype}, expected numbers")
    p_true, p_pred = np.asarray(p_true, dtype=np.float64), np.asarray(p_pred, dtype=np.float64)
    for key, arr in ((t_key, p_true), (p_key, p_pred)):
        if arr.ndim != 2 or (rows is not None and arr.shape[0] != rows) or arr.shape[1] < 2:
            raise SourceFormatError(
                f"{where}: array {key!r} has shape {arr.shape}, expected [N, N_classes] = "
                f"[{'N' if rows is None else rows}, >=2]"
            )
        bad = np.argwhere(~np.isfinite(arr))
        if bad.size:
            raise SourceFormatError(
                f"{where}: array {key!r} [{row} {bad[0][0]}, class {bad[0][1]}] is not a finite number"
            )
    if p_pred.shape != p_true.shape:
        raise SourceFormatError(
            f"{where}: array {p_pred.shape} of {p_key!r} does not match {p_true.shape} of {t_key!r}"
        )
    not_one_hot = np.flatnonzero(~(np.isin(p_true, (0.0, 1.0)).all(1) & (p_true.sum(1) == 1)))
    if not_one_hot.size:
        raise SourceFormatError(
            f"{where}: array {t_key!r} {row} {not_one_hot[0]} is not one-hot: {p_true[not_one_hot[0]].tolist()[:20]}"
        )
    outside = np.argwhere((p_pred < 0) | (p_pred > 1))
    if outside.size:
        i, j = outside[0]
        raise SourceFormatError(f"{where}: array {p_key!r} [{row} {i}, class {j}] = {p_pred[i, j]} is outside [0, 1]")
    sums = p_pred.sum(1)
    off = np.flatnonzero(np.abs(sums - 1) > ROW_SUM_TOLERANCE)
    if off.size:
        raise SourceFormatError(
            f"{where}: array {p_key!r} {row} {off[0]} sums to {sums[off[0]]:.9g}, expected 1 within "
            f"{ROW_SUM_TOLERANCE:g}"
        )
    return p_true, p_pred
