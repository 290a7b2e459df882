"""Lifelong-RL syllabus protocol (seed 004): blocks of episodes on tasks and variants, l2logger logs,
l2metrics-style metrics, single-task-expert (STE) references computed once and reused.

``mode: syllabus`` runs the syllabus with the agent, writing the log episode by episode (a crash loses
no logged episode), then finds the STE reference of every trained (task, variant) in ``ste.dir``. A
missing STE is computed once and stored (``ste.missing: compute``, the default) or reported N/A with the
command that produces it (``ste.missing: skip``). ``mode: ste`` produces (or reuses) the STE of every
trained (task, variant) of the syllabus and reports their metrics.
"""

from __future__ import annotations

import copy
import functools
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from owl_eval.errors import ConfigError
from owl_eval.formats.l2logger import EpisodeLog, L2LogError, L2Logger, read_log
from owl_eval.protocols.base import ProtocolDriver, RecordOnDisk, keep_partial, report_on_disk
from owl_eval.protocols.interfaces import Method, choices, no_baseline, require_attributes, require_interface
from owl_eval.protocols.lifelong_rl.episodes import run_syllabus
from owl_eval.protocols.lifelong_rl.record import RLRecord
from owl_eval.protocols.lifelong_rl.ste import SteStore, agent_label, ste_rng
from owl_eval.protocols.lifelong_rl.syllabus import Block, parse_syllabus, validate_against
from owl_eval.safe_paths import check_name
from owl_eval.typed import as_choice, as_int, as_str, check_keys

MODES = ("syllabus", "ste")
STE_KEYS = ("dir", "episodes", "seed", "missing", "agent", "domain")
METRICS_COLUMNS = ("reward",)
# Columns of the log a live run writes that metrics.perf_measure may name (the episode's return, its length).
PERF_COLUMNS = METRICS_COLUMNS + ("episode_step_count",)
# What the episode loop calls on the agent, in the order a mismatch is reported.
AGENT_METHODS = (
    Method("act", "act(observation)", args=1),
    Method("observe", "observe(observation, action, reward, next_observation, terminated, truncated)", args=6),
    Method("seed", "seed(rng)", args=1),
    Method("start_task", "start_task(spec)", args=1),
    Method("end_task", "end_task(spec)", args=1),
    Method("set_learning", "set_learning(on)", args=1),
    Method("start_block", "start_block(block)", args=1),
    Method("end_block", "end_block(block)", args=1),
)
DOMAIN_METHODS = (
    Method("make", "make(task, variant)", args=2),
    Method("variants", "variants(task)", args=1),
    Method("params", "params(task, variant)", args=2),
    Method("identity", "identity(task, variant)", args=2),
)
# Domain classes the STE tags can rebuild from protocol.ste.domain (a config node of one of them).
KNOWN_DOMAINS = (
    "owl_eval.protocols.lifelong_rl.domains.RLDomain",
    "owl_eval.protocols.lifelong_rl.gym_tasks.GymnasiumDomain",
)
DOMAIN_CHOICES = "domain=<option> (cartpole, frozenlake, classic_control, gymnasium, mountaincar, minigrid)"


