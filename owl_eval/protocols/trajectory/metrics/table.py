"""The trajectory metric table (General-Framework's metric set), in memory or streamed from an .npz.

Registry
--------
Each table entry is one function ``state(ctx, idx, opts) -> np.ndarray`` registered with its declaration in
:data:`~owl_eval.protocols.trajectory.metrics.declared.TRAJECTORY` (the shared mechanism of
:mod:`owl_eval.metrics.declare`) by :func:`table_metric`. The function reduces a chunk of samples (a :class:`~owl_eval.protocols.trajectory.metrics.context.TrajContext`) to an additive float
vector; a ``finalize`` turns the vector summed over chunks into the value. To add a metric::

    from owl_eval.protocols.trajectory.metrics.table import table_metric
    from owl_eval.protocols.trajectory.metrics.context import finalize_ratio

    @table_metric("max_fde_marginal", higher_is_better=False, bounds=(0.0, math.inf), latex=r"max FDE")
    def _max_fde(ctx, idx, opts):
        ade, fde, valid = ctx.errors(joint=False)           # per prediction [S, P, A]
        return np.array([fde.max(1)[valid].sum(), valid.sum()])   # numerator, denominator

Names containing ``{k}`` (with ``per_k=True``) are expanded for every K in ``k_values``; ``idx`` is
then the K-subset of prediction indices, drawn once per metric name from the run's Generator before
any chunk is read, so chunked and in-memory results use the same subsets. ``needs="kde"`` marks
entries that need densities (skipped with ``kde=False``). ``opts`` holds ``miss_threshold`` and
``collision_radius``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from owl_eval.metrics.declare import Declared
from owl_eval.metrics.keys import MetricKey
from owl_eval.metrics.results import NA, MetricResults, MetricSpec
from owl_eval.metrics.validation import MetricInputError, check_option
from owl_eval.protocols.trajectory.metrics.context import (
    TrajContext,
    finalize_count,
    finalize_ece,
    finalize_horizon,
    finalize_kde_ratio,
    finalize_ratio,
)
from owl_eval.protocols.trajectory.metrics.core import STEP_COUNTS, check_paths, draw_subset
from owl_eval.protocols.trajectory.metrics.declared import TRAJECTORY

INF = math.inf
TABLE_INPUTS = ("ctx", "idx", "opts")  # what a table entry's state function reads
KDE = "kde"  # the tag of entries that need densities

#: every registered trajectory metric in registration order (the table's entries are those reading TABLE_INPUTS)
REGISTRY: list[Declared] = TRAJECTORY.entries


def table_entries() -> list[Declared]:
    """The registered entries of the table, in order (the class metrics are computed apart)."""
    return [e for e in TRAJECTORY if e.needs == TABLE_INPUTS]


def table_metric(
    name,
    *,
    higher_is_better=False,
    bounds=(0.0, INF),
    log_scale=False,
    latex=None,
    description="",
    title="",
    combine="mean",
    finalize=finalize_ratio,
    per_k=False,
    needs="paths",
    kind="scalar",
):
    """Decorator: register ``fn(ctx, idx, opts) -> state`` as a table metric named ``name`` (``needs``: ``"paths"``,
    or ``"kde"`` for a metric that needs densities; ``kind``: ``"scalar"`` or ``"series"``; ``title``: its label)."""
    check_option("needs", needs, ("paths", KDE))
    check_option("kind", kind, ("scalar", "series"))
    return TRAJECTORY.metric(
        name,
        higher_is_better=higher_is_better,
        bounds=bounds,
        log_scale=log_scale,
        latex=latex,
        description=description,
        title=title,
        combine=combine,
        series=kind == "series",
        needs=TABLE_INPUTS,
        tags=(KDE,) if needs == KDE else (),
        finalize=finalize,
        per_k=per_k,
    )


class _ErrorNames(NamedTuple):
    """The names of one displacement error (ADE or FDE) in one view of the predictions."""

    over_all: str  # over all predictions
    over_k: str  # over K random predictions
    min_over_k: str  # the smallest over K predictions
    most_likely: str  # of the most likely prediction (needs densities)


class _ViewNames(NamedTuple):
    """The names of the table's metrics in one view: marginal (each agent alone) or joint (a sample's agents
    together)."""

    ade: _ErrorNames
    fde: _ErrorNames
    miss_rate: str
    miss_rate_over_k: str
    kde_nll: str
    kde_ece: str
    brier_min_fde: str
    collision_rate: str
    displacement_by_step: str


# Every name the built-in table reports, spelled out so that a search for a name finds where it is declared.
# A name holding {k} is reported for each K of ``k_values`` (min_ade_{k}_marginal: min_ade_20_marginal for K 20).
MARGINAL_NAMES = _ViewNames(
    ade=_ErrorNames("ade_marginal", "ade_{k}_marginal", "min_ade_{k}_marginal", "ml_ade_marginal"),
    fde=_ErrorNames("fde_marginal", "fde_{k}_marginal", "min_fde_{k}_marginal", "ml_fde_marginal"),
    miss_rate="miss_rate_marginal",
    miss_rate_over_k="miss_rate_{k}_marginal",
    kde_nll="kde_nll_marginal",
    kde_ece="kde_ece_marginal",
    brier_min_fde="brier_min_fde_marginal",
    collision_rate="collision_rate_marginal",
    displacement_by_step="displacement_by_step_marginal",
)
JOINT_NAMES = _ViewNames(
    ade=_ErrorNames("ade_joint", "ade_{k}_joint", "min_ade_{k}_joint", "ml_ade_joint"),
    fde=_ErrorNames("fde_joint", "fde_{k}_joint", "min_fde_{k}_joint", "ml_fde_joint"),
    miss_rate="miss_rate_joint",
    miss_rate_over_k="miss_rate_{k}_joint",
    kde_nll="kde_nll_joint",
    kde_ece="kde_ece_joint",
    brier_min_fde="brier_min_fde_joint",
    collision_rate="collision_rate_joint",
    displacement_by_step="displacement_by_step_joint",
)
#: the counts of samples or agents left out of the KDE averages, by what is singular: (name, description)
NA_COUNT_NAMES = {
    "any": ("kde_nll_na_count", "samples with any singular KDE"),
    "marginal": ("kde_nll_na_count_marginal", "agents with a singular KDE"),
    "joint": ("kde_nll_na_count_joint", "samples with a singular joint KDE"),
}


@dataclass(frozen=True)
class _View:
    """One view of the predictions with its names and labels: ``joint`` (a sample's agents together) or not."""

    joint: bool
    names: _ViewNames

    @property
    def framework_name(self) -> str:
        """The view in General-Framework's file names and in the LaTeX subscripts."""
        return "joint" if self.joint else "indep"

    @property
    def title_suffix(self) -> str:
        """What a title of the view ends with: a joint name says so; the marginal ones are the headline."""
        return " (joint)" if self.joint else ""

    def ratio(self) -> Callable[[np.ndarray], Any]:
        """``finalize_ratio`` over what the view averages (samples or agents)."""
        what = "samples" if self.joint else "agents"
        return lambda state: finalize_ratio(state, what)


def _register_builtins() -> None:
    """The built-in table, in the order it is reported (the K-subsets are drawn in this order too)."""
    for view in (_View(False, MARGINAL_NAMES), _View(True, JOINT_NAMES)):
        _register_errors(view, "ade", "ADE", view.names.ade)
        _register_errors(view, "fde", "FDE", view.names.fde)
        _register_miss_rates(view)
        _register_kde_metrics(view)
        _register_collision_rate(view)
        _register_displacement_by_step(view)
    _register_na_counts()


def _register_errors(view: _View, kind: str, up: str, names: _ErrorNames) -> None:
    """One displacement error (``kind`` "ade" or "fde", ``up`` its label) over all predictions, over K random
    ones, the smallest over K and that of the most likely prediction."""
    sub, joint = view.framework_name, view.joint
    table_metric(
        names.over_all,
        log_scale=True,
        latex=rf"\emph{{{up}$_{{{sub}}}$ [m]}}",
        finalize=view.ratio(),
        title=f"{up}{view.title_suffix}",
        description=f"{up} over all predictions ({up}_{sub}.py)",
    )(lambda c, i, o: c.mean_error_state(kind, joint))
    table_metric(
        names.over_k,
        log_scale=True,
        latex=rf"\emph{{{up}$_{{{{k}}, {sub}}}$ [m]}}",
        finalize=view.ratio(),
        per_k=True,
        description=f"{up} over K random predictions ({up}20_{sub}.py)",
    )(lambda c, i, o: c.mean_error_state(kind, joint, i))
    table_metric(
        names.min_over_k,
        log_scale=True,
        latex=rf"\emph{{min {up}$_{{{{k}}, {sub}}}$ [m]}}",
        finalize=view.ratio(),
        per_k=True,
        title=f"min{up}@{{k}}{view.title_suffix}",
        description=f"min {up} over K predictions (min{up}20_{sub}.py)",
    )(lambda c, i, o: c.mean_error_state(kind, joint, i, "min"))
    table_metric(
        names.most_likely,
        log_scale=True,
        latex=rf"\emph{{{up}$_{{ML, {sub}}}$ [m]}}",
        finalize=finalize_kde_ratio,
        needs="kde",
        description=f"{up} of the most likely prediction ({up}_ML_{sub}.py)",
    )(lambda c, i, o: c.ml_state(kind, joint))


def _register_miss_rates(view: _View) -> None:
    """The share of cases whose every prediction misses (FDE above ``miss_threshold``), over all and over K."""
    sub, joint = view.framework_name, view.joint
    table_metric(
        view.names.miss_rate,
        bounds=(0.0, 1.0),
        latex=rf"\emph{{MR$_{{{sub}}}$}}",
        finalize=view.ratio(),
        title=f"Miss rate{view.title_suffix}",
        description=f"miss rate, FDE > threshold for all predictions (Miss_rate_{sub}.py)",
    )(lambda c, i, o: c.miss_state(joint, o["miss_threshold"]))
    table_metric(
        view.names.miss_rate_over_k,
        bounds=(0.0, 1.0),
        latex=rf"\emph{{MR$_{{{{k}}, {sub}}}$}}",
        finalize=view.ratio(),
        per_k=True,
        description="miss rate over K random predictions",
    )(lambda c, i, o: c.miss_state(joint, o["miss_threshold"], i))


def _register_kde_metrics(view: _View) -> None:
    """The metrics that read densities: the truth's NLL, the trajectory ECE and Brier-minFDE."""
    sub, joint = view.framework_name, view.joint
    table_metric(
        view.names.kde_nll,
        bounds=(-INF, INF),
        latex=rf"\emph{{KDE$_{{NLL, {sub}}}$}}",
        finalize=finalize_kde_ratio,
        needs="kde",
        title=f"KDE NLL{view.title_suffix}",
        description=f"KDE NLL of the truth (KDE_NLL_{sub}.py)",
    )(lambda c, i, o: c.nll_state(joint))
    table_metric(
        view.names.kde_ece,
        bounds=(0.0, 1.0),
        latex=rf"\emph{{ECE$_{{\text{{Traj}}, {sub}}}$}}",
        finalize=finalize_ece,
        needs="kde",
        combine="none",
        title=f"KDE ECE{view.title_suffix}",
        description=f"201-level trajectory ECE (ECE_traj_{sub}.py)",
    )(lambda c, i, o: c.ece_state(joint))
    table_metric(
        view.names.brier_min_fde,
        log_scale=True,
        latex=rf"\emph{{Brier min FDE$_{{{sub}}}$ [m]}}",
        finalize=finalize_kde_ratio,
        needs="kde",
        description=f"Brier-minFDE (Brier_minFDE_{sub}.py)",
    )(lambda c, i, o: c.brier_state(joint))


def _register_collision_rate(view: _View) -> None:
    """The share of predictions whose disc overlaps another agent's (its prediction when joint, else its truth)."""
    joint = view.joint
    table_metric(
        view.names.collision_rate,
        bounds=(0.0, 1.0),
        latex=rf"\emph{{CR$_{{{view.framework_name}}}$}}",
        finalize=view.ratio(),
        title=f"Collision rate{view.title_suffix}",
        description="share of predictions whose disc overlaps another agent "
        + ("prediction" if joint else "ground truth"),
    )(lambda c, i, o: c.collision_state(joint, o["collision_radius"]))


def _register_displacement_by_step(view: _View) -> None:
    """The mean displacement of each future step: a series, one value per step."""
    joint = view.joint
    table_metric(
        view.names.displacement_by_step,
        bounds=(0.0, INF),
        latex=rf"\emph{{DE$_{{{view.framework_name}}}(t)$ [m]}}",
        finalize=finalize_horizon,
        kind="series",
        combine="none",
        description="mean displacement per future step (1-based)",
    )(lambda c, i, o: c.horizon_state(joint))


def _register_na_counts() -> None:
    """How many samples or agents the KDE averages leave out (a singular KDE), by what is singular."""
    for singular, (name, description) in NA_COUNT_NAMES.items():
        table_metric(
            name,
            higher_is_better=None,
            bounds=(0.0, INF),
            finalize=finalize_count,
            needs="kde",
            combine="sum",
            description=description + " (left out of the KDE averages)",
        )(lambda c, i, o, singular=singular: c.na_state(singular))


_register_builtins()


def specs_for(k_values: Iterable[int] = (20, 50)) -> list[MetricSpec]:
    """Concrete :class:`MetricSpec` list of the table for the given K values."""
    ks = list(k_values)
    return [spec for e in table_entries() for spec in ([e.spec.for_k(k) for k in ks] if e.extra["per_k"] else [e.spec])]


def _plan(k_values, n_p, rng, kde):
    """Entries to compute with their concrete names and K-subsets (drawn once, in registry order)."""
    plan: list[tuple[MetricKey, Declared, np.ndarray | None]] = []
    for e in table_entries():
        if KDE in e.tags and not kde:
            continue
        if e.extra["per_k"]:
            for k in k_values:
                plan.append((MetricKey(e.spec.name, k=int(k)), e, draw_subset(n_p, int(k), rng)))
        else:
            plan.append((MetricKey(e.spec.name), e, None))
    return plan


NEEDS_PREDICTION_DENSITIES = ("ml_", "kde_ece", "brier")  # metrics that rank predictions by their KDE density


def _accumulate(chunks, plan, opts, ctx_kwargs):
    totals: dict[MetricKey, np.ndarray] = {}
    # The NLL alone needs the truth's density; with ECE/ML/Brier the full KDE is computed once and shared.
    full_kde = any(entry.spec.name.startswith(NEEDS_PREDICTION_DENSITIES) for _, entry, _ in plan)
    for true, pred, mask, log_probs, joint_log_probs in chunks:
        ctx = TrajContext(
            true, pred, mask, log_probs=log_probs, joint_log_probs=joint_log_probs, full_kde=full_kde, **ctx_kwargs
        )
        # extreme inputs (1e308) overflow to inf: the finalizers turn that into N/A, so no warning is printed
        with np.errstate(over="ignore", invalid="ignore"):
            for name, entry, idx in plan:
                st = np.asarray(entry.fn(ctx, idx, opts), float)
                totals[name] = st if name not in totals else totals[name] + st
    res = MetricResults()
    for name, entry, _ in plan:
        value = entry.extra["finalize"](totals[name]) if name in totals else NA("no samples")
        if entry.spec.series:
            if isinstance(value, NA):
                res.na[name] = value.reason
            else:
                res.series[name] = value
        else:
            res.set(name, value)
    return res


def _chunk_size(value, n_s):
    """``chunk_size``: a positive integer (None: all samples at once)."""
    if value is None:
        return max(1, n_s)
    whole = isinstance(value, (int, np.integer)) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not whole or value < 1:
        raise MetricInputError(f"chunk_size: expected a positive integer (samples per chunk), got {value!r}")
    return int(value)


def _options(k_values, miss_threshold, collision_radius, step_count, rng):
    check_option("step_count", step_count, STEP_COUNTS)
    if miss_threshold < 0 or collision_radius < 0:
        raise MetricInputError("miss_threshold and collision_radius must be >= 0")
    if any(int(k) < 1 for k in k_values):
        raise MetricInputError(f"k_values: expected positive integers, got {list(k_values)}")
    return {"miss_threshold": float(miss_threshold), "collision_radius": float(collision_radius)}


def trajectory_table(
    true,
    pred,
    mask,
    *,
    rng,
    log_probs=None,
    joint_log_probs=None,
    k_values=(20,),
    miss_threshold=2.0,
    collision_radius=0.2,
    step_count="agent",
    kde=True,
    chunk_size=256,
    singular_rtol=1e-11,
) -> MetricResults:
    """All trajectory metrics of METRICS.md section 3 for in-memory arrays.

    ``true[N_S, N_A, N_O, 2]`` (or ``[N_S, 1, N_A, N_O, 2]``), ``pred[N_S, N_P, N_A, N_O, 2]``,
    ``mask[N_S, N_A, N_O]``; ``log_probs[N_S, N_P + 1, N_A]`` (last column the truth) replaces the
    KDE when given. Samples are processed ``chunk_size`` at a time (memory); the result does not depend
    on ``chunk_size``. Names: see :func:`specs_for`; series ``displacement_by_step_{marginal,joint}``.
    """
    true, pred, mask = check_paths(true, pred, mask)
    opts = _options(k_values, miss_threshold, collision_radius, step_count, rng)
    plan = _plan(k_values, pred.shape[1], rng, kde)
    n_s = pred.shape[0]
    step = _chunk_size(chunk_size, n_s)

    def chunks():
        for lo in range(0, n_s, step):
            sl = slice(lo, lo + step)
            yield (
                true[sl],
                pred[sl],
                mask[sl],
                None if log_probs is None else np.asarray(log_probs)[sl],
                None if joint_log_probs is None else np.asarray(joint_log_probs)[sl],
            )

    return _accumulate(chunks(), plan, opts, {"step_count": step_count, "singular_rtol": singular_rtol})


def trajectory_table_stream(
    arrays,
    *,
    rng,
    chunk_size=256,
    true_key="Path_true",
    pred_key="Path_pred",
    mask_key="Pred_steps",
    log_prob_key=None,
    path="arrays",
    **kwargs,
) -> MetricResults:
    """:func:`trajectory_table` over ``arrays`` (a mapping of array-likes, e.g. the memory maps of an .npz
    opened by :func:`owl_eval.formats.npz.npz_arrays`; this module opens no file) in chunks of
    ``chunk_size`` samples; ``path`` names them in errors.

    Arrays (General-Framework names): ``Path_true[N_S, 1, N_A, N_O, 2]``, ``Path_pred[N_S, N_P, N_A,
    N_O, 2]``, ``Pred_steps[N_S, N_A, N_O]``, optional log-probabilities ``[N_S, N_P + 1, N_A]`` under
    ``log_prob_key``. Equal to the in-memory result: states are summed, and K-subsets are drawn up front.
    """
    for key in (true_key, pred_key, mask_key) + ((log_prob_key,) if log_prob_key else ()):
        if key not in arrays:
            raise MetricInputError(f"{path}: array {key!r} not found (has {sorted(arrays)})")
    t_all, p_all, m_all = arrays[true_key], arrays[pred_key], arrays[mask_key]
    lp_all = arrays[log_prob_key] if log_prob_key else None
    n_s, n_p = p_all.shape[:2] if p_all.ndim == 5 else (None, None)
    if n_s is None:
        raise MetricInputError(f"{pred_key}: expected shape [N_S, N_P, N_A, N_O, 2], got {p_all.shape}")
    k_values = kwargs.pop("k_values", (20,))
    kde = kwargs.pop("kde", True)
    step_count = kwargs.pop("step_count", "agent")
    singular_rtol = kwargs.pop("singular_rtol", 1e-11)
    opts = _options(k_values, kwargs.pop("miss_threshold", 2.0), kwargs.pop("collision_radius", 0.2), step_count, rng)
    if kwargs:
        raise MetricInputError(f"unknown options {sorted(kwargs)}")
    plan = _plan(k_values, n_p, rng, kde)
    step = _chunk_size(chunk_size, n_s)

    def chunks():
        for lo in range(0, n_s, step):
            sl = slice(lo, lo + step)
            try:
                t, p, m = check_paths(np.array(t_all[sl]), np.array(p_all[sl]), np.array(m_all[sl]))
            except MetricInputError as exc:  # indices are within the chunk: say which file and scenes
                raise MetricInputError(f"{path}, scenes {lo}..{min(lo + step, n_s) - 1}: {exc}") from None
            yield t, p, m, None if lp_all is None else np.array(lp_all[sl]), None

    return _accumulate(chunks(), plan, opts, {"step_count": step_count, "singular_rtol": singular_rtol})
