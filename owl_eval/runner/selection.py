"""Kept for the runner's imports: metric selection lives in :mod:`owl_eval.evaluation.selection`."""

from owl_eval.evaluation.selection import KEY, check_names, select  # noqa: F401
