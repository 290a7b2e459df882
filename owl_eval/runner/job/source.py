"""``owl-eval-evaluate +source=<kind> source.path=<path>``: metrics from existing results.

Sources: ``sailon`` (sail-on-client OND results), ``l2logger`` (an l2logger log directory and STE logs),
``accuracy_matrix`` (Renate's results dict or a CSV matrix), ``trajectories`` (General-Framework arrays in
an ``.npz``), and ``record`` (a record saved by an owl-eval run, to recompute with other metric
settings). Everything is read and validated first; only then is an MLflow run created and logged exactly
like a live run (no half-logged runs).
"""

from __future__ import annotations

import os

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from owl_eval.errors import ConfigError  # noqa: E402
from owl_eval.metrics.keys import MetricKey  # noqa: E402
from owl_eval.paths import CONFIG_DIR  # noqa: E402
from owl_eval.runner.config.resolvers import register_resolvers  # noqa: E402

register_resolvers()  # ${owl_eval.unique:} in the run and sweep directories


def evaluate_job(cfg: DictConfig) -> dict[str, float]:
    """Score one source's results and log them, exactly as a live run is logged."""
    from owl_eval.runner.job.execute import execute

    return execute(cfg, prepare_source)


def prepare_source(cfg: DictConfig):
    """Read and validate the whole source, type the metric settings against what it holds: any problem is one
    error naming the file or key, before any run exists. The record step returns what was read."""
    from owl_eval.datasets.provenance import path_inputs
    from owl_eval.evaluation import evaluation_for
    from owl_eval.runner.config.build import build_part
    from owl_eval.runner.job.execute import PreparedJob
    from owl_eval.runner.job.config import job_switches, resolve_config, tracking_settings
    from owl_eval.tracking.runs import logged_as

    if not cfg.get("source"):
        from owl_eval.runner.cli.arguments import group_options

        raise ConfigError("source: none chosen; add +source=<kind> (one of " + ", ".join(group_options("source")) + ")")
    resolved = resolve_config(cfg)
    settings = tracking_settings(cfg)
    switches = job_switches(cfg)
    source = build_part(cfg, "source")
    data = source.load()  # validate everything before any run exists
    evaluation = evaluation_for(data.protocol)
    metric_options = evaluation.options(cfg.get("metrics") or {}, record=data.record)  # instantiated, checked
    tags = dict(data.tags)
    run_name = f"evaluate-{tags.get('source', 'source')}-{tags.get('session', tags.get('agent', ''))}".rstrip("-")
    return PreparedJob(
        kind="evaluate",
        resolved=resolved,
        settings=settings,
        switches=switches,
        evaluation=evaluation,
        metric_options=metric_options,
        tags=tags,
        run_name=run_name,
        record=lambda: data.record,
        final_tags=lambda record: evaluation.run_tags(
            record, metric_options, record_logged=settings.log_record, logged_as=logged_as(evaluation.name)
        ),
        setup_key=MetricKey("read_s", timing=True),
        record_key=None,
        resumable=False,
        inputs=path_inputs(dict(resolved.get("source") or {}), prefix="source"),
    )


def evaluate(overrides=(), *, output_dir=None) -> dict[str, float]:
    """Python API: ``evaluate(["+source=sailon", "source.path=results/"])``, as the CLI."""
    from owl_eval.runner.job.live import run_composed
    from owl_eval.runner.job.execute import execute

    return run_composed(
        "evaluate", overrides, lambda cfg: execute(cfg, prepare_source, in_process=True), output_dir=output_dir
    )


@hydra.main(config_path=str(CONFIG_DIR), config_name="evaluate", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    import matplotlib

    matplotlib.use("Agg")
    from owl_eval.runner.cli.summary import with_summary

    return with_summary(evaluate_job, cfg)  # the headline metrics and the mlflow ui command on stdout


def cli() -> None:
    import sys

    from owl_eval.runner.cli.entry import run_cli

    sys.exit(run_cli(main, config_name="evaluate"))


if __name__ == "__main__":
    cli()
