"""Where runs go: the ``tracking`` config node as checked settings (store, URI, experiment, switches), resolved
against the launch directory so every launcher's workers write to one store."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from owl_eval.errors import ConfigError

# An artifact location with a URI scheme goes to MLflow's artifact repository for it; these need a library.
# scheme -> (module to import, what to pip install)
ARTIFACT_LIBRARIES = {
    "s3": ("boto3", "boto3"),
    "gs": ("google.cloud.storage", "google-cloud-storage"),
    "wasbs": ("azure.storage.blob", "azure-storage-blob"),
    "abfss": ("azure.storage.filedatalake", "azure-storage-file-datalake"),
    "hdfs": ("pyarrow", "pyarrow"),
    "viewfs": ("pyarrow", "pyarrow"),
    "oss": ("oss2", "oss2"),
    "sftp": ("pysftp", "pysftp"),
}
ARTIFACT_SCHEMES_WITHOUT_LIBRARY = ("file", "ftp", "mlflow-artifacts", "http", "https", "dbfs", "runs", "models")
# A database tracking URI's driver, as SQLAlchemy names it -> (module to import, what to pip install). SQLAlchemy 2.1
# drives postgresql:// with psycopg (3), 2.0 with psycopg2.
DATABASE_DRIVERS = {
    "psycopg": ("psycopg", "psycopg[binary]"),
    "psycopg2": ("psycopg2", "psycopg2-binary"),
    "pg8000": ("pg8000", "pg8000"),
    "pymysql": ("pymysql", "PyMySQL"),
    "mysqldb": ("MySQLdb", "mysqlclient"),
    "mysqlconnector": ("mysql.connector", "mysql-connector-python"),
}
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):")  # two letters at least: C:\ is a Windows drive


def sqlite_uri(database: Path) -> str:
    """The SQLite URI of the file ``database``: ``%`` and ``?`` percent-encoded, since SQLAlchemy reads a ``?`` as
    the start of query options (a launch folder named ``a?b`` would put the store in ``a``) and decodes the
    database part (spaces, ``#`` and non-ASCII letters pass as they are)."""
    text = str(database).replace("%", "%25").replace("?", "%3F")
    return f"sqlite:///{text}"


@contextlib.contextmanager
def sqlite_creation_lock(uri: str) -> Iterator[None]:
    """While a SQLite store is opened (and, the first time, created: MLflow's ~50 schema migrations), hold an
    exclusive lock on a file beside it, so that jobs started at once on a store that does not exist yet take
    turns: without it, 8 parallel first runs all failed (``table _alembic_tmp_latest_metrics already exists``,
    ``Online migration expected to match one row``) and left the store half migrated. Other URIs: no lock."""
    if not uri.startswith("sqlite:///"):
        yield
        return
    database = sqlite_path(uri)
    try:
        import fcntl

        database.parent.mkdir(parents=True, exist_ok=True)
        handle = open(database.parent / f".{database.name}.owl-eval-lock", "a")  # noqa: SIM115 - closed below
    except (ImportError, OSError):  # no fcntl (Windows) or a read-only folder: open it unlocked, as MLflow does
        yield
        return
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        handle.close()  # releases the lock


@contextlib.contextmanager
def no_stray_folders(uri: str) -> Iterator[None]:
    """MLflow makes the parent folders of a SQLite database from the URI's text, escapes and all: a store in
    ``a?b/outputs`` would leave an empty ``a%3Fb/outputs`` beside it. Folders it made that way are removed
    afterwards (empty ones only)."""
    if not uri.startswith("sqlite:///") or "%" not in uri:
        yield
        return
    literal = Path(uri[len("sqlite:///") :]).parent
    first_new = None
    for folder in [literal, *literal.parents]:
        if folder.exists():
            break
        first_new = folder
    try:
        yield
    finally:
        if first_new is not None and first_new.is_dir() and first_new != sqlite_path(uri).parent:
            for folder in [literal, *literal.parents]:  # innermost first; stops at a folder that holds anything
                try:
                    folder.rmdir()
                except OSError:
                    break
                if folder == first_new:
                    break


def sqlite_path(uri: str) -> Path:
    """The database file of a ``sqlite:///`` URI, as SQLAlchemy reads it (percent-escapes decoded)."""
    from urllib.parse import unquote

    return Path(unquote(uri[len("sqlite:///") :])).expanduser()


def redacted(uri: str) -> str:
    """``uri`` with its password, and any secret query value, shown as ``***`` (``postgresql://user:***@host/db``):
    what is printed, logged as a param or written to an artifact. Parsed as SQLAlchemy parses it
    (:mod:`owl_eval.tracking.redaction`), so a ``#``, ``/`` or ``?`` in the password hides nothing."""
    from owl_eval.tracking.redaction import redacted as hide

    return hide(uri)


def artifact_scheme(location: str) -> str | None:
    """The URI scheme of an artifact location (``s3``, ``file``), or None for a plain path."""
    match = _SCHEME.match(location)
    return match.group(1).lower() if match else None


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
                raise ConfigError(
                    f"tracking.uri: {redacted(self.uri)!r} is not a tracking URI MLflow accepts; {_URI_EXPECTED}"
                )
            if self.uri.startswith("sqlite:///"):
                if "?" in self.uri:
                    raise ConfigError(
                        f"tracking.uri: {self.uri!r} holds '?', which SQLAlchemy reads as the start of query options "
                        "(the store would go elsewhere); write a '?' of the path as %3F"
                    )
                db = sqlite_path(self.uri)
                if db.is_dir():
                    raise ConfigError(f"tracking.uri: {db} is a directory, expected the SQLite database file")
                if not db.parent.is_dir():
                    raise ConfigError(f"tracking.uri: the directory {db.parent} of the SQLite database does not exist")
            if self.uri.startswith(("postgresql", "mysql")):
                self._check_database_driver(self.uri)
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
        if self.artifact_location is not None:
            self._check_artifact_location(str(self.artifact_location))
        if not isinstance(self.log_record, bool):
            bad("log_record", self.log_record, "true or false")
        points = self.max_series_points
        if points is not None and (isinstance(points, bool) or not isinstance(points, int) or points < 1):
            bad("max_series_points", points, "a positive integer or null")
        if self.skip_finished is not None and not isinstance(self.skip_finished, bool):
            bad("skip_finished", self.skip_finished, "true, false or null")

    @staticmethod
    def _check_database_driver(uri: str) -> None:
        """The driver SQLAlchemy will use for a database URI must be importable (looked up, not imported)."""
        import importlib.util

        from sqlalchemy.engine import make_url
        from sqlalchemy.exc import ArgumentError, NoSuchModuleError

        try:
            url = make_url(uri)
            driver = url.get_dialect().driver
        except (ArgumentError, NoSuchModuleError, ValueError) as exc:
            raise ConfigError(
                f"tracking.uri: {redacted(uri)!r} is not a database URI SQLAlchemy reads: {exc}"
            ) from None
        module, package = DATABASE_DRIVERS.get(driver, (driver, driver))
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            team = module in ("psycopg", "psycopg2")  # the team extra's drivers (docs/TEAM.md)
            raise ConfigError(
                f"tracking.uri: {url.drivername}:// needs the database driver {module}, which is not installed: "
                + ("pip install -e '.[team]' (docs/TEAM.md)" if team else f"pip install {package}")
            )

    def _check_artifact_location(self, location: str) -> None:
        """A URI's scheme must be one MLflow stores artifacts with, and the library it needs importable."""
        import importlib.util

        scheme = artifact_scheme(location)
        if scheme is None or scheme in ARTIFACT_SCHEMES_WITHOUT_LIBRARY:
            return
        if scheme not in ARTIFACT_LIBRARIES:
            known = ", ".join(sorted({*ARTIFACT_LIBRARIES, "file"}))
            raise ConfigError(
                f"tracking.artifact_location: {location!r} has the scheme {scheme}://, which MLflow has no artifact "
                f"store for; expected a path or one of {known}"
            )
        module, package = ARTIFACT_LIBRARIES[scheme]
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):  # a parent package missing (google.cloud without storage)
            found = False
        if not found:
            raise ConfigError(
                f"tracking.artifact_location: {location!r} needs {package} to store artifacts in {scheme}://, and it "
                f"is not installed (pip install {package})"
            )

    def check_writable(self, launch_dir: str | os.PathLike | None = None) -> None:
        """Before a run is made: a SQLite store's folder (or its nearest existing parent) and its database file, when
        it exists, can be written, and so can a local artifact folder (``tracking.artifact_location``, by default
        ``mlartifacts`` beside a SQLite store); else one :class:`ConfigError` naming the key. Looks, never creates.
        A read-only store would otherwise fail inside MLflow (tracebacks), and a read-only artifact folder only
        after the run was made (a FAILED run). Reading a store (``owl-eval-compare``) needs none of this."""
        self.validate()
        database = self._database(launch_dir)
        if database is not None:
            key = "tracking.uri" if self.uri else "tracking.store_dir"
            default = "" if self.uri or self.store_dir else " (the default store, <launch dir>/outputs)"
            problem = _unusable_dir(database.parent)
            if problem is None and database.exists() and not os.access(database, os.W_OK):
                problem = f"the SQLite store {database} is read-only"
            if problem:
                raise ConfigError(f"{key}: {problem}{default}; new runs cannot be written there")
        folder = self._local_artifact_dir(database)
        if folder is not None:
            problem = _unusable_dir(folder)
            if problem:
                where = "" if self.artifact_location else " (the default artifact folder, beside the SQLite store)"
                raise ConfigError(
                    f"tracking.artifact_location: {problem}{where}; the runs' artifacts cannot be written"
                )

    def _database(self, launch_dir: str | os.PathLike | None) -> Path | None:
        """The SQLite database file new runs go to (not created), or None for a database server or tracking server."""
        if self.uri:
            return sqlite_path(self.uri).absolute() if self.uri.startswith("sqlite:///") else None
        store = Path(self.store_dir) if self.store_dir else Path(launch_dir or os.getcwd()) / "outputs"
        return store.expanduser().absolute() / "mlflow.db"

    def _local_artifact_dir(self, database: Path | None) -> Path | None:
        """The local folder artifacts go to (a path or a ``file:`` URI), or None for a remote artifact store."""
        if not self.artifact_location:
            return database.parent / "mlartifacts" if database is not None else None
        location = str(self.artifact_location)
        scheme = artifact_scheme(location)
        if scheme is None:
            return Path(location).expanduser().absolute()
        if scheme == "file":
            from urllib.parse import unquote, urlsplit

            return Path(unquote(urlsplit(location).path)).absolute()
        return None

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
        return sqlite_uri(store / "mlflow.db")

    def resolved_artifact_location(self, uri: str) -> str | None:
        """Where the experiment's artifacts go: a URI (``s3://``, ``file:///abs``) as given, a path made absolute
        (``file://`` URI, so Ray or Slurm workers write to the same place); by default ``mlartifacts`` beside a
        SQLite store, else the tracking server's choice."""
        if self.artifact_location:
            location = str(self.artifact_location)
            if artifact_scheme(location) is not None:
                return location
            return Path(location).expanduser().resolve().as_uri()
        if uri.startswith("sqlite:///"):
            return (sqlite_path(uri).parent / "mlartifacts").resolve().as_uri()
        return None  # a tracking server chooses its own artifact store
