"""Per-chunk computation context of the trajectory metrics: cached errors and KDE, additive states.

Every metric reduces a chunk of samples to a small float vector (its *state*) that adds up exactly
across chunks: ``[numerator, denominator]`` for averages, ``[count]`` for counts, level counts for the
KDE ECE, per-step sums and counts for the horizon series. :func:`finalize_ratio` and friends turn the
summed state into the reported value (or :class:`NA` with the reason). So a chunked computation
equals the in-memory one (up to the order of floating-point additions).

Extreme inputs: a value that is not finite after the reduction (errors of predictions at 1e308 square
beyond float64's range) is N/A with the reason, never inf or a clipped 1.8e308. The KDE states carry a
count of overflowing KDEs as their last element, and any such KDE makes the KDE metrics N/A.
"""

from __future__ import annotations

import numpy as np

from owl_eval.metrics.results import NA, Series
from owl_eval.metrics.validation import MetricInputError, as_array
from owl_eval.protocols.trajectory.metrics.core import agent_errors, collision_counts, joint_errors, step_errors
from owl_eval.protocols.trajectory.metrics.kde import kde_log_probs

ECE_LEVELS = np.linspace(0.0, 1.0, 201)
OVERFLOW_REASON = (
    "not a finite number: the errors overflow float64 (coordinates or predictions too large, e.g. "
    "1e308); a value of that size is not a measurement"
)
KDE_OVERFLOW_REASON = (
    "{n} KDE(s) overflow float64 (predictions spread over ~1e150 or more, e.g. 1e308); the KDE metrics are not computed"
)


