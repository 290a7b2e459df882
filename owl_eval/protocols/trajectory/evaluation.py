"""Trajectory scoring: General-Framework's metric table, the behaviour-class metrics, and the values the
trajectory figures draw (METRICS.md section 3).

Two records: a live run's (or a saved) :class:`~owl_eval.protocols.trajectory.record.TrajectoryRecord`,
held in memory, and a trajectories source's :class:`~owl_eval.protocols.trajectory.sources.trajectories.TrajectoryFile`, whose
arrays stay on disk and are streamed in chunks of ``chunk_size`` scenes.
"""

from __future__ import annotations

import numpy as np

from owl_eval.evaluation.base import Evaluation, Scored
from owl_eval.metrics.results import NA, MetricResults
from owl_eval.protocols.trajectory.api import constant_velocity_future
from owl_eval.protocols.trajectory.options import TrajectoryMetricOptions

TABLE_OPTIONS = ("k_values", "miss_threshold", "collision_radius", "step_count", "kde", "chunk_size")
MAX_KDE_SCENES = 300  # the calibration curve is drawn from the first scenes only (KDE cost)
MAX_PREDS_SHOWN = 20  # predictions drawn per agent in the example scenes
CALIBRATION_LEVELS = np.linspace(0, 1, 201)


class TrajectoryEvaluation(Evaluation[TrajectoryMetricOptions]):
    name = "trajectory"

    def score(self, record, options: TrajectoryMetricOptions, *, figures: bool = True) -> Scored:
        if is_file(record):
            results = score_file(record, options)
            return Scored(results, {"from_file": True} if figures else {})
        results = score_record(record, options)
        if not figures:
            return Scored(results)
        return Scored(
            results,
            {
                "example_scenes": example_scenes(
                    record, num_scenes=int(self.context.get("plot_scenes", 4)), predictor=self.context.get("agent")
                ),
                "error_vs_horizon": error_by_step(record),
                "kde_calibration": kde_calibration(record),
                "class_reliability": class_reliability(record, bins=options.class_ece_bins),
            },
        )

    def figures(self, scored: Scored, options: TrajectoryMetricOptions) -> dict:
        import owl_eval.protocols.trajectory.figures as plots

        if scored.figure_data.get("from_file"):
            return (
                {"error_vs_horizon": plots.error_by_step_from_series(scored.results)} if scored.results.series else {}
            )
        if not scored.figure_data:
            return {}
        return plots.trajectory_figures(scored.figure_data, scored.results)


def is_file(record) -> bool:
    """A trajectories source's record (arrays on disk), not one held in memory."""
    return hasattr(record, "keys") and hasattr(record, "path") and not hasattr(record, "path_pred")


def table_options(options: TrajectoryMetricOptions) -> dict:
    settings = options.settings()
    out = {k: settings[k] for k in TABLE_OPTIONS if settings.get(k) is not None}
    out["k_values"] = tuple(int(k) for k in out["k_values"])
    return out


def score_record(record, options: TrajectoryMetricOptions) -> MetricResults:
    """The whole metric table of a record held in memory."""
    from owl_eval.protocols.trajectory.metrics import trajectory_table

    results = trajectory_table(
        record.path_true,
        record.path_pred,
        record.pred_steps,
        rng=np.random.default_rng(record.metric_seed),
        log_probs=record.log_probs,
        **table_options(options),
    )
    results.set("num_scenes", record.num_scenes)
    results.set("num_agents", int(record.pred_steps.any(-1).sum()))
    results.set("num_classified_agents", len(record.p_true))
    set_class_metrics(
        results,
        record.p_true,
        record.p_pred,
        record.class_names,
        options,
        empty_reason="no classifiable agent (heading undefined or no valid future step)",
    )
    return results


def score_file(record, options: TrajectoryMetricOptions) -> MetricResults:
    """The metric table of a validated file, streamed in chunks of the source's ``chunk_size`` scenes."""
    kwargs = {k: v for k, v in table_options(options).items() if k != "chunk_size"}
    results = trajectory_table_npz(
        record.path,
        rng=np.random.default_rng(record.seed),
        chunk_size=record.chunk_size,
        true_key=record.keys["true"],
        pred_key=record.keys["pred"],
        mask_key=record.keys["mask"],
        log_prob_key=record.keys["log_probs"],
        **kwargs,
    )
    results.set("num_scenes", record.num_scenes)
    results.set("num_agents", record.num_valid_agents)
    if record.p_true is None:
        for key in ("auc", "class_ece", "tnr_pr"):
            results.set(key, NA("the file has no class outputs (P_true, P_pred)"))
    else:
        set_class_metrics(
            results, record.p_true, record.p_pred, record.class_names, options, empty_reason="no scene in the file"
        )
    return results


def set_class_metrics(
    results: MetricResults, p_true, p_pred, class_names, options: TrajectoryMetricOptions, *, empty_reason: str
) -> None:
    """AUC, class ECE and TNR-PR (positive class ``metrics.tnr_pr_positive``, by name) into ``results``."""
    from owl_eval.protocols.trajectory.metrics import auc, class_ece, tnr_pr

    names = [str(n) for n in class_names]
    positive = str(options.tnr_pr_positive)
    if len(p_true) == 0:
        for key in ("auc", "class_ece", "tnr_pr"):
            results.set(key, NA(empty_reason))
        return
    results.set("auc", auc(p_true, p_pred, score=str(options.auc_score)))
    results.set("class_ece", class_ece(p_true, p_pred, n_bins=int(options.class_ece_bins)))
    if positive in names:
        results.set("tnr_pr", tnr_pr(p_true, p_pred, positive_class=names.index(positive)))
    else:
        results.set("tnr_pr", NA(f"metrics.tnr_pr_positive={positive!r} is not one of the classes {names}"))


