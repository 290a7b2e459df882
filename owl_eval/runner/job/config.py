"""A job's first step: its config read once (:func:`read_job_config`).

The config is resolved once per job, and everything the later steps need of it, or of what Hydra says about the
job (where it was launched, its folder, its sweep), is read here into one typed value, :class:`JobConfig`; a
missing value, a broken interpolation or a wrong type is one error naming the key, before any work starts.
Protocol, domain, agent and metric settings are checked by the protocol and its evaluation when they are built.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from owl_eval.datasets.provenance import DataInput
from owl_eval.errors import ConfigError
from owl_eval.runner.config.hydra_runtime import hydra_runtime
from owl_eval.runner.config.sweep_context import SweepContext, sweep_context
from owl_eval.tracking.redaction import redacted_override
from owl_eval.tracking.settings import TrackingSettings
from owl_eval.typed import as_bool, as_float, as_int

# Keys that change no number: a run that differs only in them is the same job (see config_hash)
NOT_IN_IDENTITY = ("tracking", "agent_timeout")


@dataclasses.dataclass(frozen=True)
class JobSwitches:
    seed: int
    progress: bool
    figures: bool


@dataclasses.dataclass(frozen=True)
class JobConfig:
    """One job's config, read once: the config resolved, its identity (what a resumed sweep recognises it by), the
    typed settings, and what Hydra says about the job."""

    resolved: dict[str, Any]
    identity: dict[str, Any]  # resolved, but for Hydra's job-folder values, kept as written (see resolve_once)
    settings: TrackingSettings
    switches: JobSwitches
    agent_timeout: float | None  # seconds the agents' work may take, or None (no limit)
    launch_dir: str  # where the command was started (relative store paths are relative to it)
    choices: dict[str, str]  # the config option chosen for each group (``agent: ond/knn_novelty``)
    label: str  # the job's overrides, secrets hidden: how logs and the parent run name it
    job_log: Path | None  # the job's log file (Hydra's ``<output dir>/<job name>.log``), attached to the run
    sweep: SweepContext | None  # None for a single run

    def config_hash(self, inputs: Sequence[DataInput] = ()) -> str:
        """The job's identity as a hash (the ``owl_eval.config_hash`` tag), with the digests of the data it read."""
        return identity_hash(self.identity, inputs)


def read_job_config(cfg: DictConfig) -> JobConfig:
    """``cfg`` read once into a :class:`JobConfig`."""
    resolved, identity = resolve_once(cfg)
    hc = hydra_runtime()
    output_dir = Path(str(hc.runtime.output_dir)) if hc is not None else None
    return JobConfig(
        resolved=resolved,
        identity=identity,
        settings=TrackingSettings.from_config(resolved.get("tracking")),
        switches=job_switches(resolved),
        agent_timeout=agent_timeout(resolved),
        launch_dir=str(hc.runtime.cwd) if hc is not None else os.getcwd(),
        choices={str(k): str(v) for k, v in hc.runtime.choices.items() if v} if hc is not None else {},
        label=" ".join(redacted_override(str(o)) for o in hc.overrides.task) if hc is not None else "job",
        job_log=output_dir / f"{hc.job.name}.log" if output_dir is not None else None,
        sweep=sweep_context(hc),
    )


def resolve_once(cfg: DictConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """``cfg`` resolved, and its identity: the same, except that every ``${hydra:...}`` interpolation is kept as its
    text (escaped before resolving, so an interpolation that refers to one gets that text too). A re-run sweep, whose
    jobs get new folders, then recognises its finished jobs, while an ``${oc.env:...}`` or any other interpolation
    counts by the value it gives now. The config is resolved once, with the escapes; the few values that hold a
    ``${hydra:...}`` text are then resolved alone. Where the escaping cannot be resolved (an ``${hydra:...}`` nested
    inside another resolver's argument), the identity is the fully resolved config: the job is then re-run rather
    than ever taken for another. A missing mandatory value or a broken interpolation names its key."""
    identity = identity_of(cfg)
    if identity is None:
        resolved = _resolved(cfg)
        return resolved, resolved
    return _with_hydra_values(identity), identity


def identity_of(cfg: DictConfig | dict[str, Any]) -> dict[str, Any] | None:
    """The identity of :func:`resolve_once` alone, which needs no Hydra runtime (a sweeper computes it before
    launching the job, from the job's config as plain dicts: its interpolations unresolved): None where the escaping
    cannot be resolved, or any value fails to resolve."""
    from omegaconf.errors import OmegaConfBaseException

    plain = OmegaConf.to_container(cfg, resolve=False) if isinstance(cfg, DictConfig) else cfg
    try:
        masked = OmegaConf.create(_escape_hydra(plain))
        return cast(dict[str, Any], OmegaConf.to_container(masked, resolve=True))
    except OmegaConfBaseException:
        return None


def _resolved(cfg: DictConfig) -> dict[str, Any]:
    from omegaconf.errors import OmegaConfBaseException

    from owl_eval.runner.config.messages import one_line

    try:
        return cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True))  # a DictConfig gives a dict
    except OmegaConfBaseException as exc:
        raise ConfigError(one_line(exc)) from None


def _escape_hydra(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _escape_hydra(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_escape_hydra(v) for v in node]
    if isinstance(node, str):
        return node.replace("${hydra:", "\\${hydra:")
    return node


def _with_hydra_values(node: Any) -> Any:
    """``node`` with each value that holds a ``${hydra:...}`` text resolved (Hydra's resolver reads the job's own
    runtime config)."""
    if isinstance(node, dict):
        return {k: _with_hydra_values(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_with_hydra_values(v) for v in node]
    if isinstance(node, str) and "${hydra:" in node:
        return OmegaConf.create({"value": node}).value
    return node


def identity_hash(identity: dict[str, Any], inputs: Sequence[DataInput] = ()) -> str:
    """Hash of everything that changes a number: the config's identity (:func:`resolve_once`) without the keys that
    change none (:data:`NOT_IN_IDENTITY`), and the digests of the data the domain read (``inputs``): a run made on
    data that has changed since is never reused."""
    content = {k: v for k, v in identity.items() if k not in NOT_IN_IDENTITY}
    if inputs:
        content["owl_eval.data"] = [[i.name, i.digest] for i in inputs]
    return hashlib.sha256(json.dumps(content, sort_keys=True, default=str).encode()).hexdigest()[:16]


def config_hash(cfg: DictConfig, inputs: Sequence[DataInput] = ()) -> str:
    """:func:`identity_hash` of a config (what :meth:`JobConfig.config_hash` gives the job of ``cfg``)."""
    return identity_hash(resolve_once(cfg)[1], inputs)


def job_switches(resolved: dict[str, Any]) -> JobSwitches:
    """The top-level ``seed``, ``progress`` and ``figures`` values, typed."""
    return JobSwitches(
        seed=as_int(resolved.get("seed", 0), "seed", minimum=0, maximum=2**32 - 1),
        progress=as_bool(resolved.get("progress", True), "progress"),
        figures=as_bool(resolved.get("figures", True), "figures"),
    )


def agent_timeout(resolved: dict[str, Any]) -> float | None:
    """``agent_timeout``: seconds the record step (the agents' work, then its scoring) may take, or null (off)."""
    value = resolved.get("agent_timeout")
    return None if value is None else as_float(value, "agent_timeout", minimum=0, open_minimum=True)
