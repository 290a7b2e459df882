"""The lifelong-RL record: the episode log (l2logger layout) and the STE logs used as references.

Saved as directories, never pickles::

    <dir>/l2log/<scenario>-<stamp>/...           the run's log: exactly the files the reader parsed
    <dir>/ste/<task_name>/<scenario>-<stamp>/...  each STE reference log used by the metrics
    <dir>/rl_record.json                         syllabus kind, STE status per task, notes

The log folders may be user data (``owl_eval.runner.cli.evaluate +source=l2logger``): nothing is copied wholesale.
Only the files the reader parsed are copied (``EpisodeLog.files``; a link or any other file in the folder
never reaches the artifacts), and every name that becomes a path (STE and task names) is checked first.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from owl_eval.formats.checksums import seal
from owl_eval.formats.l2logger import EpisodeLog, L2LogError, read_log, write_log
from owl_eval.json_input import parse_json
from owl_eval.safe_paths import SAFE_NAME, check_name, copy_files, list_files, read_text

RECORD_FILE = "rl_record.json"
MODES = ("syllabus", "ste")


@dataclass
class RLRecord:
    log: EpisodeLog
    kind: str = "custom"
    mode: str = "syllabus"  # or "ste": the log is the STE logs one after the other
    log_dir: Path | None = None  # the scenario directory the log was read from (its parsed files are copied)
    ste_logs: dict[str, EpisodeLog] = field(default_factory=dict)
    ste_dirs: dict[str, Path] = field(default_factory=dict)
    ste_status: dict[str, str] = field(default_factory=dict)  # task_name -> reused | computed | missing
    ste_reasons: dict[str, str] = field(default_factory=dict)  # task_name -> why missing, how to produce it
    variant_params: dict[str, dict] = field(default_factory=dict)  # task_name -> params
    timings: dict[str, float] = field(default_factory=dict)  # seconds: syllabus_s, ste_s

    def save(self, directory: str | Path) -> Path:
        directory = Path(directory)
        # Every check before the first byte is written: a refused record leaves nothing behind.
        for name in self.ste_dirs:
            check_name(name, what="STE name", where="the RL record's STE logs")
        _check_task_names(self.log, "the RL record's log")
        ste = {name: self._ste_log(name, src) for name, src in self.ste_dirs.items()}
        for name, log in ste.items():
            _check_task_names(log, f"the STE log {name}")
        if self.log_dir is not None:
            log = (
                self.log if _read_from(self.log, self.log_dir) else read_log(self.log_dir, perf_measure=None, raw=True)
            )
            _copy_parsed(log, directory / "l2log")
        else:
            write_log(self.log, directory / "l2log", "rl_log", stamp=0.0)
        for name, log in ste.items():
            _copy_parsed(log, directory / "ste" / name)
        meta = {
            "format": "owl-eval/rl-record/1",
            "kind": self.kind,
            "mode": self.mode,
            "ste_status": self.ste_status,
            "ste_reasons": self.ste_reasons,
            "variant_params": self.variant_params,
            "timings": self.timings,
        }
        (directory / RECORD_FILE).write_text(json.dumps(meta, indent=2))
        seal(directory)  # every log file copied above: the re-score checks them against these
        return directory

    def _ste_log(self, name: str, src: Path) -> EpisodeLog:
        log = self.ste_logs.get(name)
        return log if log is not None and _read_from(log, src) else read_log(src, perf_measure=None, raw=True)

    @classmethod
    def load(cls, path: str | Path) -> RLRecord:
        """A saved record; malformed parts are one error naming the file (L2LogError / UnsafePathError)."""
        path = Path(path)
        if path.is_file():
            path = path.parent
        listing = list_files(path, what="RL record folder")  # no link anywhere in the record
        meta = _read_meta(path / RECORD_FILE) if RECORD_FILE in listing else {}
        ste_dirs: dict[str, Path] = {}
        for rel in sorted(listing):
            parts = rel.split("/")
            if parts[0] == "ste" and len(parts) > 2:
                name = check_name(parts[1], what="STE name", where=str(path / rel))
                ste_dirs.setdefault(name, path / "ste" / name / parts[2])
        return cls(
            log=read_log(path / "l2log"),
            kind=meta["kind"],
            mode=meta["mode"],
            ste_logs={k: read_log(v) for k, v in ste_dirs.items()},
            ste_dirs=ste_dirs,
            ste_status=meta["ste_status"],
            ste_reasons=meta["ste_reasons"],
            variant_params=meta["variant_params"],
            timings=meta["timings"],
        )


def _read_from(log: EpisodeLog, folder: Path) -> bool:
    """Whether ``log`` was read from ``folder`` (then its parsed files are known)."""
    return bool(log.files) and log.source is not None and Path(log.source) == Path(folder).expanduser().resolve()


def _check_task_names(log: EpisodeLog, where: str) -> None:
    for task in set(log["task_name"].tolist()):  # they become metric keys
        check_name(task, what="task name", where=where)


def _copy_parsed(log: EpisodeLog, destination: Path) -> None:
    """Copy exactly the files the reader parsed, below a folder named like the log's (when that is safe)."""
    assert log.source is not None  # read from disk (read_log sets it)
    name = Path(log.source).name
    copy_files(log.files, log.source, destination / (name if SAFE_NAME.match(name) and ".." not in name else "log"))


def _read_meta(path: Path) -> dict:
    """``rl_record.json`` as typed fields (missing keys take their defaults)."""
    meta = parse_json(
        read_text(path, what="RL record file"), where=str(path), error=L2LogError, expect_object="RL record settings"
    )
    out = {"kind": meta.get("kind", "custom"), "mode": meta.get("mode", "syllabus")}
    if not isinstance(out["kind"], str):
        raise L2LogError(f"{path}: kind: expected a string, got {out['kind']!r}")
    if out["mode"] not in MODES:
        raise L2LogError(f"{path}: mode: expected one of {list(MODES)}, got {out['mode']!r}")
    for key in ("ste_status", "ste_reasons", "variant_params", "timings"):
        value = meta.get(key, {})
        if not isinstance(value, dict):
            raise L2LogError(f"{path}: {key}: expected a JSON object, got {type(value).__name__}")
        out[key] = value
    for key, value in out["timings"].items():  # logged as metrics time/<key>
        check_name(key, what="timing name", where=f"{path}, timings")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise L2LogError(f"{path}: timings.{key}: expected a finite number of seconds, got {value!r}")
    return out
