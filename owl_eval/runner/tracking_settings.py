"""Where runs go: the ``tracking`` config node as checked settings (store, URI, experiment, switches), resolved
against the launch directory so every launcher's workers write to one store."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from owl_eval.errors import ConfigError

_KNOWN_URI = re.compile(
    r"^(sqlite:///.+|file:.+|https?://[^/\s]+.*|databricks(-uc)?(://.*)?|(postgresql|mysql)(\+\w+)?://.+)$"
)
_URI_EXPECTED = (
    "expected sqlite:///<path>, file:<path>, http(s)://<host>:<port>, databricks[://<profile>], "
    "postgresql://... or mysql://... (for a local folder use tracking.store_dir=<dir>)"
)


def _unusable_dir(path: Path) -> str | None:
    """Why ``path`` cannot be (or become) a writable directory, or None; looks, never creates."""
    if path.exists():
        if not path.is_dir():
            return f"{path} is a file, expected a directory"
        return None if os.access(path, os.W_OK | os.X_OK) else f"{path} is not writable"
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"{path} cannot be created: {ancestor} is a file"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"{path} cannot be created: {ancestor} is not writable"
    return None


@dataclass
class TrackingSettings:
    """Where runs go. ``uri`` None means the default SQLite store ``<store_dir>/mlflow.db``.

    ``store_dir`` None means ``<launch directory>/outputs``; artifacts of a SQLite store go to
    ``<db directory>/mlartifacts`` (absolute, so Ray or Slurm workers write to the same place).
    Every value is checked on construction (:meth:`validate`): a bad one is one
    :class:`~owl_eval.errors.ConfigError` naming its ``tracking.*`` key, before any folder or run exists.
    """

    uri: str | None = None
    store_dir: str | None = None
    experiment_name: str = "owl-eval"
    artifact_location: str | None = None
    log_record: bool = True
    # Series longer than this are logged as bin means (the full series goes to a CSV artifact); None = all.
    max_series_points: int | None = 2000
    # Skip a job whose config already has a FINISHED run in the experiment: None = in sweeps only.
    skip_finished: bool | None = None

    def __post_init__(self) -> None:
        if isinstance(self.experiment_name, int) and not isinstance(self.experiment_name, bool):
            self.experiment_name = str(self.experiment_name)  # experiment_name=2024 on the command line
        self.validate()

    @classmethod
    def from_config(cls, node) -> TrackingSettings:
        """From the resolved ``tracking`` config node (a mapping); an unknown key is a ConfigError naming
        the closest valid one, a bad value one naming its key (:meth:`validate`)."""
        from dataclasses import fields

        from owl_eval.typed import check_keys

        if not isinstance(node, Mapping):
            raise ConfigError(f"tracking: expected a config node (tracking=mlflow), got {node!r}")
        values = {k: v for k, v in dict(node).items() if k != "_target_"}
        check_keys(values, [f.name for f in fields(cls)], "tracking")
        return cls(**values)

    def validate(self) -> None:
        """Raise one ConfigError, message starting with the key, for the first bad value."""

        def bad(key: str, value, expected: str):
            raise ConfigError(f"tracking.{key}: {value!r} is not {expected}")

        if self.uri is not None and not isinstance(self.uri, str):
            bad("uri", self.uri, "a string")
        if self.uri:
            if not _KNOWN_URI.match(self.uri):
                raise ConfigError(f"tracking.uri: {self.uri!r} is not a tracking URI MLflow accepts; {_URI_EXPECTED}")
            if self.uri.startswith("sqlite:///"):
                db = Path(self.uri[len("sqlite:///") :]).expanduser()
                if db.is_dir():
                    raise ConfigError(f"tracking.uri: {db} is a directory, expected the SQLite database file")
                if not db.parent.is_dir():
                    raise ConfigError(f"tracking.uri: the directory {db.parent} of the SQLite database does not exist")
        if self.store_dir is not None:
            if not isinstance(self.store_dir, (str, os.PathLike)) or not str(self.store_dir).strip():
                bad("store_dir", self.store_dir, "a directory path or null")
            problem = _unusable_dir(Path(self.store_dir).expanduser().absolute())
            if problem:
                raise ConfigError(f"tracking.store_dir: {problem}")
        if not isinstance(self.experiment_name, str) or not self.experiment_name.strip():
            raise ConfigError(
                f"tracking.experiment_name: {self.experiment_name!r} is not a usable MLflow experiment "
                "name; expected a non-blank string (set experiment_name=<name>)"
            )
        if self.artifact_location is not None and (
            not isinstance(self.artifact_location, (str, os.PathLike)) or not str(self.artifact_location).strip()
        ):
            bad("artifact_location", self.artifact_location, "a path, a URI or null")
        if not isinstance(self.log_record, bool):
            bad("log_record", self.log_record, "true or false")
        points = self.max_series_points
        if points is not None and (isinstance(points, bool) or not isinstance(points, int) or points < 1):
            bad("max_series_points", points, "a positive integer or null")
        if self.skip_finished is not None and not isinstance(self.skip_finished, bool):
            bad("skip_finished", self.skip_finished, "true, false or null")

    def resolved_uri(self, launch_dir: str | os.PathLike | None = None) -> str:

        self.validate()  # cheap; settings may have been changed after construction
        if self.uri:
            return self.uri
        store = Path(self.store_dir) if self.store_dir else Path(launch_dir or os.getcwd()) / "outputs"
        store = store.expanduser().resolve()
        try:
            store.mkdir(parents=True, exist_ok=True)
        except OSError as exc:  # e.g. the default <launch dir>/outputs is a file
            raise ConfigError(f"tracking.store_dir: cannot create {store}: {exc.strerror or exc}") from exc
        return f"sqlite:///{store / 'mlflow.db'}"

    def resolved_artifact_location(self, uri: str) -> str | None:
        if self.artifact_location:
            return Path(self.artifact_location).expanduser().resolve().as_uri()
        if uri.startswith("sqlite:///"):
            return (Path(uri[len("sqlite:///") :]).parent / "mlartifacts").resolve().as_uri()
        return None  # a tracking server chooses its own artifact store
