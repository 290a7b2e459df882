"""Reaction to novelty against a baseline agent run on the same trials: NRP (M3, M4), OPTI (M5), APTI (M6).

Per trial with novelty, then averaged over the trials whose ratio is defined; each metric reports how many
trials with novelty it left out (``<name>_n_excluded``). sail-on-client 0.30.0 implements NRP (``m_nrp``); M5 and
M6 are the seed's formulas (METRICS.md section 1). The per-trial versions are in
:mod:`~owl_eval.protocols.ond.metrics.blocks`.
"""

from __future__ import annotations

import math

import numpy as np

from owl_eval.metrics.declare import NAIf
from owl_eval.metrics.results import NA
from owl_eval.protocols.ond.metrics.accuracy import TOP_K
from owl_eval.protocols.ond.metrics.declared import OND, ProgramOptions
from owl_eval.protocols.ond.metrics.flat import FlatTrials, ratio_or_nan

_INF = math.inf
_NEEDS = ("flat", "baseline", "options")
NO_NOVELTY = NAIf(
    "no trial has novelty (every red_light is None); M3-M6 average over trials with novelty",
    lambda flat, **_: not flat.has_novelty.any(),
)
SAME_AGENT_REASON = "the agent is the baseline (identical p_class on every trial): M5 = 0.5 and M6 = 1 by construction"


def _same_agent(flat: FlatTrials, baseline: FlatTrials) -> bool:
    return flat.shared(("same p_class", id(baseline)), lambda: np.array_equal(flat.p_class, baseline.p_class))


def _over_novel_trials(flat: FlatTrials, name: str, per_trial: np.ndarray, excluded: str) -> dict[str, float | NA]:
    """``{name_n_excluded, name}``: the mean of ``per_trial`` over the trials with novelty where it is defined
    (not NaN), and how many trials with novelty were left out; N/A naming the trials when all of them are."""
    novel_trials = flat.has_novelty
    usable = novel_trials & ~np.isnan(per_trial)
    out: dict[str, float | NA] = {f"{name}_n_excluded": int((novel_trials & ~usable).sum())}
    if not usable.any():
        novel_ids = [flat.ids[i] for i in np.flatnonzero(novel_trials)]
        listed = ", ".join(novel_ids[:10]) + (f" and {len(novel_ids) - 10} more" if len(novel_ids) > 10 else "")
        out[name] = NA(f"every trial with novelty is excluded: {excluded} (trials {listed})")
    else:
        out[name] = float(per_trial[usable].mean())
    return out


@OND.family(
    *(
        spec
        for prefix, condition, title in (
            ("m3", "system detection", "M3: novelty reaction performance (top-{k})"),
            ("m4", "given detection", "M4: novelty reaction performance, given detection (top-{k})"),
        )
        for k in TOP_K
        for spec in (
            OND.spec(
                f"{prefix}_nrp_top{k}",
                True,
                (0.0, _INF),
                description=f"{prefix.upper()}: 100 x agent post-novelty top-{k} / baseline pre-novelty top-{k}, "
                f"mean over trials with novelty ({condition})",
                title=title.format(k=k),
            ),
            OND.spec(
                f"{prefix}_nrp_top{k}_n_excluded",
                None,
                (0.0, _INF),
                description=f"trials with novelty left out of {prefix}_nrp_top{k} (baseline pre-novelty top-{k} "
                "accuracy 0)",
            ),
        )
    ),
    needs=_NEEDS,
    na=(NO_NOVELTY,),
    na_names=lambda options, **_: tuple(f"{options.nrp_prefix}_nrp_top{k}" for k in TOP_K),
)
def _novelty_reaction(flat: FlatTrials, baseline: FlatTrials, options: ProgramOptions) -> dict[str, float | NA]:
    """NRP = 100 P_agent / P_pre,baseline per trial with novelty, P top-k accuracy; P_agent on ``[red_light:]``
    (``nrp_window="post"``, sail-on-client ``m_nrp``) or on the last ``asymptotic_width`` samples
    (``"asymptotic"``), P_pre,baseline on ``[:red_light]``. Reported as M3 under the system condition, M4 when
    the red light is given. A trial whose baseline P_pre is 0 (or empty) is left out (the reference divides by 0)."""
    if options.nrp_window == "post":
        window = (flat.post_start, flat.ends)
    else:
        window = (flat.asymptotic_start(options.asymptotic_width), flat.ends)
    out: dict[str, float | NA] = {}
    for k in TOP_K:
        nrp = 100.0 * ratio_or_nan(
            flat.topk_accuracy(k, *window), baseline.topk_accuracy(k, flat.starts, flat.post_start)
        )
        out.update(
            _over_novel_trials(
                flat,
                f"{options.nrp_prefix}_nrp_top{k}",
                nrp,
                f"baseline top-{k} accuracy before the red light is 0 (or there is no pre-novelty sample)",
            )
        )
    return out


