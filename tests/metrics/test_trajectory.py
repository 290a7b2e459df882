"""Trajectory metrics against plain-loop reimplementations, scipy, sklearn and hand-computed cases."""

import math

import numpy as np
import pytest
import scipy.stats as st
from sklearn.metrics import roc_auc_score

import owl_eval.protocols.trajectory.metrics as T
from owl_eval.metrics.results import NA
from owl_eval.metrics.validation import MetricInputError
from owl_eval.protocols.trajectory.evaluation import trajectory_table_npz
from owl_eval.protocols.trajectory.metrics.table import REGISTRY, table_metric


# ---------------------------------------------------------------- data and plain-loop references
def make(seed=0, n_s=7, n_p=30, n_a=3, n_o=4):
    rng = np.random.default_rng(seed)
    true = rng.normal(size=(n_s, n_a, n_o, 2)).cumsum(2)
    pred = true[:, None] + rng.normal(size=(n_s, n_p, n_a, n_o, 2)) * np.linspace(0.3, 1.5, n_o)[:, None]
    mask = np.ones((n_s, n_a, n_o), bool)
    mask[0, 1, 2:] = False  # shorter agent
    mask[1, 2, :] = False  # absent agent
    mask[2, 0, 3:] = False
    mask[3, :, 1:] = False  # sample with one step only
    mask[4, 1, 0] = False  # gap at the start
    true[~mask] = np.nan  # masked steps hold NaN
    pred[np.broadcast_to(~mask[:, None], pred.shape[:-1])] = np.nan
    return true, pred, mask


def ref_agent(true, pred, mask, s, p, a, step_count):
    """(ADE, FDE) of one agent and prediction by a plain loop."""
    steps = [t for t in range(mask.shape[2]) if mask[s, a, t]]
    d = {t: math.hypot(*(true[s, a, t] - pred[s, p, a, t])) for t in steps}
    if step_count == "agent":
        return sum(d.values()) / len(steps), d[steps[-1]]
    n_max = max(int(mask[s, b].sum()) for b in range(mask.shape[1]))
    return sum(d.values()) / n_max, d.get(n_max - 1, 0.0)


def ref_joint(true, pred, mask, s, p, step_count):
    n_a, n_o = mask.shape[1:]
    agents = [a for a in range(n_a) if mask[s, a].any()]
    rms = {}
    for t in range(n_o):
        valid = [a for a in range(n_a) if mask[s, a, t]]
        sq = sum(float(((true[s, a, t] - pred[s, p, a, t]) ** 2).sum()) for a in valid)
        if step_count == "agent":
            if valid:
                rms[t] = math.sqrt(sq / len(valid))
        else:
            rms[t] = math.sqrt(sq / len(agents))
    if step_count == "agent":
        return sum(rms.values()) / len(rms), rms[max(rms)]
    n_max = max(int(mask[s, a].sum()) for a in range(n_a))
    return sum(rms[t] for t in range(n_o)) / n_max, rms[n_max - 1]


def ref_metric(true, pred, mask, which, joint, step_count="agent", preds=None, thr=2.0):
    n_s, n_p, n_a = pred.shape[:3]
    preds = range(n_p) if preds is None else preds
    vals = []
    for s in range(n_s):
        units = [None] if joint else [a for a in range(n_a) if mask[s, a].any()]
        if joint and not mask[s].any():
            continue
        if which == "miss" and joint:
            missed = any(
                all(ref_agent(true, pred, mask, s, p, a, step_count)[1] > thr for p in preds)
                for a in range(n_a)
                if mask[s, a].any()
            )
            vals.append(float(missed))
            continue
        for a in units:
            errs = [
                ref_joint(true, pred, mask, s, p, step_count)
                if joint
                else ref_agent(true, pred, mask, s, p, a, step_count)
                for p in preds
            ]
            ade_l, fde_l = [e[0] for e in errs], [e[1] for e in errs]
            vals.append(
                {
                    "ade": np.mean(ade_l),
                    "fde": np.mean(fde_l),
                    "min_ade": min(ade_l),
                    "min_fde": min(fde_l),
                    "miss": float(all(f > thr for f in fde_l)),
                }[which]
            )
    return sum(vals) / len(vals)


