"""The checksums of a saved record: ``record_checksums.json`` beside the files it vouches for.

Every protocol's record ``save(directory)`` ends with :func:`seal`, which writes the SHA-256 and size of
every file of the record folder (``ond_record.npz``; an RL record's ``rl_record.json`` and every file of its
``l2log/`` and ``ste/`` logs; a continual record's ``.npz`` and its two text copies). When the record is
read back (``owl-eval-evaluate +source=record``), :func:`verify` compares the folder with them: a file
that was rewritten, removed or added since the run saved it is one error naming the file, the recorded and
the current SHA-256 and what to do, so new numbers are never reported as the re-score of the old run. A
record folder without ``record_checksums.json`` is read and said to be unverified (nothing vouches for its files).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from owl_eval.errors import SourceFormatError
from owl_eval.json_input import parse_json
from owl_eval.safe_paths import list_files, read_text

CHECKSUMS_FILE = "record_checksums.json"
FORMAT = "owl-eval/record-checksums/1"
_BLOCK = 1 << 20  # bytes hashed per read


def sha256_of(path: Path) -> str:
    """The SHA-256 of a file, read in blocks (a record can be gigabytes)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while block := fh.read(_BLOCK):
            digest.update(block)
    return digest.hexdigest()


def seal(directory: str | Path) -> Path:
    """Write ``record_checksums.json``: the SHA-256 and size of every file under ``directory`` (itself
    excluded). Called last by every record's ``save``, so the checksums cover exactly what was saved."""
    directory = Path(directory)
    files = {
        rel: {"sha256": sha256_of(path), "bytes": path.stat().st_size}
        for rel, path in list_files(directory, what="record folder").items()
        if rel != CHECKSUMS_FILE
    }
    out = directory / CHECKSUMS_FILE
    out.write_text(json.dumps({"format": FORMAT, "algorithm": "sha256", "files": files}, indent=1) + "\n")
    return out


@dataclass
class Verified:
    """What :func:`verify` found: ``checked`` is False for a record without checksums (saved before them);
    ``digest`` is the SHA-256 of ``record_checksums.json`` (one value that names the whole record)."""

    folder: Path
    checked: bool
    digest: str = ""


def _recorded(manifest: Path) -> dict[str, dict]:
    """The ``files`` of ``record_checksums.json``, each with a 64-hex ``sha256``; else one error naming it."""
    data = parse_json(
        read_text(manifest, what="record checksums"),
        where=str(manifest),
        error=SourceFormatError,
        expect_object="record checksums",
    )
    files = data.get("files")
    if data.get("format") != FORMAT or not isinstance(files, dict):
        raise SourceFormatError(
            f"{manifest}: not owl-eval record checksums (expected format {FORMAT!r} with a 'files' object); "
            "restore the record folder as the run saved it (mlflow artifacts download -r <run_id> -a record)"
        )
    for rel, entry in files.items():
        sha = entry.get("sha256") if isinstance(entry, dict) else None
        if not isinstance(sha, str) or len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
            raise SourceFormatError(f"{manifest}: files.{str(rel)[:80]}: expected a 'sha256' of 64 hex digits")
    return files


def verify(folder: str | Path) -> Verified:
    """Compare the record folder with its ``record_checksums.json``: a file changed, missing or not saved by
    the run is one :class:`SourceFormatError` naming the file; no checksums file: unverified (``checked``
    False), as records saved before checksums existed."""
    folder = Path(folder)
    manifest = folder / CHECKSUMS_FILE
    present = list_files(folder, what="record folder")
    if CHECKSUMS_FILE not in present:
        return Verified(folder, checked=False)
    recorded = _recorded(manifest)
    redo = (
        "restore the record as the run saved it (mlflow artifacts download -r <run_id> -a record), or, to score "
        f"the files as they are now as new results, not as that run's record, remove {CHECKSUMS_FILE} "
        "(the run is then tagged owl_eval.record_unverified=true)"
    )
    for rel, entry in recorded.items():
        if rel not in present:
            raise SourceFormatError(f"{folder / rel}: missing from the record (listed in {CHECKSUMS_FILE}); {redo}")
        now = sha256_of(present[rel])
        if now != entry["sha256"]:
            raise SourceFormatError(
                f"{folder / rel}: changed since the run saved the record (sha256 recorded in {CHECKSUMS_FILE} "
                f"{entry['sha256']}, now {now}); {redo}"
            )
    extra = sorted(rel for rel in present if rel not in recorded and rel != CHECKSUMS_FILE)
    if extra:
        raise SourceFormatError(
            f"{folder / extra[0]}: not part of the record the run saved (not in {CHECKSUMS_FILE}"
            + (f"; {len(extra) - 1} more such file(s)" if len(extra) > 1 else "")
            + f"); remove it, or {redo}"
        )
    return Verified(folder, checked=True, digest=sha256_of(manifest))
