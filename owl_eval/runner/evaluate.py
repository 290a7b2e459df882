"""``owl-eval-evaluate +source=<kind> source.path=<path>``: metrics from existing results.

Sources: ``sailon`` (sail-on-client OND results), ``l2logger`` (an l2logger log directory and STE logs),
``accuracy_matrix`` (Renate's results dict or a CSV matrix), ``trajectories`` (General-Framework arrays in
an ``.npz``), and ``record`` (a record saved by an owl-eval run, to recompute with other metric
settings). Everything is read and validated first; only then is an MLflow run created and logged exactly
like a live run (no half-logged runs).
"""

from __future__ import annotations

import logging
import os
import time

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import hydra  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from owl_eval.errors import ConfigError  # noqa: E402
from owl_eval.paths import CONFIG_DIR  # noqa: E402
from owl_eval.runner.resolvers import register_resolvers  # noqa: E402

register_resolvers()  # ${owl_eval.unique:} in the run and sweep directories

log = logging.getLogger(__name__)


def evaluate_job(cfg: DictConfig) -> dict[str, float]:
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):  # identical numbers on every launcher (see owl_eval.runner.app.run_job)
        return _evaluate_job(cfg)


def _evaluate_job(cfg: DictConfig) -> dict[str, float]:
    from owl_eval.evaluation import evaluation_for
    from owl_eval.runner.app import config_hash, find_parent_run, hydra_runtime, log_outcome
    from owl_eval.runner.build import build_part
    from owl_eval.runner.prepare import job_switches, resolve_config, tracking_settings
    from owl_eval.runner.tracking import CONFIG_HASH_TAG, RUN_KIND_TAG, TrackedRun, flatten, git_commit

    started = time.perf_counter()
    if not cfg.get("source"):
        from owl_eval.runner.options import group_options

        raise ConfigError("source: none chosen; add +source=<kind> (one of " + ", ".join(group_options("source")) + ")")
    hc = hydra_runtime()
    launch_dir = hc.runtime.cwd if hc is not None else os.getcwd()
    resolved = resolve_config(cfg)
    settings = tracking_settings(cfg)
    switches = job_switches(cfg)
    source = build_part(cfg, "source")
    data = source.load()  # validate everything before any run exists
    evaluation = evaluation_for(data.protocol)
    metric_options = evaluation.options(resolved.get("metrics") or {}, record=data.record)
    read_seconds = time.perf_counter() - started
    tags = {
        RUN_KIND_TAG: "evaluate",
        "protocol": data.protocol,
        "git_commit": git_commit(launch_dir),
        CONFIG_HASH_TAG: config_hash(cfg),
        "experiment": str(cfg.get("experiment_name", "")),
    }
    tags |= data.tags
    run_name = f"evaluate-{tags.get('source', 'source')}-{tags.get('session', tags.get('agent', ''))}".rstrip("-")
    run = TrackedRun.start(
        settings,
        run_name=run_name,
        tags=tags,
        parent_run_id=find_parent_run(settings, launch_dir),
        launch_dir=launch_dir,
    )
    with run:
        run.log_params(flatten(resolved))
        run.log_text(OmegaConf.to_yaml(cfg, resolve=True), "config/config.yaml")
        timings: dict[str, float] = {}
        results = log_outcome(
            run, evaluation, data.record, metric_options, settings, figures=switches.figures, timings=timings
        )
        run.log_metrics({"time/read_s": read_seconds, **timings, "time/total_s": time.perf_counter() - started})
    log.info("evaluated %s into MLflow run %s", tags.get("source"), run.run_id)
    return dict(results.values)


def evaluate(overrides=(), *, output_dir=None) -> dict[str, float]:
    """Python API: ``evaluate(["+source=sailon", "source.path=results/"])``, as the CLI."""
    from owl_eval.runner.app import run_composed

    return run_composed("evaluate", overrides, evaluate_job, output_dir=output_dir)


@hydra.main(config_path=str(CONFIG_DIR), config_name="evaluate", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    from owl_eval.runner.summary import with_summary

    return with_summary(evaluate_job, cfg)  # the headline metrics and the mlflow ui command on stdout


def cli() -> None:
    from owl_eval.runner.options import checked_cli

    checked_cli(main)


if __name__ == "__main__":
    cli()
