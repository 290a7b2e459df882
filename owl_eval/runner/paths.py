"""Kept for the runner's imports: the config locations live in :mod:`owl_eval.paths` (below every layer)."""

from owl_eval.paths import CONFIG_DIR, PACKAGE_DIR  # noqa: F401
