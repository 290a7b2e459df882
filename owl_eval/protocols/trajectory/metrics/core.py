"""Trajectory metrics, shared core: input checks, K-subsets and per-prediction displacement errors.

Everything here is vectorised over samples; the public metric functions (:mod:`owl_eval.protocols.trajectory.metrics`)
and the table (:mod:`owl_eval.protocols.trajectory.metrics.table`) are thin reductions of the arrays computed here.

Conventions (METRICS.md section 3): ``true[N_S, N_A, N_O, 2]``, ``pred[N_S, N_P, N_A, N_O, 2]``,
``mask[N_S, N_A, N_O]`` (True = valid step). Masked steps count for nothing and may hold NaN.

``step_count="agent"`` (default): each agent is normalised by its own number of valid steps and its FDE
is read at its own last valid step; joint errors use, at each step, the RMS over the agents valid at that
step. ``step_count="sample"`` reproduces General-Framework (``ADE_indep.py``, ``FDE_joint.py``, ...):
masked steps are zero-filled, every agent is divided by the sample's maximum step count and FDE is read
at index ``max_steps - 1`` of the sample.
"""

from __future__ import annotations

import numpy as np

from owl_eval.metrics.validation import MetricInputError, as_array, check_option

STEP_COUNTS = ("agent", "sample")


def check_paths(true, pred, mask):
    """Validate and convert the three trajectory arrays; return float64/bool arrays.

    ``true`` may also be General-Framework's ``Path_true[N_S, 1, N_A, N_O, 2]``.
    """
    pred = as_array("pred", pred, ndim=5)
    n_s, n_p, n_a, n_o, two = pred.shape
    if two != 2:
        raise MetricInputError(f"pred: expected shape [N_S, N_P, N_A, N_O, 2], got {pred.shape} (last axis must be 2)")
    if n_p < 1:
        raise MetricInputError(f"pred: expected at least one prediction (N_P >= 1), got shape {pred.shape}")
    true = np.asarray(true)
    if true.ndim == 5 and true.shape[1] == 1:
        true = true[:, 0]
    true = as_array("true", true, shape=(n_s, n_a, n_o, 2))
    mask = as_array("mask", mask, shape=(n_s, n_a, n_o), dtype=None)
    if mask.dtype != bool:
        if mask.dtype.kind not in "biu" or not np.isin(mask, (0, 1)).all():
            raise MetricInputError(
                f"mask: expected a boolean array of shape [{n_s}, {n_a}, {n_o}], got dtype {mask.dtype}"
            )
        mask = mask.astype(bool)
    for name, arr, m in (("true", true, mask), ("pred", pred, mask[:, None])):
        bad = ~_finite_points(arr) & m
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise MetricInputError(
                f"{name}: non-finite value at valid step {idx} (mask is True there); "
                "masked steps may hold NaN, valid steps may not"
            )
    return true, pred, mask


def _finite_points(arr):
    """``np.isfinite(arr).all(-1)`` for a last axis of 2, ~6x faster: the two booleans of a point read as
    one uint16 equal 0x0101 exactly when both are True (a reduction over an axis of 2 is slow in numpy)."""
    return np.ascontiguousarray(np.isfinite(arr)).view(np.uint16)[..., 0] == 0x0101


def draw_subset(n_p: int, k: int | None, rng) -> np.ndarray:
    """Indices of the K predictions to use: all of them when ``k`` is None or ``k >= n_p``.

    Otherwise ``rng.permutation(n_p)[:k]`` (General-Framework draws the same way, unseeded).
    """
    if k is None or k >= n_p:
        return np.arange(n_p)
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise MetricInputError(f"num_preds/k: expected a positive integer, got {k!r}")
    if not isinstance(rng, np.random.Generator):
        raise MetricInputError(
            f"rng: a numpy Generator is required to draw {k} of {n_p} predictions, got {type(rng).__name__}"
        )
    return np.sort(rng.permutation(n_p)[:k])


def _last_valid(mask):
    """Index of the last True along the last axis (0 where none)."""
    n = mask.shape[-1]
    rev = np.argmax(mask[..., ::-1], axis=-1)
    return n - 1 - rev


def agent_errors(true, pred, mask, *, step_count="agent"):
    """Per-prediction marginal ADE and FDE of every agent.

    Returns ``(ade[N_S, N_P, N_A], fde[N_S, N_P, N_A], valid[N_S, N_A])``; entries of invalid agents are 0.
    ``ade = sum_{t valid} ||x_t - x^_t|| / n`` with ``n`` the agent's (or, for ``step_count="sample"``,
    the sample's maximum) number of valid steps; ``fde`` at the agent's last valid step (or at index
    ``n - 1`` of the sample).
    """
    check_option("step_count", step_count, STEP_COUNTS)
    diff = np.where(mask[:, None, :, :, None], pred - true[:, None], 0.0)
    dist = np.sqrt(np.einsum("spaoc,spaoc->spao", diff, diff))
    n_steps = mask.sum(-1)
    valid = n_steps > 0
    if step_count == "agent":
        denom = np.where(valid, n_steps, 1)[:, None, :]
        last = _last_valid(mask)
        fde = np.take_along_axis(dist, last[:, None, :, None], axis=-1)[..., 0]
    else:
        n_max = n_steps.max(-1)
        denom = np.maximum(n_max, 1)[:, None, None]
        idx = np.broadcast_to(np.maximum(n_max - 1, 0)[:, None, None, None], dist.shape[:3] + (1,))
        fde = np.take_along_axis(dist, idx, axis=-1)[..., 0]
    ade = dist.sum(-1) / denom
    v = valid[:, None, :]
    return np.where(v, ade, 0.0), np.where(v, fde, 0.0), valid