class TrajContext:
    """Validated arrays of one chunk of samples plus lazily computed, cached intermediate results."""

    def __init__(
        self,
        true,
        pred,
        mask,
        *,
        step_count="agent",
        log_probs=None,
        joint_log_probs=None,
        singular_rtol=1e-11,
        full_kde=False,
    ):
        self.true, self.pred, self.mask = true, pred, mask
        # The NLL needs the truth's density only; the table, which also reports ECE/ML/Brier, shares the
        # full KDE (truth and every prediction) between them instead.
        self.full_kde = full_kde
        self.step_count = step_count
        self.singular_rtol = singular_rtol
        n_s, n_p, n_a = pred.shape[:3]
        self.n_p = n_p
        self.log_probs = None if log_probs is None else as_array("log_probs", log_probs, shape=(n_s, n_p + 1, n_a))
        self.joint_log_probs = (
            None if joint_log_probs is None else as_array("joint_log_probs", joint_log_probs, shape=(n_s, n_p + 1))
        )
        self._cache = {}

    def _cached(self, key, fn):
        if key not in self._cache:
            self._cache[key] = fn()
        return self._cache[key]

    # ---- displacement errors -------------------------------------------------------------------
    def errors(self, joint):
        """``(ade[S, P(, A)], fde[S, P(, A)], valid[S(, A)])`` per prediction."""
        fn = joint_errors if joint else agent_errors
        return self._cached(("err", joint), lambda: fn(self.true, self.pred, self.mask, step_count=self.step_count))

    def agent_valid(self):
        return self.mask.any(-1)

    def sample_valid(self):
        return self.mask.any(-1).any(-1)

    # ---- densities -----------------------------------------------------------------------------
    def kde(self, joint):
        """``(log_true, log_pred, ok)`` from the predictor's log-probabilities or the batched KDE."""
        return self._cached(("kde", joint), lambda: self._kde(joint))[:3]

    def kde_overflow(self, joint):
        """Boolean per agent (joint: per sample): its KDE overflowed float64 (never with given log-probs)."""
        return self._cached(("kde", joint), lambda: self._kde(joint))[3]

    def _kde(self, joint):
        valid = self.sample_valid() if joint else self.agent_valid()
        if joint and self.joint_log_probs is not None:
            lp = self.joint_log_probs
        elif self.log_probs is None:
            return kde_log_probs(
                self.true, self.pred, self.mask, joint=joint, singular_rtol=self.singular_rtol, return_overflow=True
            )
        elif joint:  # joint density of independently predicted agents: sum over valid agents
            lp = np.where(self.agent_valid()[:, None, :], self.log_probs, 0.0).sum(-1)
        else:
            lp = self.log_probs
        log_pred, log_true = lp[:, : self.n_p], lp[:, self.n_p]
        ok = valid & ~np.isnan(log_true) & ~np.isnan(log_pred).any(1)
        if (valid & ~ok).any():
            idx = tuple(int(i) for i in np.argwhere(valid & ~ok)[0])
            raise MetricInputError(f"log_probs: NaN for a valid {'sample' if joint else '(sample, agent)'} {idx}")
        return log_true, log_pred, ok, np.zeros_like(ok)

    def kde_truth(self, joint):
        """``(log_true, ok, overflow)``: from the full KDE when it is (or will be) computed anyway, else
        from a KDE evaluated at the truth only."""
        if (
            self.full_kde
            or ("kde", joint) in self._cache
            or self.log_probs is not None
            or (joint and self.joint_log_probs is not None)
        ):
            log_true, _, ok, overflow = self._cached(("kde", joint), lambda: self._kde(joint))
            return log_true, ok, overflow
        log_true, _, ok, overflow = self._cached(
            ("kde_truth", joint),
            lambda: kde_log_probs(
                self.true,
                self.pred,
                self.mask,
                joint=joint,
                singular_rtol=self.singular_rtol,
                return_overflow=True,
                truth_only=True,
            ),
        )
        return log_true, ok, overflow

    def _with_overflow(self, state, joint):
        """A KDE state followed by the number of overflowing KDEs (see :func:`finalize_kde_ratio`)."""
        return np.concatenate([state, [self.kde_overflow(joint).sum()]]).astype(float)

    # ---- additive states -----------------------------------------------------------------------
    def mean_error_state(self, kind, joint, idx=None, reduce="mean"):
        """``[sum over valid agents (samples) of mean/min over predictions in idx, count]``."""
        ade, fde, valid = self.errors(joint)
        err = ade if kind == "ade" else fde
        if idx is not None:
            err = err[:, idx]
        per = err.min(1) if reduce == "min" else err.mean(1)
        return np.array([per[valid].sum(), valid.sum()], float)

    def miss_state(self, joint, threshold, idx=None):
        """Agent missed: every prediction's FDE > threshold; joint: a sample with a missed agent."""
        _, fde, valid = self.errors(False)
        if idx is not None:
            fde = fde[:, idx]
        missed = (fde > threshold).all(1) & valid
        if joint:
            svalid = self.sample_valid()
            return np.array([missed.any(-1)[svalid].sum(), svalid.sum()], float)
        return np.array([missed.sum(), valid.sum()], float)

    def ml_state(self, kind, joint):
        """Error of the most likely prediction (argmax of the density) over non-singular KDEs."""
        ade, fde, _ = self.errors(joint)
        err = ade if kind == "ade" else fde
        _, log_pred, ok = self.kde(joint)
        best = np.argmax(np.nan_to_num(log_pred, nan=-np.inf), axis=1)
        chosen = np.take_along_axis(err, best[:, None], axis=1)[:, 0]
        return self._with_overflow([chosen[ok].sum(), ok.sum()], joint)

    def nll_state(self, joint):
        log_true, ok, overflow = self.kde_truth(joint)
        return np.array([-log_true[ok].sum(), ok.sum(), overflow.sum()], dtype=float)

    def ece_state(self, joint):
        """Counts of ``m > k/200`` for the 201 levels, the number of KDEs (ECE_traj_*.py), then the number
        of overflowing KDEs."""
        log_true, log_pred, ok = self.kde(joint)
        if joint:
            m = (log_pred[ok] > log_true[ok][:, None]).mean(1)
        else:
            lp = log_pred.transpose(0, 2, 1)[ok]  # [n_ok, P]
            m = (lp > log_true[ok][:, None]).mean(1)
        counts = (m[None, :] > ECE_LEVELS[:, None]).sum(1)
        return self._with_overflow(np.concatenate([counts, [ok.sum()]]), joint)

    def brier_state(self, joint):
        """minFDE + (1 - p_best)^2, p = softmax over the predictions of their log density."""
        _, fde, _ = self.errors(joint)
        _, log_pred, ok = self.kde(joint)
        lp = np.nan_to_num(log_pred, nan=0.0)
        lp = lp - lp.max(1, keepdims=True)
        prob = np.exp(lp)
        prob /= prob.sum(1, keepdims=True)
        best = np.argmin(fde, axis=1)
        f = np.take_along_axis(fde, best[:, None], axis=1)[:, 0]
        p = np.take_along_axis(prob, best[:, None], axis=1)[:, 0]
        val = f + (1.0 - p) ** 2
        return self._with_overflow([val[ok].sum(), ok.sum()], joint)

    def na_state(self, which):
        """Number of singular KDEs: ``marginal`` (agents), ``joint`` (samples), ``any`` (samples); an
        overflowing KDE is not singular (it makes the KDE metrics N/A with its own reason)."""
        if which in ("marginal", "any"):
            _, _, ok_m = self.kde(False)
            bad_m = self.agent_valid() & ~ok_m & ~self.kde_overflow(False)
            if which == "marginal":
                return np.array([bad_m.sum()], float)
        _, _, ok_j = self.kde(True)
        bad_j = self.sample_valid() & ~ok_j & ~self.kde_overflow(True)
        if which == "joint":
            return np.array([bad_j.sum()], float)
        return np.array([(bad_m.any(-1) | bad_j).sum()], float)

    def collision_state(self, joint, radius):
        hit, valid = self._cached(
            ("col", joint, radius),
            lambda: collision_counts(self.true, self.pred, self.mask, joint=joint, radius=radius),
        )
        per = hit.mean(1)
        return np.array([per[valid].sum(), valid.sum()], float)

    def horizon_state(self, joint):
        s, c = step_errors(self.true, self.pred, self.mask, joint=joint)
        return np.concatenate([s, c])