# The agent is the baseline: M5 = 0.5 and M6 = 1 on every trial by construction, not a measurement.
def _same_agent_rule(name: str) -> NAIf:
    return NAIf(
        SAME_AGENT_REASON, lambda flat, baseline, **_: _same_agent(flat, baseline), names=(name, f"{name}_n_excluded")
    )


@OND.family(
    OND.spec(
        "m5_opti_top1",
        True,
        (0.0, 1.0),
        title="M5: overall performance task improvement (top-1)",
        description="M5: agent post top-1 / (agent post top-1 + baseline post top-1), mean over trials with novelty; "
        "0.5 = parity",
    ),
    OND.spec(
        "m5_opti_top1_n_excluded",
        None,
        (0.0, _INF),
        description="trials with novelty left out of m5_opti_top1 (undefined ratio)",
    ),
    needs=_NEEDS,
    na=(NO_NOVELTY, _same_agent_rule("m5_opti_top1")),
    na_names=lambda **_: ("m5_opti_top1",),
)
def _opti(flat: FlatTrials, baseline: FlatTrials, options: ProgramOptions) -> dict[str, float | NA]:
    """M5 (OPTI) = P_post,agent / (P_post,agent + P_post,baseline) per trial with novelty, top-1 accuracy on
    ``[red_light:]``; 0.5 = parity with the baseline."""
    post = (flat.post_start, flat.ends)
    agent_post, baseline_post = flat.topk_accuracy(1, *post), baseline.topk_accuracy(1, *post)
    return _over_novel_trials(
        flat,
        "m5_opti_top1",
        ratio_or_nan(agent_post, agent_post + baseline_post),
        "agent and baseline both have top-1 accuracy 0 after the red light",
    )


@OND.family(
    OND.spec(
        "m6_apti_top1",
        True,
        (0.0, _INF),
        title="M6: asymptotic performance task improvement (top-1)",
        description="M6: agent top-1 / baseline top-1 on the last asymptotic_width samples, mean over trials with "
        "novelty",
    ),
    OND.spec(
        "m6_apti_top1_n_excluded",
        None,
        (0.0, _INF),
        description="trials with novelty left out of m6_apti_top1 (undefined ratio)",
    ),
    needs=_NEEDS,
    na=(NO_NOVELTY, _same_agent_rule("m6_apti_top1")),
    na_names=lambda **_: ("m6_apti_top1",),
)
def _apti(flat: FlatTrials, baseline: FlatTrials, options: ProgramOptions) -> dict[str, float | NA]:
    """M6 (APTI) = P_agent / P_baseline per trial with novelty, top-1 accuracy on the last ``asymptotic_width``
    samples (the whole trial when it is shorter)."""
    asymptotic = (flat.asymptotic_start(options.asymptotic_width), flat.ends)
    return _over_novel_trials(
        flat,
        "m6_apti_top1",
        ratio_or_nan(flat.topk_accuracy(1, *asymptotic), baseline.topk_accuracy(1, *asymptotic)),
        f"baseline top-1 accuracy on the last {options.asymptotic_width} samples is 0",
    )
