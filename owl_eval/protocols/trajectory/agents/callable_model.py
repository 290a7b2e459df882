"""A user's trajectory predictor named in YAML (``agent=trajectory/callable``): a function, or a model written to
General-Framework's model template. No Python glue to write.

**A callable** ``predictor(observed, agent_mask, **wanted) -> predictions``, in General-Framework's array layout:

- ``observed [S, N_A, N_I, 2]``: the observed positions (NaN where an agent is not observed: missing steps and
  padding agents); ``agent_mask [S, N_A]`` bool: the agents to predict (those observed at the last history step,
  General-Framework's ``Pred_agents``);
- ``wanted``: whichever of these keywords the callable declares (all, for ``**kwargs``): ``pred_len`` (also
  General-Framework's ``num_steps``) = N_O, ``num_preds`` (also ``num_samples_path_pred``) = N_P, ``dt`` (seconds per
  step), ``rng`` (the run's generator: draw every random number from it);
- ``predictions``: ``[S, N_A, N_P, N_O, 2]`` (``layout: agents_first``, General-Framework's ``Pred``) or
  ``[S, N_P, N_A, N_O, 2]`` (``layout: preds_first``, owl-eval's), or ``[S, N_A, N_O, 2]``: one deterministic future
  per agent, copied N_P times. Entries of agents outside the mask are not read.

``log_prob`` (optional, a second callable) ``(observed, agent_mask, futures, **wanted) -> log-densities``: futures in the
predictions' layout with K = N_P + 1 trajectories (the N_P predictions and, last, the true future), log-densities
``[S, N_A, K]`` (``agents_first``) or ``[S, K, N_A]`` (``preds_first``); then the protocol's likelihood metrics use
them instead of a KDE of the samples. A function is named in YAML with ``_partial_: true`` (or as a dotted-path
string).

**A General-Framework model** (an object with ``predict_method()``; ``train_method()`` and ``setup_method()`` are
called when it has them): the adapter sets the attributes the template provides (``num_samples_path_pred``,
``num_timesteps_in``, ``num_timesteps_out``, ``dt``, ``has_map = False``, ``model_mode``, ``predict_single_agent``
(False unless the model set it)) and the two methods its models call:

- ``provide_batch_data(mode, batch_size, val_split_size=0.0, ...)`` -> ``X, T, S, img, img_m_per_px, graph,
  Pred_agents, num_steps, Sample_id, Agent_id, epoch_done`` for ``mode='pred'`` and ``X, Y, T, S, img,
  img_m_per_px, graph, Pred_agents, num_steps, Sample_id, Agent_id, epoch_done`` for ``'train'``/``'val'``
  (General-Framework's current template): ``X [n, N_A, N_I, 2]``, ``Y [n, N_A, N_O, 2]``, types ``T`` ('P' for an
  observed pedestrian, '0' for padding), sizes ``S`` (NaN: not known), no map (``img``, ``img_m_per_px`` and
  ``graph`` None), ``Agent_id [n, N_A]`` the agents' columns. With ``predict_single_agent`` one sample per agent to
  predict, that agent first and the others by distance.
- ``save_predicted_batch_data(Pred, Sample_id, Agent_id, Pred_agents=None, Log_probs=None)``: ``Pred [n, N_A, N_P,
  N_O, 2]`` (``[n, N_P, N_O, 2]`` for a single-agent model). ``Log_probs`` (of the predictions only) are not used:
  the likelihood metrics also need the density of the true future.

Training batches are shuffled from the fit generator; ``val_split_size`` holds out the last part of the (fixed,
shuffled once) training scenes as General-Framework does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from owl_eval.errors import ConfigError
from owl_eval.protocols.adapters import describe, has_method, keywords, require_call, resolve
from owl_eval.protocols.base import AgentOutputError, real_array
from owl_eval.protocols.trajectory.api import constant_velocity_future
from owl_eval.typed import as_choice, as_int

LAYOUTS = ("agents_first", "preds_first")
KEYWORDS = ("pred_len", "num_steps", "num_preds", "num_samples_path_pred", "dt", "rng")


def constant_velocity(observed: np.ndarray, agent_mask: np.ndarray, *, pred_len: int) -> np.ndarray:
    """An example predictor: every agent keeps the velocity of its last two observed steps, ``[S, N_A, N_O, 2]``
    (one deterministic future each; the same numbers as ``agent=trajectory/constant_velocity``)."""
    return constant_velocity_future(np.asarray(observed, dtype=np.float64), pred_len)


class CallablePredictor:
    def __init__(
        self,
        predictor: Any,
        log_prob: Any = None,
        layout: str = "agents_first",
        batch_size: int | None = None,
    ):
        self.predictor = resolve(predictor, "agent.predictor")
        self.layout = as_choice(layout, "agent.layout", LAYOUTS)
        self.batch_size = None if batch_size is None else as_int(batch_size, "agent.batch_size", minimum=1)
        self.template = has_method(self.predictor, "predict_method")
        if self.template:
            kind = (
                self.predictor.get_output_type() if has_method(self.predictor, "get_output_type") else "path_all_wi_pov"
            )
            if not str(kind).startswith("path"):
                raise ConfigError(
                    f"agent.predictor ({describe(self.predictor)}): get_output_type() is {kind!r}; only trajectory "
                    "models ('path_all_wi_pov', 'path_all_wo_pov') predict futures"
                )
        elif callable(self.predictor):
            self.wanted = keywords(self.predictor, KEYWORDS)
            call = "predictor(observed, agent_mask" + "".join(f", {k}=" for k in sorted(self.wanted)) + ")"
            require_call(self.predictor, "agent.predictor", call, 2, self.wanted)
        else:
            raise ConfigError(
                f"agent.predictor ({describe(self.predictor)}) is neither callable as predictor(observed, agent_mask) "
                "nor a General-Framework model with predict_method(); name a function (_target_ with _partial_: true) "
                "or a model class"
            )
        # The protocol asks for log-densities only when the agent's log_prob is callable.
        self.log_prob = None
        if log_prob is not None:
            self._log_prob_fn = resolve(log_prob, "agent.log_prob")
            if not callable(self._log_prob_fn):
                raise ConfigError(f"agent.log_prob ({describe(self._log_prob_fn)}) is not callable")
            self._log_prob_wanted = keywords(self._log_prob_fn, KEYWORDS) - {"rng"}
            call = (
                "log_prob(observed, agent_mask, futures"
                + "".join(f", {k}=" for k in sorted(self._log_prob_wanted))
                + ")"
            )
            require_call(self._log_prob_fn, "agent.log_prob", call, 3, self._log_prob_wanted)
            self.log_prob = self._own_log_prob
        self._setup_done = False

    # -- fit -------------------------------------------------------------------------------------------------
    def fit(self, train, *, rng: np.random.Generator) -> None:
        if not self.template:
            return
        model = self.predictor
        history, future = np.asarray(train.history, dtype=np.float64), np.asarray(train.future, dtype=np.float64)
        self._attributes(history.shape[2], future.shape[2], float(train.dt), "train")
        if not self._setup_done and has_method(model, "setup_method"):
            model.setup_method()
            self._setup_done = True
        if has_method(model, "train_method"):
            order = rng.permutation(history.shape[0])
            server = _Batches(history[order], future[order], order, model, self.batch_size, rng)
            self._install(server)
            model.train_method()

    # -- predict ---------------------------------------------------------------------------------------------
    def predict(self, history, *, pred_len, num_preds, dt, rng):
        history = np.asarray(history, dtype=np.float64)
        if self.template:
            return self._predict_template(history, pred_len, num_preds, float(dt), rng)
        mask = np.isfinite(history[:, :, -1]).all(-1)
        values = {"pred_len": pred_len, "num_steps": pred_len, "num_preds": num_preds}
        values |= {"num_samples_path_pred": num_preds, "dt": dt, "rng": rng}
        out = self.predictor(history.copy(), mask.copy(), **{k: values[k] for k in self.wanted})
        return self._futures(out, history, mask, pred_len, num_preds)

    def _futures(self, out, history, mask, pred_len: int, num_preds: int) -> np.ndarray:
        s, a = history.shape[:2]
        where = f"agent.predictor ({describe(self.predictor)})"
        if isinstance(out, tuple):
            raise AgentOutputError(
                f"{where} returned a tuple of {len(out)}; return the predictions only (log-densities go through "
                "agent.log_prob)"
            )
        arr = real_array(out, "its output", where=where).astype(np.float64)
        single, first = (s, a, pred_len, 2), (s, a, num_preds, pred_len, 2)
        full = first if self.layout == "agents_first" else (s, num_preds, a, pred_len, 2)
        if arr.shape == single:
            return np.broadcast_to(arr[:, None], (s, num_preds, a, pred_len, 2)).copy()
        if arr.shape != full:
            order = "[S, N_A, N_P, N_O, 2]" if self.layout == "agents_first" else "[S, N_P, N_A, N_O, 2]"
            raise AgentOutputError(
                f"{where} returned shape {arr.shape}, expected {order} = {full} (layout {self.layout}) or one "
                f"future per agent [S, N_A, N_O, 2] = {single}"
            )
        return arr.transpose(0, 2, 1, 3, 4).copy() if self.layout == "agents_first" else arr

    def _own_log_prob(self, history, futures, *, dt):
        """The protocol's ``log_prob(history, futures [S, K, N_A, N_O, 2], dt) -> [S, K, N_A]`` through the user's."""
        history, futures = np.asarray(history, dtype=np.float64), np.asarray(futures, dtype=np.float64)
        s, k, a = futures.shape[:3]
        mask = np.isfinite(history[:, :, -1]).all(-1)
        given = futures.transpose(0, 2, 1, 3, 4).copy() if self.layout == "agents_first" else futures.copy()
        values = {"pred_len": futures.shape[3], "num_steps": futures.shape[3], "num_preds": k - 1}
        values |= {"num_samples_path_pred": k - 1, "dt": dt}
        wanted = {name: values[name] for name in self._log_prob_wanted}
        out = self._log_prob_fn(history.copy(), mask.copy(), given, **wanted)
        where = f"agent.log_prob ({describe(self._log_prob_fn)})"
        lp = real_array(out, "its output", where=where).astype(np.float64)
        expected = (s, a, k) if self.layout == "agents_first" else (s, k, a)
        if lp.shape != expected:
            order = "[S, N_A, K]" if self.layout == "agents_first" else "[S, K, N_A]"
            raise AgentOutputError(
                f"{where} returned shape {lp.shape}, expected {order} = {expected} (K = N_P + 1: the predictions, "
                "then the true future)"
            )
        return lp.transpose(0, 2, 1) if self.layout == "agents_first" else lp

    # -- General-Framework's model template --------------------------------------------------------------------
    def _attributes(self, n_in: int, n_out: int, dt: float, mode: str, num_preds: int = 1) -> None:
        model = self.predictor
        model.num_timesteps_in, model.num_timesteps_out, model.dt = n_in, n_out, dt
        model.has_map, model.model_mode = False, mode
        if mode == "pred":
            model.num_samples_path_pred = num_preds
        elif not hasattr(model, "num_samples_path_pred"):
            model.num_samples_path_pred = num_preds
        if not hasattr(model, "predict_single_agent"):
            model.predict_single_agent = False

    def _install(self, server: _Batches) -> None:
        self.predictor.provide_batch_data = server.provide
        self.predictor.save_predicted_batch_data = server.save

    def _predict_template(self, history, pred_len: int, num_preds: int, dt: float, rng) -> np.ndarray:
        s, a, n_in = history.shape[:3]
        self._attributes(n_in, pred_len, dt, "pred", num_preds)
        if not self._setup_done and has_method(self.predictor, "setup_method"):
            self.predictor.setup_method()
            self._setup_done = True
        server = _Batches(history, None, np.arange(s), self.predictor, self.batch_size, rng, pred_len, num_preds)
        self._install(server)
        self.predictor.predict_method()
        where = f"agent.predictor ({describe(self.predictor)}).predict_method()"
        mask = np.isfinite(history[:, :, -1]).all(-1)
        missing = mask & ~server.saved
        if missing.any():
            scene, agent = (int(i) for i in np.argwhere(missing)[0])
            raise AgentOutputError(
                f"{where} saved no prediction for scene {scene}, agent {agent} ({int(missing.sum())} agents to predict "
                "left without one); call save_predicted_batch_data(Pred, Sample_id, Agent_id, Pred_agents) for every "
                "batch of provide_batch_data('pred', ...) until epoch_done"
            )
        return server.out


class _Batches:
    """General-Framework's ``provide_batch_data`` / ``save_predicted_batch_data`` over arrays of scenes."""

    def __init__(self, history, future, scene_ids, model, batch_size, rng, pred_len=None, num_preds=None):
        self.history, self.future, self.model = history, future, model
        self.scene_ids = np.asarray(scene_ids)
        self.batch_size, self.rng = batch_size, rng
        self.mask = np.isfinite(history[:, :, -1]).all(-1)  # [S, A]
        s, a = self.mask.shape
        self.single = bool(getattr(model, "predict_single_agent", False))
        if self.single:  # one sample per agent to predict, that agent first, the others by distance
            rows = np.argwhere(self.mask)
            last = np.nan_to_num(history[:, :, -1], nan=np.inf)
            order = np.empty((len(rows), a), dtype=np.int64)
            for i, (scene, agent) in enumerate(rows):
                with np.errstate(invalid="ignore"):
                    d = np.linalg.norm(last[scene] - last[scene, agent], axis=-1)
                d[agent] = -1.0
                order[i] = np.argsort(np.where(np.isfinite(d), d, np.inf), kind="stable")
            self.samples, self.agent_order = rows[:, 0], order
        else:
            self.samples, self.agent_order = np.arange(s), np.tile(np.arange(a), (s, 1))
        if pred_len is not None:  # predicting: where the saved futures go
            self.out = np.full((s, num_preds, a, pred_len, 2), np.nan)
            self.saved = np.zeros((s, a), dtype=bool)
            self.num_preds, self.pred_len = num_preds, pred_len
        self.pending: dict[str, list[np.ndarray]] = {}
        self.split_at: dict[float, int] = {}

    def _rows(self, mode: str, val_split_size: float) -> np.ndarray:
        n = len(self.samples)
        if mode == "pred":
            return np.arange(n)
        cut = int(n * (1.0 - float(val_split_size)))
        return np.arange(cut) if mode == "train" else np.arange(cut, n)

    def provide(self, mode, batch_size, val_split_size=0.0, ignore_map=False, *args, **kwargs):
        if mode not in ("pred", "train", "val"):
            raise ValueError(f"provide_batch_data: mode must be 'pred', 'train' or 'val', got {mode!r}")
        if (mode == "pred") != (self.future is None):
            raise ValueError(
                f"provide_batch_data({mode!r}) called during {'prediction' if self.future is None else 'training'}"
            )
        key = f"{mode}:{val_split_size}"
        if not self.pending.get(key):
            rows = self._rows(mode, val_split_size)
            if mode == "train":
                rows = rows[self.rng.permutation(len(rows))]
            self.pending[key] = [rows]
        rows = self.pending[key][0]
        size = int(self.batch_size or batch_size)
        take, rest = rows[:size], rows[size:]
        self.pending[key] = [rest] if len(rest) else []
        epoch_done = len(rest) == 0
        scene, order = self.samples[take], self.agent_order[take]
        X = np.take_along_axis(self.history[scene], order[:, :, None, None], axis=1)
        observed = np.isfinite(X).any((-1, -2))
        T = np.where(observed, "P", "0")
        S = np.full(X.shape[:2] + (2,), np.nan)
        pred_agents = np.take_along_axis(self.mask[scene], order, axis=1)
        if self.single:
            pred_agents[:, 1:] = False
        if mode == "pred":
            return X, T, S, None, None, None, pred_agents, self.pred_len, scene, order, epoch_done
        assert self.future is not None
        Y = np.take_along_axis(self.future[scene], order[:, :, None, None], axis=1)
        return X, Y, T, S, None, None, None, pred_agents, Y.shape[2], self.scene_ids[scene], order, epoch_done

    def save(self, Pred, Sample_id, Agent_id, Pred_agents=None, Log_probs=None):
        where = f"agent.predictor ({describe(self.model)}).save_predicted_batch_data"
        if self.future is not None:
            raise ValueError(f"{where} called during training (train_method); predictions are saved in predict_method")
        pred = real_array(Pred, "Pred", where=where).astype(np.float64)
        sample = real_array(Sample_id, "Sample_id", where=where).astype(np.int64)
        agent = real_array(Agent_id, "Agent_id", where=where).astype(np.int64)
        if self.single and pred.ndim == 4:
            pred = pred[:, None]
        n = len(sample)
        if pred.ndim != 5 or pred.shape[0] != n or pred.shape[2:] != (self.num_preds, self.pred_len, 2):
            raise AgentOutputError(
                f"{where}: Pred has shape {pred.shape}, expected [n, N_agents, N_P, N_O, 2] with n = {n} samples, "
                f"N_P = {self.num_preds}, N_O = {self.pred_len}"
            )
        if agent.shape[0] != n or agent.shape[1] < pred.shape[1]:
            raise AgentOutputError(f"{where}: Agent_id has shape {agent.shape}, expected [{n}, >= {pred.shape[1]}]")
        if Pred_agents is None:
            chosen = np.zeros(pred.shape[:2], dtype=bool)
            chosen[:, 0] = True
        else:
            chosen = real_array(Pred_agents, "Pred_agents", where=where).astype(bool)[:, : pred.shape[1]]
        for i in range(n):
            for j in np.flatnonzero(chosen[i]):
                scene, column = int(sample[i]), int(agent[i, j])
                if not (0 <= scene < self.out.shape[0] and 0 <= column < self.out.shape[2]):
                    raise AgentOutputError(f"{where}: sample {scene}, agent {column} is not in this batch")
                self.out[scene, :, column] = pred[i, j]
                self.saved[scene, column] = True