def joint_errors(true, pred, mask, *, step_count="agent"):
    """Per-prediction joint ADE and FDE of every sample.

    Returns ``(ade[N_S, N_P], fde[N_S, N_P], valid[N_S])``. At each step the RMS over agents
    ``r_t = sqrt(sum_{j valid at t} ||x_jt - x^_jt||^2 / n_t)``; ADE = mean of ``r_t`` over the steps with
    ``n_t >= 1``, FDE = ``r_t`` at the last such step. ``step_count="sample"`` (General-Framework):
    ``n_t`` is the number of agents valid anywhere in the sample, ADE divides by the sample's maximum
    step count and FDE is read at index ``max_steps - 1``.
    """
    check_option("step_count", step_count, STEP_COUNTS)
    diff = np.where(mask[:, None, :, :, None], pred - true[:, None], 0.0)
    sq = np.einsum("spaoc,spaoc->spo", diff, diff)  # summed over agents and x/y
    valid = mask.any(-1).any(-1)
    if step_count == "agent":
        n_t = mask.sum(1)  # [S, O]
        step_ok = n_t > 0
        rms = np.sqrt(sq / np.where(step_ok, n_t, 1)[:, None, :])
        n_steps = step_ok.sum(-1)
        ade = (rms * step_ok[:, None]).sum(-1) / np.maximum(n_steps, 1)[:, None]
        last = _last_valid(step_ok)
        fde = np.take_along_axis(rms, last[:, None, None], axis=-1)[..., 0]
    else:
        n_agents = mask.any(-1).sum(-1)
        rms = np.sqrt(sq / np.maximum(n_agents, 1)[:, None, None])
        n_max = mask.sum(-1).max(-1)
        ade = rms.sum(-1) / np.maximum(n_max, 1)[:, None]
        idx = np.broadcast_to(np.maximum(n_max - 1, 0)[:, None, None], rms.shape[:2] + (1,))
        fde = np.take_along_axis(rms, idx, axis=-1)[..., 0]
    v = valid[:, None]
    return np.where(v, ade, 0.0), np.where(v, fde, 0.0), valid


def step_errors(true, pred, mask, *, joint=False):
    """Sums and counts per future step for the error-vs-horizon series.

    Marginal: ``sum[t]`` of ``||x_jt - x^_jt||`` over valid (sample, agent) pairs and all predictions,
    ``count[t]`` = number of such terms. Joint: sum of the per-step RMS over agents (valid agents at t)
    over samples with a valid agent at t and all predictions.
    """
    diff = np.where(mask[:, None, :, :, None], pred - true[:, None], 0.0)
    n_p = pred.shape[1]
    if not joint:
        dist = np.sqrt(np.einsum("spaoc,spaoc->spao", diff, diff))
        return dist.sum((0, 1, 2)), mask.sum((0, 1)).astype(float) * n_p
    sq = np.einsum("spaoc,spaoc->spo", diff, diff)
    n_t = mask.sum(1)
    ok = n_t > 0
    rms = np.sqrt(sq / np.where(ok, n_t, 1)[:, None, :]) * ok[:, None]
    return rms.sum((0, 1)), ok.sum(0).astype(float) * n_p


def collision_counts(true, pred, mask, *, joint=False, radius=0.2):
    """Collisions of agents modelled as discs of radius ``radius`` (overlap: centre distance < 2 radius).

    Marginal: an (agent, prediction) collides if at some step where the agent is valid its predicted
    position overlaps the ground truth of another agent valid at that step. Returns
    ``(collided[N_S, N_P, N_A], valid[N_S, N_A])``. Joint: a (sample, prediction) collides if two of its
    agents' predictions (same index) overlap at a step where both are valid; returns
    ``(collided[N_S, N_P], valid[N_S])``.
    """
    n_a = mask.shape[1]
    lim = (2.0 * radius) ** 2
    n_s, n_p = pred.shape[:2]
    p = np.where(mask[:, None, :, :, None], pred, 0.0)
    if not joint:
        other = np.where(mask[..., None], true, 0.0)
        hit = np.zeros((n_s, n_p, n_a), bool)
        for a in range(n_a):
            for b in range(n_a):
                if a == b:
                    continue
                both = mask[:, a] & mask[:, b]  # [S, O]
                if not both.any():
                    continue
                d = p[:, :, a] - other[:, None, b]
                close = np.einsum("spoc,spoc->spo", d, d) < lim
                hit[:, :, a] |= (close & both[:, None]).any(-1)
        valid = mask.any(-1)
        return hit & valid[:, None], valid
    hit = np.zeros((n_s, n_p), bool)
    for a in range(n_a):
        for b in range(a + 1, n_a):
            both = mask[:, a] & mask[:, b]
            if not both.any():
                continue
            d = p[:, :, a] - p[:, :, b]
            hit |= ((np.einsum("spoc,spoc->spo", d, d) < lim) & both[:, None]).any(-1)
    return hit, mask.any(-1).any(-1)
