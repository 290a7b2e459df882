"""A job's identity known before it is launched: the ``owl_eval.config_hash`` its run will carry, computed from its
composed config and the data its domain reads, so that a resumed sweep's sweeper can find the job finished without
starting it (:mod:`owl_eval.runner.sweeps.reuse_first`).

It is the hash the job computes itself (:meth:`owl_eval.runner.job.config.JobConfig.config_hash` of the config's
identity and the domain's data digests), or None wherever it could differ or cannot be known in the launching
process: then the job is launched and decides for itself, as it does under every other sweeper.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from owl_eval.datasets.provenance import DataInput, provenance_of
from owl_eval.runner.config.build import build_part
from owl_eval.runner.job.config import identity_hash, identity_of

log = logging.getLogger(__name__)

HYDRA_TEXT = "${hydra:"  # an escaped Hydra interpolation, kept as text in the identity

DomainInputs = dict[str, tuple[DataInput, ...] | None]  # a domain node (JSON) -> the data it reads, None: unknown


@dataclass(frozen=True)
class JobIdentity:
    """A job's identity known before it is launched (:func:`job_identity`): what its hash is made of but the data,
    its ``tracking`` node (resolved: where its run would be), and its task config (to build its domain from)."""

    identity: dict[str, Any]
    tracking: dict[str, Any]
    task: dict[str, Any]


def job_identity(task: dict[str, Any]) -> JobIdentity | None:
    """The identity of the job of ``task`` (a composed job's task config as plain dicts, interpolations unresolved:
    :func:`owl_eval.runner.sweeps.compose.task_container`), or None: a source read (``owl-eval-evaluate``'s jobs are
    never reused), an identity that needs the job's Hydra runtime, or a tracking node that holds a Hydra value."""
    if task.get("source") is not None or task.get("domain") is None:
        return None
    identity = identity_of(task)
    if identity is None:
        return None
    tracking = identity.get("tracking") or {}
    if HYDRA_TEXT in json.dumps(tracking, default=str):
        return None
    return JobIdentity(identity, tracking, task)


def planned_hash(job: JobIdentity, domains: DomainInputs) -> str | None:
    """The config hash the job will compute (its identity with the data its domain reads), or None: a domain node
    that holds a Hydra value, or a domain that fails to build (the job reports why). ``domains`` caches the data
    each distinct domain node reads: a sweep over seeds builds its domain once."""
    key = json.dumps(job.identity.get("domain"), sort_keys=True, default=str)
    if key not in domains:
        domains[key] = None if HYDRA_TEXT in key else _domain_inputs(job.task)
    inputs = domains[key]
    return None if inputs is None else identity_hash(job.identity, inputs)


def _domain_inputs(task: dict[str, Any]) -> tuple[DataInput, ...] | None:
    from omegaconf import OmegaConf

    try:
        return provenance_of(build_part(OmegaConf.create(task), "domain"))
    except Exception as exc:  # noqa: BLE001 - the job builds it again and reports the error with its key
        log.debug("domain not built before launching (%s: %s): its jobs decide for themselves", type(exc).__name__, exc)
        return None