class RLSyllabusDriver(ProtocolDriver):
    name = "lifelong_rl"

    def __init__(
        self,
        syllabus: Mapping[str, Any],
        mode: str = "syllabus",
        log_dir: str = "l2log",
        scenario_name: str = "syllabus",
        eval_seed: int = 1_000_000,
        worker_id: str = "worker-default",
        ste: Mapping[str, Any] | None = None,
    ):
        self.mode = as_choice(mode, "protocol.mode", MODES)
        self.syllabus = parse_syllabus(syllabus)
        self.log_dir = Path(as_str(log_dir, "protocol.log_dir"))
        # Both become directory names of the l2logger layout.
        self.scenario_name = check_name(
            as_str(str(scenario_name), "protocol.scenario_name"), what="scenario name", where="protocol.scenario_name"
        )
        self.worker_id = check_name(
            as_str(str(worker_id), "protocol.worker_id"), what="worker id", where="protocol.worker_id"
        )
        self.eval_seed = as_int(eval_seed, "protocol.eval_seed", minimum=0)
        ste = ste if ste is not None else {}
        if not isinstance(ste, Mapping):
            raise ConfigError(f"protocol.ste: expected a mapping with keys {list(STE_KEYS)}, got {ste!r}")
        check_keys(ste, STE_KEYS, "protocol.ste")
        self.ste_missing = as_choice(ste.get("missing", "compute"), "protocol.ste.missing", ("compute", "skip"))
        self.ste_dir = Path(as_str(str(ste.get("dir") or "outputs/ste"), "protocol.ste.dir"))
        self.ste_seed = as_int(ste.get("seed", 0), "protocol.ste.seed", minimum=0)
        self.ste_episodes = as_int(ste.get("episodes", 100), "protocol.ste.episodes", minimum=1)
        self.ste_agent_cfg, self.ste_domain_cfg = ste.get("agent"), ste.get("domain")
        self._found: dict[str, tuple[EpisodeLog, Path]] = {}

    # -- checks before any run exists ------------------------------------------------------------------
    def check(self, *, domain, agent, baseline=None) -> None:
        """No baseline; the agent is a lifelong-RL agent; the domain is an RL domain holding every task and
        variant of the syllabus; the agent's optional ``check_syllabus(syllabus, domain)`` accepts the syllabus."""
        no_baseline(baseline, "lifelong_rl")
        require_interface(
            agent, AGENT_METHODS, role="agent", kind="a lifelong-RL agent", choose=choices("agent", "lifelong_rl")
        )
        require_interface(domain, DOMAIN_METHODS, role="domain", kind="an RL domain", choose=DOMAIN_CHOICES)
        require_attributes(domain, ("tasks", "name"), role="domain", kind="an RL domain", choose=DOMAIN_CHOICES)
        validate_against(self.syllabus, domain)
        # An agent may say whether it can run this syllabus (tella's agents: one observation/action space pair).
        if callable(getattr(agent, "check_syllabus", None)):
            agent.check_syllabus(self.syllabus, domain)

    def evaluation_context(self) -> dict[str, Any]:
        """``metrics.perf_measure`` must be a column of the log the run writes."""
        return {"columns": PERF_COLUMNS}

    # -- STE lookup ------------------------------------------------------------------------------------
    def _store(self, agent_class: str = "agent") -> SteStore:
        return SteStore(
            self.ste_dir,
            seed=self.ste_seed,
            episodes=self.ste_episodes,
            agent_cfg=self.ste_agent_cfg,
            agent_class=agent_class,
        )

    def _ste_status(self, domain, store: SteStore) -> dict[str, Path | None]:
        """Stored STE log directory of every trained (task, variant), None where missing."""
        return {f"{t}_{v}": store.find(store.identity(t, v, domain.identity(t, v))) for t, v in self.syllabus.trained}

    def record_tags(self, record: RLRecord) -> dict[str, str]:
        """After the run: what actually happened to each STE, not a prediction from the store."""
        status = record.ste_status
        if not status:
            return {}
        kinds = set(status.values())
        return {
            "ste": "computed" if "computed" in kinds else "missing" if "missing" in kinds else "reused",
            "ste.reused": ",".join(k for k, v in status.items() if v == "reused") or "none",
            "ste.not_stored": ",".join(k for k, v in status.items() if v != "reused") or "none",
        }

    def tags(self) -> dict[str, str]:
        tags = {"syllabus_kind": self.syllabus.kind, "rl_mode": self.mode}
        domain = self._domain_from_config()
        if domain is None:
            return tags
        status = self._ste_status(domain, self._store())
        missing = [k for k, v in status.items() if v is None]
        if not missing:
            tags["ste"] = "reused"
        else:
            tags["ste"] = "computed" if self.mode == "ste" or self.ste_missing == "compute" else "missing"
        tags["ste.reused"] = ",".join(k for k, v in status.items() if v is not None) or "none"
        tags["ste.not_stored"] = ",".join(missing) or "none"
        return tags

    def _domain_from_config(self):
        cfg = dict(self.ste_domain_cfg or {})
        target = cfg.pop("_target_", None)
        cfg.pop("_recursive_", None)
        if target not in KNOWN_DOMAINS:
            return None
        module, _, name = target.rpartition(".")
        try:
            import importlib

            return getattr(importlib.import_module(module), name)(**cfg)
        except Exception:  # the runner builds the real domain and reports its errors
            return None

    def _fresh_agent(self, pristine):
        if self.ste_agent_cfg:
            from hydra.utils import instantiate

            return instantiate(self.ste_agent_cfg, _convert_="all")
        return copy.deepcopy(pristine)

    def _ste_command(self) -> str:
        try:
            from hydra.core.hydra_config import HydraConfig

            overrides = list(HydraConfig.get().overrides.task) if HydraConfig.initialized() else []
        except Exception:
            overrides = []
        keep = [
            o
            for o in overrides
            if not o.startswith(("protocol.mode=", "protocol.ste.missing=", "tracking.", "experiment_name="))
        ]
        return " ".join(["python -m owl_eval", *keep, "protocol.mode=ste"])

    def _resolve_ste(self, domain, pristine, *, compute: bool, progress: bool):
        store = self._store(type(pristine).__name__)
        logs, dirs, status, reasons = {}, {}, {}, {}
        for task, variant in self.syllabus.trained:
            name = f"{task}_{variant}"
            identity = store.identity(task, variant, domain.identity(task, variant))
            found = store.find(identity)
            if found is not None:
                status[name] = "reused"
            elif compute:

                def produce(base, task=task, variant=variant, name=name):
                    agent = self._fresh_agent(pristine)
                    with L2Logger(base, name, METRICS_COLUMNS, {"scenario_type": "ste", "task_name": name}) as logger:
                        run_syllabus(
                            [Block("train", task, variant, self.ste_episodes)],
                            agent,
                            domain,
                            logger,
                            ste_rng(self.ste_seed, name),
                            eval_seed=self.eval_seed,
                            worker_id=self.worker_id,
                            progress=progress,
                            desc=f"STE {name}",
                        )
                    return logger.scenario_dir

                found = store.compute(identity, produce)
                status[name] = "computed"
            else:
                status[name] = "missing"
                reasons[name] = (
                    f"no STE reference for {name} (agent {agent_label(self.ste_agent_cfg, type(pristine).__name__)}, "
                    f"seed {self.ste_seed}, {self.ste_episodes} episodes) under {store.root}; produce it with: "
                    f"{self._ste_command()}"
                )
                continue
            logs[name], dirs[name] = read_log(found), found
        return logs, dirs, status, reasons

    # -- running ---------------------------------------------------------------------------------------
    def run(self, *, domain, agent, rng, baseline=None, progress=True) -> RLRecord:
        validate_against(self.syllabus, domain)
        pristine = copy.deepcopy(agent)  # untouched copy: STE agents when no agent config is given
        params = {b.task_name: domain.params(b.task, b.variant) for b in self.syllabus.blocks}
        t0 = time.perf_counter()
        if self.mode == "ste":
            logs, dirs, status, reasons = self._resolve_ste(domain, pristine, compute=True, progress=progress)
            return RLRecord(
                log=concatenate(list(logs.values())),
                kind=self.syllabus.kind,
                mode="ste",
                ste_logs=logs,
                ste_dirs=dirs,
                ste_status=status,
                variant_params=params,
                timings={"ste_s": time.perf_counter() - t0},
            )
        info = {"scenario_type": "custom", "syllabus_kind": self.syllabus.kind, "complexity": "", "difficulty": ""}
        logger = L2Logger(self.log_dir, self.scenario_name, METRICS_COLUMNS, info)
        scenario_dir = logger.scenario_dir
        # the logger flushes every episode: a killed job's process leaves the log, read back as its record so far
        report_on_disk(RecordOnDisk(functools.partial(logged_in, scenario_dir.resolve(), self.syllabus.kind)))
        with keep_partial(lambda: self._logged_so_far(logger, scenario_dir)):
            try:
                run_syllabus(
                    self.syllabus.blocks,
                    agent,
                    domain,
                    logger,
                    rng,
                    eval_seed=self.eval_seed,
                    worker_id=self.worker_id,
                    progress=progress,
                    desc=f"{self.syllabus.kind} syllabus",
                )
            finally:
                logger.close()
            t1 = time.perf_counter()
            logs, dirs, status, reasons = self._resolve_ste(
                domain, pristine, compute=self.ste_missing == "compute", progress=progress
            )
        return RLRecord(
            log=read_log(scenario_dir),
            kind=self.syllabus.kind,
            log_dir=scenario_dir,
            ste_logs=logs,
            ste_dirs=dirs,
            ste_status=status,
            ste_reasons=reasons,
            variant_params=params,
            timings={"syllabus_s": t1 - t0, "ste_s": time.perf_counter() - t1},
        )

    def _logged_so_far(self, logger: L2Logger, scenario_dir: Path) -> RLRecord | None:
        """The episodes logged before a crash (read back from the log directory), without STE references."""
        logger.close()
        return logged_in(scenario_dir, self.syllabus.kind)