def scipy_kde(true, pred, mask, s, a=None):
    """(log p(truth), log p(each prediction)) with scipy, or None when scipy finds it singular."""
    m = mask[s] if a is None else mask[s, a]
    data = (pred[s][:, m] if a is None else pred[s, :, a][:, m]).reshape(pred.shape[1], -1)
    x = (true[s][m] if a is None else true[s, a][m]).reshape(-1)
    try:
        kde = st.gaussian_kde(data.T)
    except (np.linalg.LinAlgError, ValueError):
        return None
    return kde.logpdf(x[:, None])[0], kde.logpdf(data.T)


# ---------------------------------------------------------------- displacement metrics vs loops
@pytest.mark.parametrize("step_count", ["agent", "sample"])
@pytest.mark.parametrize("joint", [False, True])
def test_displacement_metrics_match_plain_loop(joint, step_count):
    true, pred, mask = make(1)
    kw = dict(joint=joint, step_count=step_count)
    assert T.ade(true, pred, mask, **kw) == pytest.approx(
        ref_metric(true, pred, mask, "ade", joint, step_count), rel=1e-12
    )
    assert T.fde(true, pred, mask, **kw) == pytest.approx(
        ref_metric(true, pred, mask, "fde", joint, step_count), rel=1e-12
    )
    assert T.min_ade(true, pred, mask, k=100, **kw) == pytest.approx(
        ref_metric(true, pred, mask, "min_ade", joint, step_count), rel=1e-12
    )
    assert T.min_fde(true, pred, mask, k=100, **kw) == pytest.approx(
        ref_metric(true, pred, mask, "min_fde", joint, step_count), rel=1e-12
    )
    for thr in (0.5, 1.0):
        assert T.miss_rate(true, pred, mask, threshold=thr, **kw) == pytest.approx(
            ref_metric(true, pred, mask, "miss", joint, step_count, thr=thr), rel=1e-12
        )


def test_k_subset_drawn_from_generator_as_permutation_prefix():
    true, pred, mask = make(2)
    idx = np.random.default_rng(5).permutation(pred.shape[1])[:4]
    expected = ref_metric(true, pred, mask, "min_ade", False, preds=list(idx))
    assert T.min_ade(true, pred, mask, k=4, rng=np.random.default_rng(5)) == pytest.approx(expected, rel=1e-12)
    expected = ref_metric(true, pred, mask, "ade", True, preds=list(idx))
    assert T.ade(true, pred, mask, joint=True, num_preds=4, rng=np.random.default_rng(5)) == pytest.approx(expected)
    with pytest.raises(MetricInputError, match="rng"):
        T.min_ade(true, pred, mask, k=4)


def test_horizon_series_matches_loop():
    true, pred, mask = make(3)
    got = T.displacement_by_step(true, pred, mask)
    for t in range(mask.shape[2]):
        d = [
            math.hypot(*(true[s, a, t] - pred[s, p, a, t]))
            for s in range(mask.shape[0])
            for a in range(mask.shape[1])
            if mask[s, a, t]
            for p in range(pred.shape[1])
        ]
        assert got[t] == pytest.approx(np.mean(d), rel=1e-12)


# ---------------------------------------------------------------- hand cases
def test_perfect_predictor_and_exact_threshold():
    true, pred, mask = make(4)
    perfect = np.repeat(true[:, None], 3, axis=1)
    assert T.ade(true, perfect, mask) == 0.0 and T.fde(true, perfect, mask, joint=True) == 0.0
    assert T.miss_rate(true, perfect, mask) == 0.0
    # one agent, final true (1, 3), final prediction (1, 5): exactly 2.0 m away -> not a miss
    t = np.array([[[[0.0, 0.0], [1.0, 3.0]]]])
    m = np.ones((1, 1, 2), bool)
    p = t[:, None].copy()
    p[0, 0, 0, 1] = [1.0, 5.0]
    assert T.miss_rate(t, p, m) == 0.0
    p[0, 0, 0, 1] = [1.0, 5.0 + 1e-9]
    assert T.miss_rate(t, p, m) == 1.0 and T.miss_rate(t, p, m, joint=True) == 1.0


