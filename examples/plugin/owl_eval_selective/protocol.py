"""The selective-classification protocol's descriptor, registered under the ``owl_eval.protocols`` entry-point
group (``pyproject.toml``). Importing it imports no part of the protocol: owl-eval loads the parts named here
on first use."""

from pathlib import Path

from owl_eval.metrics.results import count_spec
from owl_eval.protocols.descriptor import Protocol

PROTOCOL = Protocol(
    name="selective",
    title="Selective classification (risk-coverage)",
    driver="owl_eval_selective.driver:SelectiveDriver",
    evaluation="owl_eval_selective.evaluation:SelectiveEvaluation",
    options="owl_eval_selective.options:SelectiveMetricOptions",
    metric_modules=("owl_eval_selective.metrics",),
    # what selective-prediction papers tabulate; {k}: every coverage of metrics.coverages, in percent
    headline=("aurc", "excess_aurc", "risk_at_{k}_coverage", "accuracy"),
    config=str(Path(__file__).parent / "conf"),
    reported=(count_spec("num_test", "selective", "test samples scored"),),
    record_files={"selective_record.npz": "owl_eval_selective.record:read_saved"},
)
