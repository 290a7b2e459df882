"""What the prepare step hands on: a :class:`PreparedJob` (built and checked before any MLflow run exists), what
scoring needs of it (:class:`Scorer`), and the plain values the launching process needs (:class:`JobHeader`)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Protocol

from owl_eval.datasets.provenance import DataInput
from owl_eval.evaluation import Evaluation
from owl_eval.evaluation.options import MetricOptions
from owl_eval.metrics.keys import MetricKey
from owl_eval.protocols.base import Record
from owl_eval.runner.job.config import JobConfig
from owl_eval.tracking.keys import logged_as

log = logging.getLogger(__name__)


class RecordStep(Protocol):
    """How a job gets its record: its agents run (:class:`owl_eval.runner.job.live.AgentsRun`), or results produced
    elsewhere read (:class:`owl_eval.runner.job.source.SourceRead`)."""

    def make(self) -> Record: ...


@dataclass
class Scorer:
    """What scoring a record needs (no agents, no data): picklable, so that the launching process can score the
    record so far of a job's process that was killed. ``driver``: the protocol's driver, whose tags say what the
    record holds (None when the record was read, not made)."""

    evaluation: Evaluation
    metric_options: MetricOptions
    log_record: bool
    driver: Any | None = None

    def record_tags(self, record: Record) -> dict[str, str]:
        """The tags a (complete or partial) record tells: the driver's, then the evaluation's."""
        own = (self.driver.tags() | self.driver.record_tags(record)) if self.driver is not None else {}
        return own | self.evaluation.run_tags(
            record, self.metric_options, record_logged=self.log_record, logged_as=logged_as(self.evaluation.name)
        )


@dataclass
class PreparedJob:
    """Everything a job needs, built and checked before any MLflow run exists."""

    kind: str  # the run's run_kind tag: "job" (agents run) or "evaluate" (a source read)
    config: JobConfig
    scorer: Scorer
    record_step: RecordStep
    tags: dict[str, str]
    run_name: str
    setup_key: MetricKey = MetricKey("setup_s", timing=True)  # the seconds until the run starts (time/setup_s)
    record_key: MetricKey | None = MetricKey("protocol_s", timing=True)  # the record step's seconds (time/protocol_s)
    resumable: bool = True  # a resumed sweep skips a config that already has a finished run
    parts: dict[str, Any] = field(default_factory=dict)  # what was built (driver, domain, agents), for tests
    inputs: tuple[DataInput, ...] = ()  # the data sets the domain read (owl_eval.datasets.provenance)

    @property
    def evaluation(self) -> Evaluation:
        return self.scorer.evaluation

    @property
    def metric_options(self) -> MetricOptions:
        return self.scorer.metric_options


@dataclass(frozen=True)
class JobHeader:
    """What the launching process needs of a prepared job: plain values, handed over from the job's process."""

    kind: str
    protocol: str
    config_hash: str  # the job's identity with the data it read (owl_eval.config_hash)
    tags: dict[str, str]
    run_name: str
    setup_key: MetricKey
    resumable: bool
    inputs: tuple[DataInput, ...] = ()
    scorer: bytes | None = None  # the pickled Scorer, to score a killed job's saved record here


def job_header(job: PreparedJob, *, scorer: bool = False) -> JobHeader:
    """The plain values of ``job``; with ``scorer``, what scores a record so far too."""
    return JobHeader(
        job.kind,
        job.evaluation.name,
        job.config.config_hash(job.inputs),
        job.tags,
        job.run_name,
        job.setup_key,
        job.resumable,
        job.inputs,
        _pickled(job.scorer) if scorer else None,
    )


def _pickled(scorer: Scorer) -> bytes | None:
    import cloudpickle  # type: ignore[import-untyped]  # a plugin's evaluation may hold functions pickle refuses

    try:
        return cloudpickle.dumps(scorer)
    except Exception as exc:  # noqa: BLE001 - only the rescue of a killed job's work depends on it
        log.warning("a killed job's completed part could not be scored: %s: %s", type(exc).__name__, exc)
        return None