def test_agents_of_different_lengths_hand_case():
    # agent 0: 4 valid steps, always 5 m off (3, 4); agent 1: 2 valid steps, 1 m off, NaN afterwards
    true = np.zeros((1, 2, 4, 2))
    pred = np.zeros((1, 1, 2, 4, 2))
    pred[0, 0, 0] = [3.0, 4.0]
    pred[0, 0, 1] = [0.0, 1.0]
    mask = np.array([[[True] * 4, [True, True, False, False]]])
    true[0, 1, 2:] = np.nan
    pred[0, 0, 1, 2:] = np.nan
    assert T.ade(true, pred, mask) == pytest.approx((5 + 1) / 2)  # own step counts
    assert T.fde(true, pred, mask) == pytest.approx((5 + 1) / 2)  # own last steps
    # General-Framework: agent 1 divided by 4 steps, FDE read at index 3 where it is zero-filled
    assert T.ade(true, pred, mask, step_count="sample") == pytest.approx((5 + 2 / 4) / 2)
    assert T.fde(true, pred, mask, step_count="sample") == pytest.approx((5 + 0) / 2)
    # joint: steps 0-1 RMS sqrt((25 + 1) / 2), steps 2-3 only agent 0 -> 5
    assert T.ade(true, pred, mask, joint=True) == pytest.approx((2 * math.sqrt(13) + 10) / 4)
    assert T.fde(true, pred, mask, joint=True) == pytest.approx(5.0)
    # General-Framework joint: always divided by the 2 agents of the sample
    assert T.ade(true, pred, mask, joint=True, step_count="sample") == pytest.approx(
        (2 * math.sqrt(13) + 2 * math.sqrt(12.5)) / 4
    )
    assert T.fde(true, pred, mask, joint=True, step_count="sample") == pytest.approx(math.sqrt(12.5))


def test_collision_hand_case():
    true = np.array([[[[0.0, 0.0], [0.0, 0.0]], [[1.0, 0.0], [1.0, 0.0]]]])  # [1, 2 agents, 2 steps, 2]
    pred = np.repeat(true[:, None], 2, axis=1)
    pred[0, 0, 0, 1] = [0.7, 0.0]  # prediction 0 of agent 0 comes 0.3 m from agent 1
    pred[0, 1, 0] = [0.0, -5.0]  # prediction 1 of agent 0 far away
    mask = np.ones((1, 2, 2), bool)
    # marginal: agent 0 collides in 1 of 2 predictions, agent 1 (1 m from agent 0's truth) never
    assert T.collision_rate(true, pred, mask, radius=0.2) == pytest.approx(0.25)
    assert T.collision_rate(true, pred, mask, joint=True, radius=0.2) == pytest.approx(0.5)
    assert T.collision_rate(true, pred, mask, radius=0.1) == 0.0  # discs 0.2 apart need 0.3 > 0.2
    mask[0, 1, 1] = False  # agent 1 gone at that step
    assert T.collision_rate(true, pred, mask, radius=0.2) == 0.0


# ---------------------------------------------------------------- KDE metrics vs scipy
def test_truth_only_kde_gives_the_truth_density_of_the_full_kde():
    """kde_nll evaluates the KDE at the truth only; the table evaluates it at the truth and every prediction.
    Both must give the same truth density, N/A pattern (a singular KDE) and overflow flags."""
    from owl_eval.protocols.trajectory.metrics.kde import kde_log_probs

    true, pred, mask = make(7, n_s=6, n_p=40)
    pred[5, :, 0] = pred[5, 0, 0]  # identical predictions: singular for agent 0 and jointly
    for joint in (False, True):
        full_true, full_pred, full_ok, full_over = kde_log_probs(true, pred, mask, joint=joint, return_overflow=True)
        only_true, only_pred, only_ok, only_over = kde_log_probs(
            true, pred, mask, joint=joint, return_overflow=True, truth_only=True
        )
        assert only_pred is None and full_pred is not None
        np.testing.assert_array_equal(only_ok, full_ok)
        np.testing.assert_array_equal(only_over, full_over)
        assert not only_ok.all()  # the singular case is there
        np.testing.assert_allclose(only_true[only_ok], full_true[full_ok], rtol=1e-12, atol=1e-12)


