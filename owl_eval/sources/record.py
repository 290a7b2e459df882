"""Records saved by owl-eval runs (the ``record/`` artifact folder), re-scored without re-running agents.

The kind is detected from the file name (``source.path`` may be the file or the folder holding it): each
protocol's descriptor names its record files and their readers (``record_files``: ``ond_record.npz``,
``rl_record.json``, ...) and, where a protocol reads a whole folder, the file that marks it
(``record_folder``: an l2logger log directory's ``data-log.tsv``). The metric settings are the protocol's
defaults (the typed options of its ``metrics`` node)
with whatever the command line gives under ``metrics``: ``+metrics.threshold=0.7`` (or ``+metrics=ond
metrics.threshold=0.7``). A key the protocol does not know is an error before any run is created.

A record is user data once downloaded: a folder is listed without following links (a link anywhere in it
is an error), every ``.npz`` member's CRC, dtype and shape is checked, values are checked as the matching
source checks them (each protocol's ``sources/saved.py``), and a ``<kind>_record.*`` of a protocol we do not
know is named as such. Anything wrong is one error naming the file (and array, index or key).

A record is also checked against the checksums its run saved (``record_checksums.json``,
:mod:`owl_eval.formats.checksums`): a file rewritten, removed or added since is one error naming the file
and both SHA-256s, so new numbers are never reported as the re-score of the old run; the run is tagged
``owl_eval.record_sha256`` (the checksums file's own SHA-256). A record without checksums is
read with a warning and the tag ``owl_eval.record_unverified=true`` (nothing vouches for its files).
"""

from __future__ import annotations

import logging
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from owl_eval.errors import ConfigError, UnsafePathError
from owl_eval.formats.checksums import CHECKSUMS_FILE, verify
from owl_eval.json_input import parse_json
from owl_eval.metrics.validation import MetricInputError
from owl_eval.protocols import all_protocols
from owl_eval.safe_paths import list_files, read_text, regular_file
from owl_eval.sources import SourceData, SourceFormatError
from owl_eval.typed import as_int, as_str

log = logging.getLogger(__name__)
UNVERIFIED_TAG = "owl_eval.record_unverified"  # a record without checksums (saved before they were kept)
RECORD_NAME = re.compile(r"^(?P<kind>.+)_record\.(npz|json)$")  # how any record file is named
# What reading a damaged record may raise besides our own ValueErrors; each becomes one error naming the file.
READ_ERRORS = (
    OSError,
    KeyError,
    IndexError,
    ValueError,
    TypeError,
    AttributeError,
    StopIteration,
    RecursionError,
    OverflowError,
    zipfile.BadZipFile,
)


def record_files() -> dict[str, str]:
    """Saved record file name -> the protocol that reads it, from every installed protocol's descriptor."""
    return {name: p.name for p in all_protocols().values() for name in p.record_files if name}


def record_folders() -> dict[str, str]:
    """A file that makes a folder a record (``data-log.tsv``) -> the protocol that reads the folder."""
    return {p.record_folder: p.name for p in all_protocols().values() if p.record_folder}


def record_readers() -> dict[str, Any]:
    """File name (``""``: a record folder) -> ``reader(path, *, settings, chunk_size) -> SourceData``."""
    out: dict[str, Any] = {}
    for protocol in all_protocols().values():
        for name, reference in protocol.record_files.items():
            out.setdefault(name, protocol.load(reference))
    return out


