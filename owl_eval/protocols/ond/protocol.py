"""The OND protocol's descriptor: SAIL-ON open-world novelty detection (METRICS.md section 1)."""

from pathlib import Path

from owl_eval.protocols.descriptor import Protocol

PROTOCOL = Protocol(
    name="ond",
    title="Open-world novelty detection (SAIL-ON OND)",
    driver="owl_eval.protocols.ond.driver:OndDriver",
    evaluation="owl_eval.protocols.ond.evaluation:OndEvaluation",
    options="owl_eval.protocols.ond.options:OndMetricOptions",
    metric_modules=("owl_eval.protocols.ond.metrics",),
    # the SAIL-ON program metrics first, then the open-set summaries
    headline=(
        "top1",
        "top3",
        "m1_mean_fn_cdt",
        "m2_cdt_pct",
        "m21_fp_pct",
        "m3_nrp_top1",
        "m4_nrp_top1",
        "m5_opti_top1",
        "m6_apti_top1",
        "auroc_novel",
        "oscr",
    ),
    config=str(Path(__file__).parent / "conf"),
    key_qualifiers=("baseline", "batch", "vs_threshold"),
    record_files={"ond_record.npz": "owl_eval.protocols.ond.sources.saved:read_saved"},
)
