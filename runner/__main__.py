"""``python -m runner``: ``python -m owl_eval`` under a second name, so that scripts calling it keep working."""

from owl_eval.runner.cli.main import cli

cli()
