"""The trajectory-prediction protocol's descriptor: General-Framework's metric table (METRICS.md section 3)."""

from pathlib import Path

from owl_eval.metrics.results import count_spec
from owl_eval.protocols.descriptor import Protocol

PROTOCOL = Protocol(
    name="trajectory",
    title="Multi-agent trajectory prediction",
    driver="owl_eval.protocols.trajectory.driver:TrajectoryDriver",
    evaluation="owl_eval.protocols.trajectory.evaluation:TrajectoryEvaluation",
    options="owl_eval.protocols.trajectory.options:TrajectoryMetricOptions",
    metric_modules=("owl_eval.protocols.trajectory.metrics",),
    # the forecasting leaderboards' columns; {k}: every K of metrics.k_values
    headline=(
        "ade_marginal",
        "fde_marginal",
        "min_ade_{k}_marginal",
        "min_fde_{k}_marginal",
        "miss_rate_marginal",
        "kde_nll_marginal",
        "kde_ece_marginal",
        "collision_rate_marginal",
    ),
    config=str(Path(__file__).parent / "conf"),
    reported=(
        count_spec("num_scenes", "trajectory", "scenes scored"),
        count_spec("num_agents", "trajectory", "agents with at least one valid future step"),
        count_spec("num_classified_agents", "trajectory", "agents with a behaviour class (AUC, ECE, TNR-PR)"),
    ),
    record_files={
        "trajectory_record.npz": "owl_eval.protocols.trajectory.sources.saved:read_saved",
        "trajectory_source.json": "owl_eval.protocols.trajectory.sources.saved:read_source_summary",
    },
)
