"""Metrics relative to single-task experts (STE): relative performance, sample efficiency, time to learn.

Inputs are processed curves (smoothed and normalised as the rest of the pipeline does) of one task: the
agent's concatenated training (wake) rows and each STE run's training rows.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from owl_eval.metrics.results import NA
from owl_eval.metrics.validation import as_array
from owl_eval.protocols.lifelong_rl.metrics.blocks import TIE_RTOL, episode_means, saturation_segments

MIN_SATURATION_FRACTION = 0.2  # l2metrics SampleEfficiency: below 20% of the STE's saturation -> 0


def ste_relative_performance(task_values, ste_values):
    """Σ agent / Σ STE over the first ``min(n_agent, n_ste)`` training episodes, averaged over STE runs.

    l2metrics ``STERelativePerf`` (``ste_averaging_method="metrics"``). ``ste_values`` is a list of arrays.
    """
    a = as_array("task_values", task_values, ndim=1)
    runs = [as_array("ste_values", s, ndim=1) for s in ste_values]
    if len(a) == 0 or not runs:
        return NA("no training episodes of the task" if len(a) == 0 else "no STE run for the task")
    vals = []
    for s in runs:
        m = min(len(a), len(s))
        with np.errstate(divide="ignore", invalid="ignore"):
            vals.append(np.nansum(a[:m]) / np.nansum(s[:m]))
    return float(np.nanmean(vals))


def curve_saturations(curves, *, fraction: float = 0.2, max_window: int = 100) -> list:
    """(saturation, time to saturation, smoothed curve) of several training curves in one vectorised call.

    ``curves`` is a list of ``(values, exp_num)``; rows sharing an exp_num are averaged first (l2metrics).
    """
    means = [episode_means(np.asarray(v, float), np.asarray(e), np.zeros(len(v), dtype=np.int64))[0] for v, e in curves]
    if not means:
        return []
    lengths = np.array([len(m) for m in means], dtype=np.int64)
    starts = np.cumsum(lengths) - lengths
    sat, tts, sm = saturation_segments(np.concatenate(means), starts, lengths, fraction=fraction, max_window=max_window)
    return [(float(sat[i]), int(tts[i]), sm[starts[i] : starts[i] + lengths[i]]) for i in range(len(means))]


def sample_efficiency(
    task_values, task_exp_num, ste_runs, *, fraction: float = 0.2, max_window: int = 100, curves: list | None = None
) -> dict:
    """Sample efficiency of one task against its STE runs (l2metrics ``SampleEfficiency``, "metrics" averaging).

    Per STE run: ``(sat_agent / sat_ste) * (tts_ste / tts_agent)``, set to 0 when the agent's saturation is
    below 20% of the STE's or the least-squares trend of the agent's training curve (against exp_num) is
    negative. Runs whose STE saturates at episode 0 are skipped; the task is skipped when the agent does.
    ``ste_runs`` is a list of ``(values, exp_num)``; ``curves`` optionally gives :func:`curve_saturations`
    of ``[task] + ste_runs`` already computed. Returns a dict with ``sample_efficiency`` (float or NA),
    ``saturation_ratio``, ``time_to_saturation_ratio`` and the per-run lists.
    """
    a = as_array("task_values", task_values, ndim=1)
    e = as_array("task_exp_num", task_exp_num, ndim=1)
    out: dict[str, Any] = {
        "sample_efficiency": NA("no STE run for the task"),
        "saturation_ratio": NA("no STE run for the task"),
        "time_to_saturation_ratio": NA("no STE run for the task"),
        "values": [],
        "ste_saturation": [],
        "ste_time_to_saturation": [],
    }
    if len(a) == 0:
        for k in ("sample_efficiency", "saturation_ratio", "time_to_saturation_ratio"):
            out[k] = NA("no training episodes of the task")
        return out
    if not ste_runs:
        return out
    with warnings.catch_warnings():  # a one-point fit is rank deficient: l2metrics fits it all the same
        warnings.simplefilter("ignore")
        slope = float(np.polyfit(e, a, 1)[0])
    if curves is None:
        curves = curve_saturations([(a, e)] + list(ste_runs), fraction=fraction, max_window=max_window)
    sat, tts, _ = curves[0]
    if tts == 0:
        reason = "the agent's smoothed training curve peaks at its first episode (no saturation to compare)"
        for k in ("sample_efficiency", "saturation_ratio", "time_to_saturation_ratio"):
            out[k] = NA(reason)
        return out
    sat_r, tts_r = [], []
    for s_sat, s_tts, _ in curves[1:]:
        if s_tts == 0:
            continue
        out["ste_saturation"].append(s_sat)
        out["ste_time_to_saturation"].append(s_tts)
        sat_r.append(sat / s_sat)
        tts_r.append(s_tts / tts)
        bad = sat < s_sat * MIN_SATURATION_FRACTION or slope < 0
        out["values"].append(0.0 if bad else (sat / s_sat) * (s_tts / tts))
    if not out["values"]:
        reason = "every STE run's smoothed curve peaks at its first episode"
        for k in ("sample_efficiency", "saturation_ratio", "time_to_saturation_ratio"):
            out[k] = NA(reason)
        return out
    out["sample_efficiency"] = float(np.mean(out["values"]))
    out["saturation_ratio"] = float(np.mean(sat_r))
    out["time_to_saturation_ratio"] = float(np.mean(tts_r))
    return out


def time_to_learn(
    task_values,
    task_exp_num,
    ste_runs,
    *,
    learn_threshold: float = 0.9,
    fraction: float = 0.2,
    max_window: int = 100,
    curves: list | None = None,
):
    """STE episodes / agent episodes to reach ``learn_threshold`` × the STE's saturation value (>1 = faster).

    Both curves are the smoothed training curves used for saturation; "episodes to reach" counts the
    episode that reaches the level (index + 1). Averaged over STE runs; NA when the agent never reaches it.
    Our definition (the seed names the metric without one; l2metrics has none).
    """
    a = as_array("task_values", task_values, ndim=1)
    if len(a) == 0:
        return NA("no training episodes of the task")
    if not ste_runs:
        return NA("no STE run for the task")
    if curves is None:
        e = as_array("task_exp_num", task_exp_num, ndim=1)
        curves = curve_saturations([(a, e)] + list(ste_runs), fraction=fraction, max_window=max_window)
    sm_a = curves[0][2]
    ratios: list[float] = []
    reason = "no STE run for the task"  # replaced by each STE run's reason
    for s_sat, _, sm_s in curves[1:]:
        level = learn_threshold * s_sat
        tol = TIE_RTOL * max(abs(level), 1.0)
        hit_s = np.flatnonzero(sm_s >= level - tol)
        hit_a = np.flatnonzero(sm_a >= level - tol)
        if hit_s.size == 0:
            reason = f"the STE never reaches {learn_threshold} x its own saturation (negative values?)"
            continue
        if hit_a.size == 0:
            reason = f"the agent never reaches {learn_threshold} x the STE saturation value"
            continue
        ratios.append((hit_s[0] + 1) / (hit_a[0] + 1))
    if not ratios:
        return NA(reason)
    return float(np.mean(ratios))
