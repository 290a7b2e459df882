"""The checks every job makes before an MLflow run exists: the config resolves, the tracking settings
and the top-level switches are of the right type. Protocol, domain, agent and metric settings are checked
by the protocol and its evaluation (``Protocol.check`` and ``Evaluation.options``)."""

from __future__ import annotations

import dataclasses
from typing import Any, cast

from omegaconf import DictConfig, OmegaConf

from owl_eval.errors import ConfigError
from owl_eval.tracking.runs import TrackingSettings
from owl_eval.typed import as_bool, as_int


def resolve_config(cfg: DictConfig) -> dict[str, Any]:
    """The whole config resolved; a missing mandatory value or a broken interpolation names its key."""
    from omegaconf.errors import OmegaConfBaseException

    from owl_eval.runner.cli.console import one_line

    try:
        return cast(dict[str, Any], OmegaConf.to_container(cfg, resolve=True))  # a DictConfig gives a dict
    except OmegaConfBaseException as exc:
        raise ConfigError(one_line(exc)) from None


def tracking_settings(cfg: DictConfig) -> TrackingSettings:
    """``cfg.tracking`` as checked :class:`TrackingSettings` (unknown keys and wrong types name the key)."""
    return TrackingSettings.from_config(resolve_config(cfg).get("tracking"))


@dataclasses.dataclass(frozen=True)
class JobSwitches:
    seed: int
    progress: bool
    figures: bool


def job_switches(cfg: DictConfig) -> JobSwitches:
    """The top-level ``seed``, ``progress`` and ``figures`` values, typed."""
    return JobSwitches(
        seed=as_int(cfg.get("seed", 0), "seed", minimum=0, maximum=2**32 - 1),
        progress=as_bool(cfg.get("progress", True), "progress"),
        figures=as_bool(cfg.get("figures", True), "figures"),
    )
