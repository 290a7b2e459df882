"""Selective figures: the risk-coverage curve with the oracle ranking's curve and the reported operating points."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from owl_eval.metrics.results import MetricResults  # noqa: E402


def risk_coverage_figure(data: dict, results: MetricResults):
    """Selective risk against coverage as the step curve AURC integrates (step integration), the oracle
    ranking's curve (its area is AURC minus E-AURC with ``optimal=empirical``), and a marker at each
    ``risk_at_<k>_coverage`` reported."""
    coverage, risk = np.asarray(data["coverage"]), np.asarray(data["risk"])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    label = "agent"
    if "aurc" in results.values:
        label += f" (AURC {results.values['aurc']:.4f}"
        label += f", E-AURC {results.values['excess_aurc']:.4f})" if "excess_aurc" in results.values else ")"
    # r(c) = r_j on (c_{j-1}, c_j]: drawn from coverage 0 so the area under the line is the AURC
    ax.step(np.concatenate([[0.0], coverage]), np.concatenate([risk[:1], risk]), where="pre", label=label)
    ax.plot(data["oracle_coverage"], data["oracle_risk"], color="gray", ls="--", lw=1, label="oracle ranking")
    for name, c in data["marked"].items():
        value = results.values.get(name)
        if value is not None:
            ax.plot([c], [value], "o", ms=6, clip_on=False, zorder=3, label=f"{name} = {value:.4f}")
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(bottom=0.0)
    ax.set_xlabel("coverage (share of test samples accepted)")
    ax.set_ylabel("selective risk (error rate among accepted)")
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(data["title"])
    fig.tight_layout()
    return fig


def selective_figures(data: dict, results: MetricResults) -> dict:
    return {"risk_coverage": risk_coverage_figure(data, results)}