def logged_in(scenario_dir: Path, kind: str) -> RLRecord | None:
    """The episodes logged in ``scenario_dir`` as a record without STE references, or None if there are none."""
    try:
        log = read_log(scenario_dir)
    except L2LogError:  # no episode was logged
        return None
    return RLRecord(log=log, kind=kind, log_dir=scenario_dir) if len(log) else None


def concatenate(logs: list[EpisodeLog]) -> EpisodeLog:
    """Logs one after the other as one log: block numbers and episode numbers continue across logs."""
    if not logs:
        raise L2LogError("no log to concatenate")
    names = list(logs[0].columns)
    cols = {n: np.concatenate([lg[n] for lg in logs]) for n in names}
    block_off = np.cumsum([0] + [int(lg["block_num"].max()) + 1 for lg in logs[:-1]])
    exp_off = np.cumsum([0] + [int(lg["exp_num"].max()) + 1 for lg in logs[:-1]])
    sizes = [len(lg) for lg in logs]
    cols["block_num"] = cols["block_num"] + np.repeat(block_off, sizes)
    cols["exp_num"] = cols["exp_num"] + np.repeat(exp_off, sizes)
    return EpisodeLog(cols, metrics_columns=logs[0].metrics_columns, scenario_info={"scenario_type": "ste"})
