"""An l2logger log directory (and STE log directories), read as l2metrics 3.1 reads them.

``source.path``: one scenario directory (``<scenario>-<stamp>/`` with ``logger_info.json`` and
``<worker>/<block>-<type>/data-log.tsv`` below it), or a folder holding exactly one such directory.
``source.ste_paths``: STE logs, each a scenario directory or a folder of scenario directories (one STE
log each, e.g. a store of STE runs); each must train exactly one task, and that task must be one of the
log's tasks (``variant_mode: agnostic`` matches on the part before the first ``_``). Every
l2metrics-style setting comes from the ``metrics`` config (``metrics=lifelong_rl``, the fields of
:class:`owl_eval.protocols.lifelong_rl.options.LifelongRLMetricOptions`).

The folders are user data: they are listed without following links (a link anywhere below them is one
error), and the record keeps exactly the files the reader parsed (see :class:`RLRecord`).
"""

from __future__ import annotations

from pathlib import Path

from owl_eval.errors import ConfigError
from owl_eval.formats.l2logger import EpisodeLog, L2LogError, read_log
from owl_eval.protocols.lifelong_rl.record import RLRecord
from owl_eval.safe_paths import list_files
from owl_eval.sources import SourceData, SourceFormatError
from owl_eval.typed import as_choice, as_str

INFO_FILE = "logger_info.json"
VARIANT_MODES = ("aware", "agnostic")


class L2LoggerSource:
    def __init__(
        self, path: str, ste_paths: list | str | None = None, perf_measure: str = "reward", variant_mode: str = "aware"
    ):
        self.given = {"path": path, "ste_paths": ste_paths, "perf_measure": perf_measure, "variant_mode": variant_mode}

    def _check_options(self) -> None:
        """Typed ``source.*`` options (a ConfigError naming the key), before any file is read."""
        given = self.given
        if given["path"] in (None, "", "???"):
            raise SourceFormatError("source.path: expected an l2logger log directory")
        self.path = Path(as_str(given["path"], "source.path")).expanduser()
        ste = given["ste_paths"]
        ste = [] if ste is None else [ste] if isinstance(ste, str) else ste
        if not isinstance(ste, (list, tuple)):
            raise ConfigError(
                f"source.ste_paths: expected a list of STE log folders, got {ste!r} ({type(ste).__name__})"
            )
        self.ste_paths = [Path(as_str(p, f"source.ste_paths[{i}]")).expanduser() for i, p in enumerate(ste)]
        self.perf_measure = as_str(given["perf_measure"], "source.perf_measure")
        self.variant_mode = as_choice(given["variant_mode"], "source.variant_mode", VARIANT_MODES)

    def load(self) -> SourceData:
        self._check_options()
        scenario = scenario_dir(self.path, "source.path")
        log = self._read(scenario)
        tasks = set(log["task_name"].tolist())
        ste_logs, ste_dirs = {}, {}
        for given in self.ste_paths:
            for d in ste_dirs_under(given):
                ste = self._read(d)
                trained = sorted(set(ste["task_name"][ste["block_type"] == "train"].tolist()))
                if len(trained) != 1:
                    raise SourceFormatError(
                        f"{d}: an STE log must train exactly one task, it trains {trained or 'none'}"
                    )
                task = trained[0]
                # l2metrics' matching: the exact task name, else the STE task's base name (before the first _)
                if task not in tasks and task.split("_")[0] not in {self._key(t) for t in tasks}:
                    raise SourceFormatError(
                        f"{d}: STE log of task {task!r}, which {scenario} does not have "
                        f"(its tasks: {sorted(tasks)}; variant_mode {self.variant_mode})"
                    )
                name, k = task, 0
                while name in ste_logs:  # several STE logs of one task: task, task-1, task-2, ...
                    k += 1
                    name = f"{task}-{k}"
                ste_logs[name], ste_dirs[name] = ste, d
        record = RLRecord(
            log=log,
            kind=str(log.scenario_info.get("scenario_type", "custom")),
            log_dir=scenario,
            ste_logs=ste_logs,
            ste_dirs=ste_dirs,
            ste_status={k: "given" for k in ste_logs},
        )
        return SourceData(
            protocol="lifelong_rl",
            record=record,
            tags={
                "rl_mode": "given",
                "source": "l2logger",
                "log": scenario.name,
                "episodes": str(len(log)),
                "ste_logs": ",".join(ste_logs) or "none",
            },
        )

    def _key(self, task: str) -> str:
        return task.split("_")[0] if self.variant_mode == "agnostic" else task

    def _read(self, directory: Path) -> EpisodeLog:
        try:
            log = read_log(directory, perf_measure=self.perf_measure)
        except L2LogError as exc:
            raise SourceFormatError(str(exc)) from None
        if len(log) == 0:
            raise SourceFormatError(f"{directory}: no complete episode with a {self.perf_measure!r} value")
        return log


def scenario_dir(path: Path, what: str) -> Path:
    """The scenario directory at ``path``: itself when it holds ``logger_info.json`` or data files directly,
    else its only subdirectory with a ``logger_info.json``."""
    if not path.is_dir():
        raise SourceFormatError(f"{path}: log directory not found ({what})")
    listing = list_files(path, what=f"l2logger log folder ({what})")  # a link anywhere below is an error
    if INFO_FILE in listing:
        return path
    found = sorted(path / rel.split("/")[0] for rel in listing if rel.count("/") == 1 and rel.endswith(f"/{INFO_FILE}"))
    if len(found) == 1:
        return found[0]
    if len(found) > 1:
        raise SourceFormatError(
            f"{path}: holds {len(found)} l2logger logs ({', '.join(p.name for p in found)}); give one of them ({what})"
        )
    return path  # no logger_info.json: read_log searches for data-log.tsv itself (and says if there is none)


def ste_dirs_under(path: Path) -> list[Path]:
    """An STE path is one log (``logger_info.json`` inside) or a folder of logs (one per subdirectory)."""
    if not path.is_dir():
        raise SourceFormatError(f"{path}: STE log directory not found (source.ste_paths)")
    listing = list_files(path, what="STE log folder (source.ste_paths)")
    if INFO_FILE in listing:
        return [path]
    found = sorted({(path / rel).parent for rel in listing if rel.rsplit("/", 1)[-1] == INFO_FILE})
    return found or [path]
