"""Where the packaged configs live: ``owl_eval/conf/``, package data, so a wheel works outside the checkout."""

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
CONFIG_DIR = PACKAGE_DIR / "conf"


def group_options(group: str, config_dir: Path = CONFIG_DIR) -> list[str]:
    """The options of a config group (``agent`` -> ``ond/knn_novelty``, ...): its YAML files, sorted."""
    root = config_dir / group
    if not root.is_dir():
        return []
    return sorted(str(p.relative_to(root).with_suffix("")) for p in root.rglob("*.yaml"))
