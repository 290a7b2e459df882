"""Trajectory-prediction scenario (General-Framework's metric table, METRICS.md section 3).

The domain gives a training and a test split of scenes. The predictor is fitted once on the training split
(``fit(train, rng=...)``, it may ignore it), then sees the test scenes in batches of ``batch_size``: only the
observed steps ``history[S, N_A, N_I, 2]`` (NaN = not observed), and returns ``num_preds`` futures per agent
``[S, N_P, N_A, N_O, 2]``. Outputs are checked (shape; finite for every agent observed at the last history
step, padding agents may be NaN) and a bad one stops the run with :class:`AgentOutputError`.
A predictor with ``log_prob(history, futures, dt=...)`` supplies its own densities (of its predictions and of
the truth), used instead of the KDE. The classification-type scenario (turn left / straight / right / stop)
is described in :mod:`owl_eval.protocols.trajectory.classes`.

Generators: the run's generator is spawned into data, fit, predict and metric generators, so swapping
the predictor never changes the data and the same seed gives the same numbers.
"""

from __future__ import annotations

import numpy as np
from tqdm.auto import tqdm

from owl_eval.protocols.base import AgentOutputError, ProtocolDriver, keep_partial, real_array
from owl_eval.protocols.interfaces import Method, choices, no_baseline, require_interface
from owl_eval.protocols.trajectory.classes import CLASS_NAMES, class_probabilities_from_futures, turn_classes
from owl_eval.protocols.trajectory.record import TrajectoryRecord
from owl_eval.typed import as_float, as_int

# What the protocol calls on the predictor, in the order a mismatch is reported.
PREDICTOR_METHODS = (
    Method(
        "predict",
        "predict(history, *, pred_len, num_preds, dt, rng)",
        args=1,
        keywords=("pred_len", "num_preds", "dt", "rng"),
    ),
    Method("fit", "fit(train, *, rng)", args=1, keywords=("rng",)),
)


