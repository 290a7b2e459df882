"""Declarations of every OND metric: name, better direction, bounds, description (``SPECS``, ``SERIES``)."""

from __future__ import annotations

import math

from owl_eval.metrics.keys import MetricKey
from owl_eval.metrics.results import MetricSpec
from owl_eval.protocols.ond.metrics.detection import DETECTION_METRIC_NAMES
from owl_eval.protocols.ond.metrics.trial import DETECTION_THRESHOLD_GRID


def _spec(name, higher, bounds, description, log_scale=False):
    return MetricSpec(
        name=name, protocol="ond", higher_is_better=higher, bounds=bounds, description=description, log_scale=log_scale
    )


_INF = math.inf
_DETECTION_SPECS = {
    "m1_mean_fn_cdt": (
        False,
        (0.0, _INF),
        "M1: mean number of post-novelty samples before the first detection, over correctly detected trials",
    ),
    "m2_cdt_pct": (
        True,
        (0.0, 100.0),
        "M2: % of trials with novelty that are correctly detected (detection at or after the red light)",
    ),
    "m2_cdt_pct_all": (True, (0.0, 100.0), "M2 over all trials: % correctly detected trials among all trials"),
    "m21_fp_pct": (
        False,
        (0.0, 100.0),
        "M2.1: % of trials with a detection before the red light (any detection when no novelty)",
    ),
    **{
        f"unknown_score_{rate}_{segment}": (
            None if (segment == "pre" and rate != "accuracy") else True,
            (0.0, 1.0),
            f"per-sample novelty detection {rate} of the unknown-class score p_class[:, 0] >= threshold against gt_novel, "
            f"{segment} red light, mean over trials (not sail-on-client's m_ndp, which thresholds p_world_changed)"
            + (
                " (N/A: no novel sample comes before the red light, so it would be 0 by construction)"
                if segment == "pre" and rate != "accuracy"
                else ""
            ),
        )
        for segment in ("pre", "post")
        for rate in ("precision", "recall", "f1", "accuracy")
    },
    **{
        f"m_ndp{mode}_{rate}": (
            None if (mode == "_pre" and rate != "accuracy") else True,
            (0.0, 1.0),
            f"sail-on-client's m_ndp{mode} {rate}: p_world_changed > threshold against gt_novel per sample, "
            f"{where}, mean over trials (reference conventions, unrounded)",
        )
        for mode, where in (
            ("", "whole trial"),
            ("_pre", "before the first novel sample (whole trial without novelty)"),
            ("_post", "from the first novel sample on (trials with novelty)"),
        )
        for rate in ("accuracy", "precision", "recall", "f1_score")
    },
}


def _build_specs() -> list[MetricSpec]:
    specs = [_spec(name, *declaration) for name, declaration in _DETECTION_SPECS.items()]
    for k in (1, 3):
        for suffix, where in (
            ("", "the whole trial"),
            ("_pre", "samples before the red light"),
            ("_post", "samples from the red light on"),
        ):
            specs.append(_spec(f"top{k}{suffix}", True, (0.0, 1.0), f"top-{k} accuracy on {where}, mean over trials"))
    for prefix, condition in (("m3", "system detection"), ("m4", "given detection")):
        for k in (1, 3):
            name = f"{prefix}_nrp_top{k}"
            specs.append(
                _spec(
                    name,
                    True,
                    (0.0, _INF),
                    f"{prefix.upper()}: 100 x agent post-novelty top-{k} / baseline pre-novelty top-{k}, mean over trials with novelty ({condition})",
                )
            )
            specs.append(
                MetricSpec(
                    name=f"{name}_n_excluded",
                    protocol="ond",
                    higher_is_better=None,
                    bounds=(0.0, _INF),
                    description=f"trials with novelty left out of {name} (baseline pre-novelty top-{k} accuracy 0)",
                )
            )
    specs.append(
        _spec(
            "m5_opti_top1",
            True,
            (0.0, 1.0),
            "M5: agent post top-1 / (agent post top-1 + baseline post top-1), mean over trials with novelty; 0.5 = parity",
        )
    )
    specs.append(
        _spec(
            "m6_apti_top1",
            True,
            (0.0, _INF),
            "M6: agent top-1 / baseline top-1 on the last asymptotic_width samples, mean over trials with novelty",
        )
    )
    for name in ("m5_opti_top1", "m6_apti_top1"):
        specs.append(
            MetricSpec(
                name=f"{name}_n_excluded",
                protocol="ond",
                higher_is_better=None,
                bounds=(0.0, _INF),
                description=f"trials with novelty left out of {name} (undefined ratio)",
            )
        )
    specs += [
        _spec(
            "auroc_novel",
            True,
            (0.0, 1.0),
            "AUROC of p_class[:, 0] for novel samples over all samples (ties count one half)",
        ),
        _spec(
            "aupr_novel",
            True,
            (0.0, 1.0),
            "average precision of p_class[:, 0] for novel samples (sklearn average_precision_score)",
        ),
        _spec(
            "fpr_at_95tpr",
            False,
            (0.0, 1.0),
            "share of known samples scored at or above the threshold that catches 95% of novel samples",
        ),
        _spec(
            "oscr",
            True,
            (0.0, 1.0),
            "open-set classification rate (Dhamija et al. 2018) on the highest known-class score",
        ),
    ]
    for t in DETECTION_THRESHOLD_GRID:
        for name, (higher, bounds, description) in _DETECTION_SPECS.items():
            point = MetricKey(name, threshold=float(t))  # declared under its reported name, m2_cdt_pct@0.3
            specs.append(_spec(point, higher, bounds, f"{description}; at threshold {t:g}"))
    return specs


SPECS: list[MetricSpec] = _build_specs()

#: per-step series reported by :func:`program_metrics` (name -> what a step is)
SERIES = {
    MetricKey("top1", axis="batch"): "mini-batch index",
    MetricKey("top3", axis="batch"): "mini-batch index",
    **{MetricKey(name, axis="threshold"): "threshold x 1000" for name in DETECTION_METRIC_NAMES},
}