def test_kde_nll_ml_ece_brier_match_scipy_loop():
    true, pred, mask = make(5, n_s=6, n_p=40)
    pred[5, :, 0] = pred[5, 0, 0]  # identical predictions: singular for agent 0 and jointly
    for joint in (False, True):
        nll, ml_a, ml_f, brier, m_vals, n_na = [], [], [], [], [], 0
        for s in range(pred.shape[0]):
            for a in [None] if joint else range(3):
                if not (mask[s] if a is None else mask[s, a]).any():
                    continue
                r = scipy_kde(true, pred, mask, s, a)
                if r is None:
                    n_na += 1
                    continue
                lt, lp = r
                nll.append(-lt)
                best = int(np.argmax(lp))
                err = [
                    ref_joint(true, pred, mask, s, p, "agent")
                    if joint
                    else ref_agent(true, pred, mask, s, p, a, "agent")
                    for p in range(pred.shape[1])
                ]
                ml_a.append(err[best][0])
                ml_f.append(err[best][1])
                fdes = [e[1] for e in err]
                pb = np.exp(lp - lp.max()) / np.exp(lp - lp.max()).sum()
                brier.append(min(fdes) + (1 - pb[int(np.argmin(fdes))]) ** 2)
                m_vals.append(np.mean(lp > lt))
        assert n_na >= 1
        assert T.kde_nll(true, pred, mask, joint=joint) == pytest.approx(np.mean(nll), abs=1e-8)
        assert T.ml_ade(true, pred, mask, joint=joint) == pytest.approx(np.mean(ml_a), rel=1e-12)
        assert T.ml_fde(true, pred, mask, joint=joint) == pytest.approx(np.mean(ml_f), rel=1e-12)
        assert T.brier_min_fde(true, pred, mask, joint=joint) == pytest.approx(np.mean(brier), abs=1e-8)
        levels = np.linspace(0, 1, 201)
        ece = np.mean([abs(np.mean([m > k for m in m_vals]) + k - 1) for k in levels])
        assert T.kde_ece(true, pred, mask, joint=joint) == pytest.approx(ece, abs=1e-12)
        res = T.trajectory_table(true, pred, mask, rng=np.random.default_rng(0))
        assert res[f"kde_nll_na_count_{'joint' if joint else 'marginal'}"] == n_na
    assert res["kde_nll_na_count"] == 1  # one sample (5) has a singular KDE


def test_kde_log_probs_match_scipy_to_1e8():
    true, pred, mask = make(6, n_s=5, n_p=35)
    lt, lp, ok = T.kde_log_probs(true, pred, mask)
    for s in range(5):
        for a in range(3):
            if mask[s, a].any():
                ref_t, ref_p = scipy_kde(true, pred, mask, s, a)
                assert abs(lt[s, a] - ref_t) < 1e-8 and np.abs(lp[s, :, a] - ref_p).max() < 1e-8


def test_all_identical_predictions_are_na_not_crash():
    true, pred, mask = make(7, n_s=5)
    pred[:] = pred[:, :1]
    assert isinstance(T.kde_nll(true, pred, mask), NA)
    res = T.trajectory_table(true, pred, mask, rng=np.random.default_rng(0))
    assert "kde_nll_marginal" in res.na and res["kde_nll_na_count_marginal"] == mask.any(-1).sum()
    assert res["ade_marginal"] == pytest.approx(T.ade(true, pred, mask))


def test_given_log_probs_replace_the_kde():
    true, pred, mask = make(8, n_s=5, n_p=5)
    lp = np.random.default_rng(0).normal(size=(5, 6, 3))
    valid = mask.any(-1)
    assert T.kde_nll(true, pred, mask, log_probs=lp) == pytest.approx(-lp[:, 5][valid].mean())
    joint = np.array([lp[s, 5][valid[s]].sum() for s in range(5)])
    assert T.kde_nll(true, pred, mask, joint=True, log_probs=lp) == pytest.approx(-joint.mean())


