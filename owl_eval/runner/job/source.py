"""``owl-eval-evaluate``'s prepare step: results produced elsewhere read and validated whole, the metric settings
typed against what they hold; the record step hands over what was read (:class:`SourceRead`).

Sources: ``sailon`` (sail-on-client OND results), ``l2logger`` (an l2logger log directory and STE logs),
``accuracy_matrix`` (Renate's results dict or a CSV matrix), ``trajectories`` (General-Framework arrays in an
``.npz``), and ``record`` (a record saved by an owl-eval run, to recompute with other metric settings). Everything
is read and validated first; only then is an MLflow run created and logged exactly like a live run (no half-logged
runs).
"""

from __future__ import annotations

from dataclasses import dataclass

from omegaconf import DictConfig

from owl_eval.datasets.provenance import path_inputs
from owl_eval.errors import ConfigError
from owl_eval.evaluation import evaluation_for
from owl_eval.metrics.keys import MetricKey
from owl_eval.protocols.base import Record
from owl_eval.runner.config.build import build_part
from owl_eval.runner.job.config import JobConfig, read_job_config
from owl_eval.runner.job.prepared import PreparedJob, Scorer


@dataclass
class SourceRead:
    """The record step of ``owl-eval-evaluate``: the record the source read."""

    record: Record

    def make(self) -> Record:
        return self.record


def prepare_source(cfg: DictConfig, job: JobConfig | None = None) -> PreparedJob:
    """Read and validate the whole source, type the metric settings against what it holds: any problem is one
    error naming the file or key, before any run exists. ``job``: the job's config as read (default: from ``cfg``)."""
    if not cfg.get("source"):
        from owl_eval.paths import group_options

        raise ConfigError("source: none chosen; add +source=<kind> (one of " + ", ".join(group_options("source")) + ")")
    job = job or read_job_config(cfg)
    source = build_part(cfg, "source")
    data = source.load()  # validate everything before any run exists
    evaluation = evaluation_for(data.protocol)
    metric_options = evaluation.options(cfg.get("metrics") or {}, record=data.record)  # instantiated, checked
    tags = dict(data.tags)
    run_name = f"evaluate-{tags.get('source', 'source')}-{tags.get('session', tags.get('agent', ''))}".rstrip("-")
    return PreparedJob(
        kind="evaluate",
        config=job,
        scorer=Scorer(evaluation, metric_options, job.settings.log_record),
        record_step=SourceRead(data.record),
        tags=tags,
        run_name=run_name,
        setup_key=MetricKey("read_s", timing=True),
        record_key=None,
        resumable=False,
        inputs=path_inputs(dict(job.resolved.get("source") or {}), prefix="source"),
    )
