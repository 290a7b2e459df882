"""The continual-learning protocol's descriptor: a task sequence and its accuracy matrix (METRICS.md section 2)."""

from pathlib import Path

from owl_eval.metrics.results import MetricSpec, count_spec
from owl_eval.protocols.descriptor import Protocol

PROTOCOL = Protocol(
    name="continual",
    title="Continual learning over a task sequence",
    driver="owl_eval.protocols.continual.driver:ContinualDriver",
    evaluation="owl_eval.protocols.continual.evaluation:ContinualEvaluation",
    options="owl_eval.protocols.continual.options:ContinualMetricOptions",
    metric_modules=("owl_eval.protocols.continual.metrics",),
    # Renate's (and Avalanche's) summaries
    headline=("average_accuracy", "micro_average_accuracy", "forgetting", "backward_transfer", "forward_transfer"),
    config=str(Path(__file__).parent / "conf"),
    reported=(
        count_spec("tasks_completed", "continual", "tasks learned and evaluated before the run ended"),
        MetricSpec(
            "accuracy",
            "continual",
            True,
            (0.0, 1.0),
            description="task/<i>/accuracy: accuracy on task i after each update (column i of A), a series; "
            "for at most metrics.max_task_series tasks (evenly spread), the whole matrix being in the record",
            series=True,
        ),
    ),
    key_qualifiers=("by_task", "task"),
    record_files={"continual_record.npz": "owl_eval.protocols.continual.sources.saved:read_saved"},
)