# ---------------------------------------------------------------- class metrics
def test_auc_with_ties_matches_sklearn():
    rng = np.random.default_rng(0)
    y = np.array([0, 1, 2, 1, 0, 2, 2, 1, 0, 0, 1, 2])
    p = rng.dirichlet(np.ones(3), size=len(y)).round(1)  # rounding creates ties
    p[:, 2] = 1 - p[:, 0] - p[:, 1]
    p = np.clip(p, 0, 1)
    p /= p.sum(1, keepdims=True)
    onehot = np.eye(3)[y]
    assert T.auc(onehot, p) == pytest.approx(roc_auc_score(y, p, average="weighted", multi_class="ovr"), rel=1e-12)
    yb = np.array([0, 1, 1, 0, 1, 0])
    pb = np.array([0.3, 0.3, 0.8, 0.1, 0.5, 0.5])
    both = np.stack([1 - pb, pb], 1)
    assert T.auc(np.eye(2)[yb], both) == pytest.approx(roc_auc_score(yb, pb))
    assert T.auc(np.eye(2)[yb], both, score="general_framework") == pytest.approx(roc_auc_score(yb, pb))


def test_class_ece_hand_case():
    # flattened predictions sorted: 0.2 (0), 0.4 (1) | 0.6 (0), 0.8 (1): both bins |0.5 - mean| = 0.2
    p_true = np.array([[1, 0], [0, 1]])
    p_pred = np.array([[0.8, 0.2], [0.6, 0.4]])
    assert T.class_ece(p_true, p_pred, n_bins=2) == pytest.approx(0.2)
    assert T.class_ece(p_true, p_pred, n_bins=1) == pytest.approx(0.0)  # mean 0.5 vs mean 0.5


def test_tnr_pr_hand_case():
    # positives (accepted) scored 0.6 and 0.9 -> threshold 0.6; negatives below it: 0.1, 0.5 (0.6 is not)
    acc = np.array([1, 1, 0, 0, 0, 0])
    p = np.array([0.6, 0.9, 0.1, 0.5, 0.7, 0.6])
    assert T.tnr_pr(np.stack([acc, 1 - acc], 1), np.stack([p, 1 - p], 1)) == pytest.approx(0.5)
    assert T.tnr_pr(acc, p) == pytest.approx(0.5)


# ---------------------------------------------------------------- table, streaming, registry, errors
def test_chunked_npz_equals_in_memory(tmp_path):
    true, pred, mask = make(9, n_s=11, n_p=30)
    pred[4, :, 2] = pred[4, :1, 2]
    lp_rng = np.random.default_rng(3)
    path = tmp_path / "rec.npz"
    np.savez(path, Path_true=true[:, None], Path_pred=pred, Pred_steps=mask)
    kw = dict(k_values=(5, 50), step_count="agent")
    full = T.trajectory_table(true, pred, mask, rng=np.random.default_rng(1), chunk_size=None, **kw)
    streamed = trajectory_table_npz(path, rng=np.random.default_rng(1), chunk_size=3, **kw)
    assert set(full.values) == set(streamed.values) and full.na == streamed.na
    for k, v in full.values.items():
        assert streamed.values[k] == pytest.approx(v, rel=1e-12, abs=1e-12), k
    for k, s in full.series.items():
        np.testing.assert_allclose(streamed.series[k].values, s.values, rtol=1e-12)
    np.savez_compressed(
        tmp_path / "c.npz", Path_true=true[:, None], Path_pred=pred, Pred_steps=mask, LP=lp_rng.normal(size=(11, 31, 3))
    )
    res = trajectory_table_npz(tmp_path / "c.npz", rng=np.random.default_rng(1), chunk_size=4, log_prob_key="LP")
    assert res["kde_nll_na_count"] == 0


def test_user_registered_metric_appears_in_table():
    @table_metric("max_fde_marginal", latex="max FDE")
    def _max_fde(ctx, idx, opts):
        _, fde, valid = ctx.errors(False)
        return np.array([fde.max(1)[valid].sum(), valid.sum()])

    try:
        true, pred, mask = make(10)
        res = T.trajectory_table(true, pred, mask, rng=np.random.default_rng(0), kde=False, chunk_size=2)
        expected = np.mean(
            [
                max(ref_agent(true, pred, mask, s, p, a, "agent")[1] for p in range(pred.shape[1]))
                for s in range(7)
                for a in range(3)
                if mask[s, a].any()
            ]
        )
        assert res["max_fde_marginal"] == pytest.approx(expected)
        assert "kde_nll_marginal" not in res
    finally:
        REGISTRY.pop()


