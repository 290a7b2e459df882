"""``python -m owl_eval``: the older spelling of ``python -m owl_eval``."""

from owl_eval.runner.cli import cli

cli()
