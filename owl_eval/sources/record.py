"""Records saved by owl-eval runs (the ``record/`` artifact folder), re-scored without re-running agents.

The kind is detected from the file name (``source.path`` may be the file or the folder holding it):
``ond_record.npz``, ``continual_record.npz``, ``trajectory_record.npz``, ``rl_record.json`` (a lifelong-RL
record folder: ``l2log/`` and ``ste/``), ``trajectory_source.json`` (a trajectories-source run: the file it
names is read again), or a bare l2logger log directory. The metric settings are the protocol's
defaults (the typed options of :mod:`owl_eval.evaluation.options`, equal to ``owl_eval/conf/metrics/<protocol>.yaml``)
with whatever the command line gives under ``metrics``: ``+metrics.threshold=0.7`` (or ``+metrics=ond
metrics.threshold=0.7``). A key the protocol does not know is an error before any run is created.

A record is user data once downloaded: a folder is listed without following links (a link anywhere in it
is an error), every ``.npz`` member's CRC, dtype and shape is checked, values are checked as the matching
source checks them (:mod:`owl_eval.sources.record_checks`), and a ``<kind>_record.*`` of a protocol we do not
know is named as such. Anything wrong is one error naming the file (and array, index or key).
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Mapping
from pathlib import Path

from owl_eval.errors import ConfigError, UnsafePathError
from owl_eval.json_input import parse_json
from owl_eval.metrics.validation import MetricInputError
from owl_eval.safe_paths import list_files, read_text, regular_file
from owl_eval.sources import SourceData, SourceFormatError
from owl_eval.sources.record_checks import check_continual, check_trajectory
from owl_eval.typed import as_int, as_str

KINDS = {  # file name -> protocol name
    "ond_record.npz": "ond",
    "continual_record.npz": "continual",
    "trajectory_record.npz": "trajectory",
    "rl_record.json": "lifelong_rl",
    "trajectory_source.json": "trajectory",
}


RECORD_NAME = re.compile(r"^(?P<kind>.+)_record\.(npz|json)$")  # how any record file is named
PROTOCOLS = ("ond", "continual", "trajectory", "lifelong_rl")
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


class RecordSource:
    """Options are kept as given and checked in :meth:`load` (owl_eval.typed), before any run exists."""

    def __init__(self, path: str, metrics: Mapping | None = None, chunk_size: int = 256):
        self.path, self.given, self.chunk_size = path, metrics, chunk_size

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
        return data

    def _find(self) -> Path:
        """The record file (or a bare l2logger log directory); a folder is listed without following links."""
        try:
            given = self.path.resolve()  # the path the user named (a link to it is fine)
        except (OSError, RuntimeError) as exc:  # RuntimeError: a link loop
            raise SourceFormatError(f"{self.path}: cannot be read ({exc})") from None
        if given.is_file():
            if given.name not in KINDS:
                raise SourceFormatError(f"{self.path}: not a record file (expected one of {sorted(KINDS)})")
            return regular_file(given, what="record file")
        if not given.is_dir():
            raise SourceFormatError(f"{self.path}: file or directory not found")
        files = list_files(given, what="record folder")  # a link anywhere inside is one error
        found = [given / name for name in KINDS if name in files]
        if len(found) > 1:
            raise SourceFormatError(
                f"{given}: holds several records ({', '.join(p.name for p in found)}); give the file"
            )
        if found:
            return found[0]
        if any(rel == "data-log.tsv" or rel.endswith("/data-log.tsv") for rel in files):
            return given  # a bare l2logger log directory
        unknown = sorted(rel for rel in files if "/" not in rel and RECORD_NAME.match(rel))
        if unknown:
            kind = RECORD_NAME.match(unknown[0])["kind"]
            raise SourceFormatError(
                f"{given / unknown[0]}: a record of an unknown protocol {kind[:60]!r}; known "
                f"protocols: {', '.join(PROTOCOLS)} (record files {', '.join(sorted(KINDS))})"
            )
        raise SourceFormatError(
            f"{given}: no record here (expected one of {sorted(KINDS)} or an l2logger log directory)"
        )

    def _load(self, file: Path) -> SourceData:
        name = file.name if file.is_file() else ""
        if name == "ond_record.npz":
            from owl_eval.protocols.ond.record import OndRecord

            record = OndRecord.load(file)
            return SourceData("ond", record, {"condition": record.condition, "trials": str(len(record.trials))})
        if name == "continual_record.npz":
            return load_continual(file)
        if name == "trajectory_record.npz":
            from owl_eval.protocols.trajectory.record import TrajectoryRecord

            record = TrajectoryRecord.load(file)
            check_trajectory(file, record)
            return SourceData("trajectory", record, {"scenes": str(record.num_scenes)})
        if name == "trajectory_source.json":
            return self._trajectories_again(file)
        from owl_eval.sources.l2logger import L2LoggerSource

        if name == "rl_record.json":
            from owl_eval.protocols.lifelong_rl.record import RLRecord

            record = RLRecord.load(file)  # lists the record folder without links, checks every name
            return SourceData("lifelong_rl", record, {"rl_mode": "given", "episodes": str(len(record.log))})
        perf = str(self.given.get("perf_measure", "reward"))
        return L2LoggerSource(
            str(file), perf_measure=perf, variant_mode=str(self.given.get("variant_mode", "aware"))
        ).load()

    def _trajectories_again(self, file: Path) -> SourceData:
        """A trajectories-source run's summary: the .npz it names is read (and checked) again."""
        from owl_eval.sources.trajectories import TrajectoriesSource

        summary = read_json_object(file)
        path, arrays, seed = summary.get("path"), summary.get("arrays", {}), summary.get("seed", 0)
        if not isinstance(path, str) or not path:
            raise SourceFormatError(f"{file}: key 'path': expected the .npz file name, got {str(path)[:60]!r}")
        if not isinstance(arrays, dict) or not all(isinstance(v, str) or v is None for v in arrays.values()):
            raise SourceFormatError(f"{file}: key 'arrays': expected an object of array names (strings or null)")
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
            raise SourceFormatError(f"{file}: key 'seed': expected an integer in [0, 2**63), got {str(seed)[:30]}")
        source = TrajectoriesSource(
            path,
            chunk_size=self.chunk_size,
            true_key=arrays.get("true") or "Path_true",
            pred_key=arrays.get("pred") or "Path_pred",
            mask_key=arrays.get("mask") or "Pred_steps",
            log_probs=arrays.get("log_probs"),
            seed=seed,
        )
        try:
            return source.load()
        except SourceFormatError as exc:
            raise SourceFormatError(f"{exc} (the file named by {file})") from None


def read_json_object(file: Path) -> dict:
    """A small JSON object file of a record, read without following links; one error naming the file."""
    return parse_json(
        read_text(file, what="record file"), where=str(file), error=SourceFormatError, expect_object="record settings"
    )


# --------------------------------------------------------------------------------- continual


def load_continual(file: Path) -> SourceData:
    from owl_eval.protocols.continual.record import ContinualRecord
    from owl_eval.sources.accuracy_matrix import GivenMatrixRecord

    record = ContinualRecord.load(file)
    has_init, has_sizes = check_continual(file, record)
    record = GivenMatrixRecord(
        **{
            f: getattr(record, f)
            for f in ("scenario", "accuracy", "init_accuracy", "num_instances", "task_classes", "domain")
        },
        has_init=has_init,
        has_sizes=has_sizes,
    )
    return SourceData("continual", record, {"scenario": record.scenario, "tasks": str(record.num_tasks)})
