"""``owl-eval`` (``python -m owl_eval +experiment=NAME``): one evaluation (or a sweep with ``-m``), logged to MLflow."""

from __future__ import annotations

import os

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

import hydra  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from owl_eval.paths import CONFIG_DIR  # noqa: E402
from owl_eval.runner.config.resolvers import register_resolvers  # noqa: E402

register_resolvers()  # ${owl_eval.unique:} in the run and sweep directories


@hydra.main(config_path=str(CONFIG_DIR), config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> dict:
    import functools

    os.environ["MPLBACKEND"] = "Agg"  # figures are files: no display (set, not imported: pyplot loads when it draws)
    from owl_eval.runner.cli.summary import with_summary
    from owl_eval.runner.config.hydra_runtime import hydra_runtime, is_multirun
    from owl_eval.runner.job.execute import execute
    from owl_eval.runner.job.live import prepare_live

    # a sweep's job prints one line; the sweep's end prints the comparison
    return with_summary(functools.partial(execute, prepare=prepare_live), cfg, full=not is_multirun(hydra_runtime()))


def cli() -> None:
    from owl_eval.runner.cli.entry import exit_without_teardown, run_cli

    exit_without_teardown(run_cli(main))


if __name__ == "__main__":
    cli()