class RecordSource:
    """Options are kept as given and checked in :meth:`load` (owl_eval.typed), before any run exists."""

    def __init__(self, path: str, metrics: Mapping | None = None, chunk_size: int = 256):
        self.path: Any = path  # as given (any YAML value); a Path after _options()
        self.given, self.chunk_size = metrics, chunk_size

    def _options(self) -> None:
        if self.path is None or not str(self.path) or str(self.path) == "???":
            raise SourceFormatError("source.path: expected a saved record file or the record folder of a run")
        self.path = Path(as_str(self.path, "source.path")).expanduser()
        self.chunk_size = as_int(self.chunk_size, "source.chunk_size", minimum=1)
        if self.given is not None and not isinstance(self.given, Mapping):
            raise ConfigError(f"metrics: expected metric settings (key=value pairs), got {str(self.given)[:60]!r}")
        self.given = dict(self.given or {})

    def load(self) -> SourceData:
        self._options()
        file = self._find()
        try:
            data = self._load(file)
        except (SourceFormatError, UnsafePathError, ConfigError):
            raise
        except MetricInputError as exc:  # the record readers' own errors (they name the file)
            raise SourceFormatError(str(exc) if str(file) in str(exc) else f"{file}: {exc}") from None
        except READ_ERRORS as exc:
            raise SourceFormatError(
                f"{file}: not a readable owl-eval record ({type(exc).__name__}: {str(exc)[:300]})"
            ) from None
        # Unknown or ill-typed metric settings are refused by the evaluation's options (before any run).
        data.tags = data.tags | {"source": "record", "record_kind": data.protocol, "file": file.name}
        data.tags |= self._verified(file.parent if file.is_file() else file)
        return data

    @staticmethod
    def _verified(folder: Path) -> dict[str, str]:
        """The record folder checked against the checksums its run saved (a changed, missing or added file is
        one error, after the reader named anything malformed); the tags that say what was verified."""
        found = verify(folder)
        if not found.checked:
            log.warning(
                "%s: no %s (a record saved before owl-eval kept checksums, or copied without it): its files "
                "cannot be checked against the run that saved them; the run is tagged %s=true",
                folder,
                CHECKSUMS_FILE,
                UNVERIFIED_TAG,
            )
            return {UNVERIFIED_TAG: "true"}
        return {"owl_eval.record_sha256": found.digest}

    def _find(self) -> Path:
        """The record file (or a bare l2logger log directory); a folder is listed without following links."""
        try:
            given = self.path.resolve()  # the path the user named (a link to it is fine)
        except (OSError, RuntimeError) as exc:  # RuntimeError: a link loop
            raise SourceFormatError(f"{self.path}: cannot be read ({exc})") from None
        if given.is_file():
            if given.name not in record_files():
                raise SourceFormatError(f"{self.path}: not a record file (expected one of {sorted(record_files())})")
            return regular_file(given, what="record file")
        if not given.is_dir():
            raise SourceFormatError(f"{self.path}: file or directory not found")
        files = list_files(given, what="record folder")  # a link anywhere inside is one error
        kinds = record_files()
        found = [given / name for name in kinds if name in files]
        if len(found) > 1:
            raise SourceFormatError(
                f"{given}: holds several records ({', '.join(p.name for p in found)}); give the file"
            )
        if found:
            return found[0]
        if any(rel == marker or rel.endswith("/" + marker) for marker in record_folders() for rel in files):
            return given  # a folder of results a protocol reads whole (an l2logger log directory)
        unknown = sorted(rel for rel in files if "/" not in rel and RECORD_NAME.match(rel))
        if unknown:
            match = RECORD_NAME.match(unknown[0])
            assert match is not None  # unknown holds matching names only
            kind = match["kind"]
            raise SourceFormatError(
                f"{given / unknown[0]}: a record of an unknown protocol {kind[:60]!r}; known "
                f"protocols: {', '.join(all_protocols())} (record files {', '.join(sorted(record_files()))})"
            )
        raise SourceFormatError(
            f"{given}: no record here (expected one of {sorted(record_files())} or a folder holding "
            f"{' or '.join(sorted(record_folders()))})"
        )

    def _load(self, file: Path) -> SourceData:
        reader = record_readers()[file.name if file.is_file() else ""]
        return reader(file, settings=self.given, chunk_size=self.chunk_size)


def read_json_object(file: Path) -> dict:
    """A small JSON object file of a record, read without following links; one error naming the file."""
    return parse_json(
        read_text(file, what="record file"), where=str(file), error=SourceFormatError, expect_object="record settings"
    )