class TrajectoryDriver(ProtocolDriver):
    name = "trajectory"

    def __init__(
        self,
        num_preds: int = 20,
        batch_size: int = 128,
        stop_distance: float = 0.5,
        turn_degrees: float = 20.0,
        class_smoothing: float = 0.5,
        plot_scenes: int = 4,
    ):
        self.num_preds = as_int(num_preds, "protocol.num_preds", minimum=1)
        self.batch_size = as_int(batch_size, "protocol.batch_size", minimum=1)
        self.stop_distance = as_float(stop_distance, "protocol.stop_distance", minimum=0.0)
        self.turn_degrees = as_float(turn_degrees, "protocol.turn_degrees", minimum=0.0, maximum=180.0)
        self.class_smoothing = as_float(class_smoothing, "protocol.class_smoothing", minimum=0.0)
        self.plot_scenes = as_int(plot_scenes, "protocol.plot_scenes", minimum=0)

    # -- checks before any run exists ------------------------------------------------------------------
    def check(self, *, domain, agent, baseline=None) -> None:
        """No baseline; the agent is a trajectory predictor; the domain's data are there (``domain.check()``:
        ETH/UCY reads its files once, so a missing folder or a broken file stops the job here)."""
        no_baseline(baseline, "trajectory")
        require_interface(
            agent, PREDICTOR_METHODS, role="agent", kind="a trajectory predictor", choose=choices("agent", "trajectory")
        )
        require_interface(
            domain,
            (Method("load", "load(rng)", args=1),),
            role="domain",
            kind="a trajectory domain",
            choose="domain=<option> (crowd_sim, eth_ucy, trajectory_files)",
        )
        if callable(getattr(domain, "check", None)):
            domain.check()

    def evaluation_context(self) -> dict:
        """``metrics.k_values`` must not exceed ``num_preds``, ``tnr_pr_positive`` must be a behaviour class;
        the figures show ``plot_scenes`` example scenes."""
        return {"num_preds": self.num_preds, "class_names": CLASS_NAMES, "plot_scenes": self.plot_scenes}

    # -- running ---------------------------------------------------------------------------------------
    def run(self, *, domain, agent, rng, baseline=None, progress=True) -> TrajectoryRecord:
        data_rng, fit_rng, predict_rng, metric_rng = rng.spawn(4)
        splits = domain.load(data_rng)
        test = splits.test
        metric_seed = int(metric_rng.integers(2**62))
        agent.fit(splits.train, rng=fit_rng)
        parts: list[TrajectoryRecord] = []
        starts = range(0, test.num_scenes, self.batch_size)
        with keep_partial(lambda: TrajectoryRecord.concatenate(parts) if parts else None) as unit_done:
            for lo in tqdm(starts, desc="trajectory batches", disable=not progress, leave=True):
                batch = test.subset(slice(lo, lo + self.batch_size))
                parts.append(self._run_batch(agent, batch, lo, predict_rng, metric_seed))
                unit_done()
        return TrajectoryRecord.concatenate(parts)

    def _run_batch(self, agent, batch, first_scene: int, rng, metric_seed: int) -> TrajectoryRecord:
        where = f"predictor output for scenes {first_scene}..{first_scene + batch.num_scenes - 1}"
        history = batch.history
        pred = self._check_futures(
            where,
            agent.predict(history.copy(), pred_len=batch.pred_len, num_preds=self.num_preds, dt=batch.dt, rng=rng),
            batch,
        )
        agents = batch.agent_mask
        steps = batch.future_mask & agents[..., None]
        true = np.where(steps[..., None], batch.future, np.nan)
        pred = np.where(agents[:, None, :, None, None], pred, np.nan)
        log_probs = None
        log_prob = getattr(agent, "log_prob", None)  # optional; an adapter without one sets it to None
        if callable(log_prob):
            both = np.concatenate([pred, np.nan_to_num(true)[:, None]], axis=1)
            log_probs = self._check_log_probs(where, log_prob(history.copy(), both, dt=batch.dt), batch, agents)
        p_true, p_pred, index = self._classes(where, agent, history, true, pred, steps, batch)
        return TrajectoryRecord(
            true[:, None],
            pred,
            steps,
            history,
            p_true,
            p_pred,
            index,
            np.array(CLASS_NAMES),
            batch.scene_source,
            batch.scene_frame,
            batch.dt,
            metric_seed,
            log_probs,
        )

    def _check_futures(self, where, out, batch) -> np.ndarray:
        expected = (batch.num_scenes, self.num_preds, batch.num_agents, batch.pred_len, 2)
        pred = real_array(out, "futures [S, N_P, N_A, N_O, 2]", where=where).astype(np.float64)
        if pred.shape != expected:
            raise AgentOutputError(
                f"{where}: futures have shape {pred.shape}, expected [S, N_P, N_A, N_O, 2] = {expected}"
            )
        bad = ~np.isfinite(pred).all(-1) & batch.agent_mask[:, None, :, None]
        if bad.any():
            s, p, a, t = (int(i) for i in np.argwhere(bad)[0])
            raise AgentOutputError(
                f"{where}: futures hold NaN/inf for an observed agent (scene {batch.scene_source[s]}"
                f"@{batch.scene_frame[s]}, prediction {p}, agent {a}, future step {t}); expected finite "
                "positions for every agent observed at the last history step"
            )
        return pred

    def _check_log_probs(self, where, out, batch, agents) -> np.ndarray:
        expected = (batch.num_scenes, self.num_preds + 1, batch.num_agents)
        lp = real_array(out, "log_prob [S, N_P + 1, N_A]", where=where).astype(np.float64)
        if lp.shape != expected:
            raise AgentOutputError(
                f"{where}: log_prob returned shape {lp.shape}, expected [S, N_P + 1, N_A] = {expected}"
            )
        if np.isnan(lp[np.broadcast_to(agents[:, None], lp.shape)]).any() or np.isposinf(lp).any():
            raise AgentOutputError(f"{where}: log_prob holds NaN or +inf for an observed agent")
        return np.where(agents[:, None], lp, np.nan)

    def _classes(self, where, agent, history, true, pred, steps, batch):
        true_cls, ok = turn_classes(
            history, true, steps, stop_distance=self.stop_distance, turn_degrees=self.turn_degrees
        )
        c = len(CLASS_NAMES)
        if callable(getattr(agent, "predict_class_probs", None)):
            out = agent.predict_class_probs(history.copy(), pred_len=batch.pred_len, dt=batch.dt)
            probs = real_array(out, "predict_class_probs [S, N_A, C]", where=where).astype(np.float64)
            if probs.shape != (batch.num_scenes, batch.num_agents, c):
                raise AgentOutputError(
                    f"{where}: predict_class_probs returned shape {probs.shape}, expected [S, N_A, C] = "
                    f"{(batch.num_scenes, batch.num_agents, c)} with classes {list(CLASS_NAMES)}"
                )
            sel = probs[ok]
            if (
                not np.isfinite(sel).all()
                or sel.min(initial=0) < 0
                or sel.max(initial=0) > 1
                or np.abs(sel.sum(-1) - 1).max(initial=0) > 1e-6
            ):
                raise AgentOutputError(f"{where}: predict_class_probs must be finite, in [0, 1], rows summing to 1")
        else:
            pred_cls, _ = turn_classes(
                history, np.nan_to_num(pred), steps, stop_distance=self.stop_distance, turn_degrees=self.turn_degrees
            )
            probs = class_probabilities_from_futures(pred_cls, c, self.class_smoothing)
        index = np.argwhere(ok)
        p_true = (true_cls[ok][:, None] == np.arange(c)).astype(float)
        return p_true, probs[ok], index