# ---- finalizers: summed state -> value -----------------------------------------------------------
def _finite(value, reason=OVERFLOW_REASON):
    return float(value) if np.isfinite(value) else NA(reason)


def finalize_ratio(state, what="agents"):
    num, den = state
    if den == 0:
        return NA(f"no valid {what} to average over")
    with np.errstate(over="ignore", invalid="ignore"):
        return _finite(num / den)


def finalize_kde_ratio(state):
    """``[numerator, number of KDEs(, number of overflowing KDEs)]`` -> the average or N/A with the reason."""
    num, den, *overflow = state
    if overflow and overflow[0] > 0:
        return NA(KDE_OVERFLOW_REASON.format(n=int(overflow[0])))
    if den == 0:
        return NA("no non-singular KDE (every KDE had too few or identical predictions, or no valid agent)")
    with np.errstate(over="ignore", invalid="ignore"):
        return _finite(
            num / den,
            "not a finite number: a log-probability of the truth is -inf (zero density) or "
            "the errors overflow float64 (values too large, e.g. 1e308)",
        )


def finalize_count(state):
    return float(state[0])


def finalize_ece(state):
    """(1/201) sum_k | #(m > k/200) / n + k/200 - 1 |  (ECE_traj_indep.py / ECE_traj_joint.py).

    ``state``: the 201 level counts, ``n``, then the number of overflowing KDEs."""
    counts, n, overflow = state[:-2], state[-2], state[-1]
    if overflow > 0:
        return NA(KDE_OVERFLOW_REASON.format(n=int(overflow)))
    if n == 0:
        return NA("no non-singular KDE to calibrate")
    frac = counts / n
    return float(np.abs(frac - (1.0 - ECE_LEVELS)).mean())


def finalize_horizon(state):
    """Per-step mean error; steps are 1-based future steps, steps without data are left out."""
    half = len(state) // 2
    s, c = state[:half], state[half:]
    keep = c > 0
    if not np.isfinite(s[keep]).all():
        return NA(OVERFLOW_REASON)
    return Series(np.arange(1, half + 1)[keep], s[keep] / c[keep])