def test_specs_declared_and_unique():
    names = [s.name for s in T.SPECS]
    assert len(names) == len(set(names))
    for n in ("ade_marginal", "min_ade_{k}_joint", "fde_{k}_marginal", "kde_nll_na_count", "kde_ece_joint", "auc"):
        assert n in names  # per-K names are declared once, as templates
    concrete = [s.name for s in T.specs_for((20, 50))]
    assert "min_ade_20_joint" in concrete and "fde_50_marginal" in concrete and "min_ade_{k}_joint" not in concrete
    template = next(s for s in T.SPECS if s.name == "min_ade_{k}_marginal")
    assert template.for_k(7).name == "min_ade_7_marginal" and template.for_k(7).higher_is_better is False
    assert all(s.protocol == "trajectory" for s in T.SPECS)


def test_bad_shapes_name_the_array():
    true, pred, mask = make(11)
    with pytest.raises(MetricInputError, match=r"mask.*\[7, 3, 4\]"):
        T.ade(true, pred, mask[:, :2])
    with pytest.raises(MetricInputError, match="true"):
        T.ade(true[:, :, :3], pred, mask)
    bad = pred.copy()
    bad[0, 0, 0, 0, 0] = np.nan
    with pytest.raises(MetricInputError, match="pred: non-finite"):
        T.ade(true, bad, mask)
    with pytest.raises(MetricInputError, match="step_count"):
        T.ade(true, pred, mask, step_count="both")


# ---------------------------------------------------------------- extreme inputs: N/A, never inf or 1.8e308
def _one_far_prediction():
    """One scene, one agent, one step, truth at the origin; predictions 1..7 m away along x, and one at
    (1e308, 1e308): finite, but its squared distance overflows float64."""
    true = np.zeros((1, 1, 1, 2))
    pred = np.zeros((1, 8, 1, 1, 2))
    pred[0, :7, 0, 0, 0] = np.arange(1.0, 8.0)
    pred[0, 7, 0, 0] = 1e308
    return true, pred, np.ones((1, 1, 1), bool)


def test_overflowing_predictions_are_na_with_reason():
    import warnings

    true, pred, mask = _one_far_prediction()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and no RuntimeWarning reaches the console
        res = T.trajectory_table(true, pred, mask, rng=np.random.default_rng(0), k_values=(8,))
        ade = T.ade(true, pred, mask)
        by_step = T.displacement_by_step(true, pred, mask)
        nll = T.kde_nll(true, pred, mask)
    for name in (
        "ade_marginal",
        "fde_marginal",
        "ade_joint",
        "fde_joint",
        "ade_8_marginal",
        "displacement_by_step_marginal",
    ):
        assert "overflow" in res.na[name], name
    for name in ("kde_nll_marginal", "kde_ece_marginal", "ml_ade_marginal", "brier_min_fde_joint"):
        assert "1 KDE(s) overflow" in res.na[name], name
    assert not any(abs(v) > 1e300 for v in res.values.values())
    assert "displacement_by_step_marginal" not in res.series
    # well defined despite the far prediction: the best is 1 m away, which is under the 2 m miss threshold
    assert res["min_ade_8_marginal"] == 1.0 and res["min_fde_8_joint"] == 1.0 and res["miss_rate_marginal"] == 0.0
    assert res["kde_nll_na_count_marginal"] == 0  # an overflow is not a singular KDE
    assert isinstance(ade, NA) and isinstance(by_step, NA) and isinstance(nll, NA) and "overflow" in nll.reason


def test_zero_density_of_the_truth_is_na_not_inf():
    true, pred, mask = _one_far_prediction()
    pred[0, 7, 0, 0] = [8.0, 0.0]
    log_probs = np.full((1, 9, 1), -1.0)
    log_probs[0, 8, 0] = -np.inf  # the predictor gives the truth probability 0
    value = T.kde_nll(true, pred, mask, log_probs=log_probs)
    assert isinstance(value, NA) and "-inf" in value.reason
