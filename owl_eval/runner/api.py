"""The Python API: ``run([...overrides])`` is ``python -m owl_eval ...`` and ``evaluate([...])`` is
``owl-eval-evaluate ...``, without a subprocess (no sweep: use the command line with ``-m`` for that). The job runs
in this process: a notebook's kernel must not be forked (:mod:`owl_eval.runner.process.worker`)."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig


def run(overrides: Sequence[str] = (), *, output_dir: str | os.PathLike | None = None) -> dict[str, float]:
    """Compose the packaged config with command-line style overrides and run one job:
    ``run(["+experiment=ond_given_detection", "seed=3"])`` is ``python -m owl_eval +experiment=... seed=3``."""
    from owl_eval.runner.job.execute import execute
    from owl_eval.runner.job.live import prepare_live

    return run_composed(
        "config", overrides, functools.partial(execute, prepare=prepare_live, in_process=True), output_dir=output_dir
    )


def evaluate(overrides: Sequence[str] = (), *, output_dir: str | os.PathLike | None = None) -> dict[str, float]:
    """``evaluate(["+source=sailon", "source.path=results/"])``, as ``owl-eval-evaluate`` with those overrides."""
    from owl_eval.runner.job.execute import execute
    from owl_eval.runner.job.source import prepare_source

    return run_composed(
        "evaluate",
        overrides,
        functools.partial(execute, prepare=prepare_source, in_process=True),
        output_dir=output_dir,
    )


def run_composed(
    config_name: str,
    overrides: Sequence[str],
    job: Callable[[DictConfig], Any],
    *,
    output_dir: str | os.PathLike | None = None,
) -> Any:
    """Compose ``owl_eval/conf/<config_name>.yaml`` with overrides, set up Hydra's runtime info, call ``job(cfg)``."""
    from hydra import compose, initialize_config_dir
    from hydra.core.hydra_config import HydraConfig
    from omegaconf import open_dict

    from owl_eval.paths import CONFIG_DIR
    from owl_eval.runner.config.build import unknown_key_error
    from owl_eval.runner.config.resolvers import register_resolvers
    from owl_eval.typed import config_node_error

    register_resolvers()
    try:
        with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
            cfg = compose(config_name, overrides=list(overrides), return_hydra_config=True)
    except Exception as exc:  # a key a node lacks (metrics.treshold, protocol.num_trails): the command line's message
        error = config_node_error(exc) or unknown_key_error(exc)
        if error is None:
            raise
        raise error from exc
    out = Path(output_dir) if output_dir else Path.cwd() / "outputs" / "api" / time.strftime("%Y-%m-%d_%H-%M-%S")
    out.mkdir(parents=True, exist_ok=True)
    with open_dict(cfg):
        cfg.hydra.runtime.cwd = os.getcwd()
        cfg.hydra.runtime.output_dir = str(out.resolve())
        cfg.hydra.job.name = "api"
    HydraConfig.instance().set_config(cfg)
    try:
        job_cfg = cfg.copy()
        with open_dict(job_cfg):
            del job_cfg["hydra"]
        return job(job_cfg)
    finally:
        HydraConfig.instance().cfg = None