def trajectory_table_npz(path, *, rng, chunk_size=256, **kwargs) -> MetricResults:
    """The trajectory table of the arrays of an .npz (``Path_true``, ``Path_pred``, ``Pred_steps``, ...),
    streamed in chunks of ``chunk_size`` scenes from its memory maps (see
    :func:`owl_eval.protocols.trajectory.metrics.table.trajectory_table_stream` for the keywords)."""
    from owl_eval.formats.npz import npz_arrays
    from owl_eval.protocols.trajectory.metrics.table import trajectory_table_stream

    return trajectory_table_stream(npz_arrays(path), rng=rng, chunk_size=chunk_size, path=path, **kwargs)


# ----------------------------------------------------------------------------------------- figure data


def example_scenes(record, *, num_scenes: int = 4, predictor: str | None = None) -> list[dict]:
    """A few scenes (the most crowded ones, spread over the test set): per agent its history, truth and
    first predictions, and a title naming the scene (source file or simulator split, first observed frame,
    index in the test set) and what it shows (the predictor, the scene's agents by their index)."""
    counts = record.pred_steps.any(-1).sum(-1)
    order = np.argsort(-counts, kind="stable")[: max(1, num_scenes) * 4]
    chosen = np.sort(order[:: max(1, len(order) // max(1, num_scenes))][:num_scenes])
    shown = min(MAX_PREDS_SHOWN, record.path_pred.shape[1])
    scenes = []
    for s in chosen:
        agents = np.nonzero(record.pred_steps[s].any(-1))[0]
        scene = f"{record.scene_source[s]}, frame {int(record.scene_frame[s])} (test scene {s} of {record.num_scenes})"
        shows = (
            f"{predictor or 'predictor'}: agent{'s' if len(agents) != 1 else ''} {index_ranges(agents)}, "
            f"{shown} of {record.path_pred.shape[1]} predictions"
        )
        scenes.append(
            {
                "title": f"{scene}\n{shows}",
                "agents": agents,
                "history": record.path_history[s, agents],
                "truth": record.path_true[s, 0, agents],
                "predictions": record.path_pred[s, :MAX_PREDS_SHOWN][:, agents],
            }
        )
    return scenes


def index_ranges(indices) -> str:
    """``[0, 1, 2, 5, 7, 8]`` -> ``"0-2, 5, 7-8"``."""
    parts, start = [], None
    for i, value in enumerate(indices):
        if start is None:
            start = value
        if i + 1 == len(indices) or indices[i + 1] != value + 1:
            parts.append(str(start) if start == value else f"{start}-{value}")
            start = None
    return ", ".join(parts)


def error_by_step(record) -> dict:
    """Min (over predictions) displacement per future step, and the constant-velocity reference's."""
    steps = np.arange(1, record.pred_steps.shape[-1] + 1)
    true = record.path_true[:, 0]
    mask = record.pred_steps
    err = np.linalg.norm(record.path_pred - true[:, None], axis=-1)  # [S, P, A, N_O]
    n = mask.sum((0, 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        best = np.where(mask, np.nan_to_num(err).min(1), 0.0).sum((0, 1)) / n
        cv = constant_velocity_future(record.path_history, len(steps))
        cv_err = np.where(mask, np.nan_to_num(np.linalg.norm(cv - true, axis=-1)), 0.0).sum((0, 1)) / n
    return {
        "dt": record.dt,
        "horizon": steps * record.dt,
        "best": best,
        "constant_velocity": cv_err,
        "num_preds": record.path_pred.shape[1],
    }


def kde_calibration(record) -> dict:
    """Share of agents whose truth is less likely than more than a level of the predictions, at each level
    (the curve whose mean gap is the marginal KDE ECE; ECE_traj_indep.py); ``share`` None without a KDE."""
    from owl_eval.protocols.trajectory.metrics import kde_log_probs

    sl = slice(0, MAX_KDE_SCENES)
    if record.log_probs is not None:
        lp = record.log_probs[sl]
        n_p = lp.shape[1] - 1
        log_true, log_pred, ok = lp[:, n_p], lp[:, :n_p], record.pred_steps[sl].any(-1)
    else:
        log_true, log_pred, ok = kde_log_probs(record.path_true[sl], record.path_pred[sl], record.pred_steps[sl])
    levels = CALIBRATION_LEVELS
    if not ok.any():
        return {"levels": levels, "share": None, "agents": 0}
    m = (log_pred.transpose(0, 2, 1)[ok] > log_true[ok][:, None]).mean(1)
    return {"levels": levels, "share": (m[None, :] > levels[:, None]).mean(1), "agents": int(ok.sum())}


def class_reliability(record, *, bins: int = 10) -> dict:
    """Mean predicted class probability and observed frequency in equal-count bins (the class ECE's bins)."""
    names = [str(n) for n in record.class_names]
    if not len(record.p_true):
        return {"predicted": None, "observed": None, "class_names": names}
    t, p = record.p_true.ravel(), record.p_pred.ravel()
    order = np.argsort(p, kind="stable")
    groups = np.array_split(order, min(bins, len(order)))
    return {
        "predicted": np.array([p[g].mean() for g in groups]),
        "observed": np.array([t[g].mean() for g in groups]),
        "class_names": names,
    }
