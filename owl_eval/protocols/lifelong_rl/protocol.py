"""The lifelong-RL protocol's descriptor: syllabi of learning and evaluation blocks, l2metrics' lifetime
metrics (METRICS.md section 4)."""

from pathlib import Path

from owl_eval.metrics.results import MetricSpec, count_spec
from owl_eval.protocols.descriptor import Protocol

PROTOCOL = Protocol(
    name="lifelong_rl",
    title="Lifelong reinforcement learning over a syllabus",
    driver="owl_eval.protocols.lifelong_rl.driver:RLSyllabusDriver",
    evaluation="owl_eval.protocols.lifelong_rl.evaluation:LifelongRLEvaluation",
    options="owl_eval.protocols.lifelong_rl.options:LifelongRLMetricOptions",
    metric_modules=("owl_eval.protocols.lifelong_rl.metrics",),
    # l2metrics' lifetime summary
    headline=(
        "perf_recovery",
        "perf_maintenance_mrlep",
        "forward_transfer_ratio",
        "backward_transfer_ratio",
        "ste_rel_perf",
        "sample_efficiency",
    ),
    config=str(Path(__file__).parent / "conf"),
    reported=(
        *(
            count_spec(f"ste/{s}", "lifelong_rl", f"tasks whose single-task-expert log was {s}")
            for s in ("reused", "computed", "missing")
        ),
        count_spec("episodes", "lifelong_rl", "episodes in the log"),
        MetricSpec(
            "reward",
            "lifelong_rl",
            True,
            description="reward per episode (the log's perf_measure column), a series",
            series=True,
        ),
        MetricSpec(
            "reward_processed",
            "lifelong_rl",
            True,
            description="reward per episode after smoothing and normalisation, a series",
            series=True,
        ),
    ),
    key_qualifiers=("task",),
    record_files={
        "rl_record.json": "owl_eval.protocols.lifelong_rl.sources.saved:read_saved",
        "": "owl_eval.protocols.lifelong_rl.sources.saved:read_log_directory",
    },
    record_folder="data-log.tsv",
)
