"""agent=ond/sailon_client from the command line alone (python -m owl_eval in the test process, tests/inprocess.py)
into the test session's SQLite MLflow store (tests/conftest.py) read back with MlflowClient: the fixture sail-on-client detector
(tests/fixtures/agents/ond/sailon_client_detector.py) gives the numbers its rule gives when written natively."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from owl_eval.datasets.classification import DigitsDomain
from owl_eval.protocols.ond.driver import OndDriver
from owl_eval.protocols.ond.record import OndRecord
from tests.agents.test_sailon_client_adapter import NativeNearestMean

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SIZES = {"num_trials": 3, "trials_without_novelty": 1, "pre_novelty": 20, "post_novelty": 40}
DETECTOR = "tests.fixtures.agents.ond.sailon_client_detector.NearestMeanDetector"


def test_a_sailon_client_detector_runs_from_the_command_line(experiment, client, tmp_path):
    from tests.inprocess import run_module

    record = tmp_path / "calls.jsonl"
    proc = run_module(
        "owl_eval",
        [
            "+experiment=ond_given_detection",
            "agent=ond/sailon_client",
            f"agent.detector._target_={DETECTOR}",
            f"+agent.detector.record={record}",
            "agent.adaptation_step=auto",
            *[f"protocol.{k}={v}" for k, v in SIZES.items()],
            "metrics.asymptotic_width=20",
            "seed=5",
            *experiment["overrides"],
            "figures=false",
            f"hydra.run.dir={tmp_path / 'job'}",
        ],
        cwd=PROJECT_ROOT,
        env={"MLFLOW_DISABLE_TELEMETRY": "true"},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = client.search_runs([client.get_experiment_by_name(experiment["name"]).experiment_id])
    assert run.info.status == "FINISHED"
    assert run.data.tags["agent"] == "ond/sailon_client"
    assert run.data.params["agent.detector._target_"] == DETECTOR

    # The same rule, written as a native OND agent, on the same trials (same seed and sizes): same numbers.
    native = OndDriver(condition="given", **SIZES).run(
        domain=DigitsDomain(), agent=NativeNearestMean(), rng=np.random.default_rng(5), progress=False
    )
    saved = OndRecord.load(client.download_artifacts(run.info.run_id, "record/ond_record.npz", str(tmp_path)))
    assert len(saved.trials) == 3
    for a, n in zip(saved.trials, native.trials):
        np.testing.assert_array_equal(a.gt_class, n.gt_class)
        np.testing.assert_array_equal(a.p_world_changed, n.p_world_changed)
        np.testing.assert_allclose(a.p_class, n.p_class, rtol=0, atol=1e-12)
    top1 = np.mean([np.mean(np.argmax(t.p_class, 1) == t.gt_class) for t in native.trials])
    assert run.data.metrics["top1"] == pytest.approx(top1, abs=1e-12)

    # The detector was driven as the client drives it: per trial one Initialize, 6 rounds, one characterization.
    steps = [json.loads(line)["step"] for line in record.read_text().splitlines()]
    per_trial = ["Initialize", *["FeatureExtraction", "WorldDetection", "NoveltyClassification", "NoveltyAdaption"] * 6]
    assert steps == (per_trial + ["NoveltyCharacterization"]) * 3
