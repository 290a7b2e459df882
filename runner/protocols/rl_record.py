"""The lifelong-RL record: the episode log (l2logger layout) and the STE logs used as references.

Saved as directories, never pickles::

    <dir>/l2log/<scenario>-<stamp>/...           the run's log, exactly as written episode by episode
    <dir>/ste/<task_name>/<scenario>-<stamp>/...  each STE reference log used by the metrics
    <dir>/rl_record.json                         syllabus kind, STE status per task, notes
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from metrics.l2_log import EpisodeLog, read_log, write_log

RECORD_FILE = "rl_record.json"


@dataclass
class RLRecord:
    log: EpisodeLog
    kind: str = "custom"
    mode: str = "syllabus"  # or "ste": the log is the STE logs one after the other
    log_dir: Path | None = None  # the scenario directory written during the run (copied as is on save)
    ste_logs: dict[str, EpisodeLog] = field(default_factory=dict)
    ste_dirs: dict[str, Path] = field(default_factory=dict)
    ste_status: dict[str, str] = field(default_factory=dict)  # task_name -> reused | computed | missing
    ste_reasons: dict[str, str] = field(default_factory=dict)  # task_name -> why missing, how to produce it
    variant_params: dict[str, dict] = field(default_factory=dict)  # task_name -> params
    timings: dict[str, float] = field(default_factory=dict)  # seconds: syllabus_s, ste_s

    def save(self, directory: str | Path) -> Path:
        directory = Path(directory)
        if self.log_dir is not None and Path(self.log_dir).is_dir():
            shutil.copytree(self.log_dir, directory / "l2log" / Path(self.log_dir).name, dirs_exist_ok=True)
        else:
            write_log(self.log, directory / "l2log", "rl_log", stamp=0.0)
        for name, src in self.ste_dirs.items():
            shutil.copytree(src, directory / "ste" / name / Path(src).name, dirs_exist_ok=True)
        meta = {"format": "owl-eval/rl-record/1", "kind": self.kind, "mode": self.mode,
                "ste_status": self.ste_status, "ste_reasons": self.ste_reasons, "variant_params": self.variant_params,
                "timings": self.timings}
        (directory / RECORD_FILE).write_text(json.dumps(meta, indent=2))
        return directory

    @classmethod
    def load(cls, path: str | Path) -> "RLRecord":
        path = Path(path)
        if path.is_file():
            path = path.parent
        meta = json.loads((path / RECORD_FILE).read_text()) if (path / RECORD_FILE).exists() else {}
        ste_root = path / "ste"
        ste_dirs = {p.name: next(p.iterdir()) for p in sorted(ste_root.iterdir())} if ste_root.is_dir() else {}
        return cls(log=read_log(path / "l2log"), kind=meta.get("kind", "custom"), mode=meta.get("mode", "syllabus"),
                   ste_logs={k: read_log(v) for k, v in ste_dirs.items()}, ste_dirs=ste_dirs,
                   ste_status=meta.get("ste_status", {}), ste_reasons=meta.get("ste_reasons", {}),
                   variant_params=meta.get("variant_params", {}), timings=meta.get("timings", {}))
