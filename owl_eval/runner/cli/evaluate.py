"""``owl-eval-evaluate +source=<kind> source.path=<path>``: metrics from results produced elsewhere, logged exactly
like a live run (the sources: :mod:`owl_eval.runner.job.source`)."""

from __future__ import annotations

import os

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from owl_eval.paths import CONFIG_DIR  # noqa: E402
from owl_eval.runner.config.resolvers import register_resolvers  # noqa: E402

register_resolvers()  # ${owl_eval.unique:} in the run and sweep directories


@hydra.main(config_path=str(CONFIG_DIR), config_name="evaluate", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    import functools

    os.environ["MPLBACKEND"] = "Agg"  # figures are files: no display (set, not imported: pyplot loads when it draws)
    from owl_eval.runner.cli.summary import with_summary
    from owl_eval.runner.job.execute import execute
    from owl_eval.runner.job.source import prepare_source

    # the headline metrics and the mlflow ui command on stdout
    return with_summary(functools.partial(execute, prepare=prepare_source), cfg)


def cli() -> None:
    from owl_eval.runner.cli.entry import exit_without_teardown, run_cli

    exit_without_teardown(run_cli(main, config_name="evaluate"))


if __name__ == "__main__":
    cli()
