"""``python -m owl_eval +experiment=NAME``: one evaluation (or a sweep with ``-m``), logged to MLflow."""

from owl_eval.runner.cli.main import cli

cli()
