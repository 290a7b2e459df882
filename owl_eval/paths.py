"""Where the configs live: ``owl_eval/conf/`` (the primary config and the shared groups) and each installed
protocol's own config folder (its descriptor's ``config``), package data, so a wheel works outside the
checkout."""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
CONFIG_DIR = PACKAGE_DIR / "conf"


def protocol_config_dirs() -> dict[str, Path]:
    """Each installed protocol's config folder, by protocol name (those that have one)."""
    from owl_eval.protocols import all_protocols

    return {name: Path(p.config) for name, p in all_protocols().items() if p.config}


def config_dirs(extra: tuple[Path, ...] = ()) -> list[Path]:
    """Every folder Hydra searches for owl-eval's config groups: ``owl_eval/conf``, the protocols' folders,
    then ``extra`` (a user's ``--config-dir`` or ``hydra.searchpath``)."""
    return [CONFIG_DIR, *protocol_config_dirs().values(), *extra]


def group_options(group: str, config_dir: Path | None = None) -> list[str]:
    """The options of a config group (``agent`` -> ``ond/knn_novelty``, ...): its YAML files in every config
    folder (or in ``config_dir`` alone), sorted."""
    dirs = [config_dir] if config_dir is not None else config_dirs()
    found: set[str] = set()
    for folder in dirs:
        root = folder / group
        if root.is_dir():
            found.update(str(p.relative_to(root).with_suffix("")) for p in root.rglob("*.yaml"))
    return sorted(found)


def config_file(group: str, option: str) -> Path:
    """The YAML file of ``group=option`` (the first folder of :func:`config_dirs` that has it)."""
    for folder in config_dirs():
        path = folder / group / f"{option}.yaml"
        if path.is_file():
            return path
    raise FileNotFoundError(f"no config {group}/{option}.yaml in {[str(d) for d in config_dirs()]}")
