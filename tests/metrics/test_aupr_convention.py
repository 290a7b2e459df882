"""The AUPR convention docs/METRICS.md states, on its own example: ``aupr_novel`` is average precision
(scikit-learn's step sum), not OpenOOD's trapezoidal area under the precision-recall curve."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from owl_eval.protocols.ond.metrics.open_set import average_precision

METRICS_MD = Path(__file__).resolve().parents[2] / "docs" / "METRICS.md"

# 20 samples with distinct scores, highest first; the novel ones rank 2, 3, 5, 8 and 11 (1-based)
RANKS = [2, 3, 5, 8, 11]
SCORES = np.linspace(1.0, 0.05, 20)
LABELS = np.isin(np.arange(1, 21), RANKS).astype(int)

# AP by hand: the precision at each novel sample's rank, averaged (recall grows by 1/5 at each)
AP = (1 / 2 + 2 / 3 + 3 / 5 + 4 / 8 + 5 / 11) / 5
# OpenOOD's trapezoid by hand over sklearn's curve: recall 0 -> 0.2 from precision 0 (rank 1) to 1/2; each later
# step from the lowest precision at the previous recall (the rank just before the next hit) to the next hit's
TRAPEZOID = 0.2 * ((0 + 1 / 2) + (1 / 2 + 2 / 3) + (2 / 4 + 3 / 5) + (3 / 7 + 4 / 8) + (4 / 10 + 5 / 11)) / 2


def test_our_aupr_is_average_precision_and_not_the_trapezoid():
    assert AP == pytest.approx(0.5442424, abs=1e-7) and TRAPEZOID == pytest.approx(0.4549784, abs=1e-7)
    assert average_precision(LABELS, SCORES) == pytest.approx(AP, abs=1e-12)


def test_the_two_conventions_are_sklearns_functions():
    metrics = pytest.importorskip("sklearn.metrics")
    assert metrics.average_precision_score(LABELS, SCORES) == pytest.approx(AP, abs=1e-12)
    precision, recall, _ = metrics.precision_recall_curve(LABELS, SCORES)
    assert metrics.auc(recall, precision) == pytest.approx(TRAPEZOID, abs=1e-12)


def test_metrics_md_quotes_these_numbers():
    text = " ".join(METRICS_MD.read_text().split())
    assert "rank 2, 3, 5, 8 and 11 give AP 0.544 and trapezoid 0.455, 0.089 apart" in text
    assert f"{AP:.3f}" == "0.544" and f"{TRAPEZOID:.3f}" == "0.455" and f"{AP - TRAPEZOID:.3f}" == "0.089"
