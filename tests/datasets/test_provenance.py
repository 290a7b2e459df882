"""Every run names the data it used: the digits domain's run has a "Datasets" entry (read back through MlflowClient)
whose digest is the sha256 written out here by hand; one changed value changes it, and the digest is part of the
config hash that a resumed sweep compares."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from sklearn.datasets import load_digits

from owl_eval.datasets.provenance import DataInput, array_digest, file_digest
from owl_eval.paths import CONFIG_DIR
from owl_eval.runner.job.config import config_hash

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def _by_hand(*arrays: np.ndarray) -> str:
    """The documented rule, written out: each array's dtype string and shape as text, then its bytes in C order."""
    h = hashlib.sha256()
    for a in arrays:
        h.update(f"{a.dtype.str}{tuple(a.shape)}".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def test_array_digest_follows_its_rule_and_sees_one_value():
    X = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.array([0, 1, 1])
    assert array_digest(X, y) == _by_hand(X, y)
    changed = X.copy()
    changed[2, 3] = np.nextafter(changed[2, 3], np.float32(100))  # one value, by one unit in the last place
    assert array_digest(changed, y) != array_digest(X, y)
    assert array_digest(X.astype(np.float64), y) != array_digest(X, y)  # the dtype counts
    assert array_digest(X.T.copy(), y) != array_digest(X, y)  # and the shape


def test_file_digest_follows_its_rule(tmp_path):
    (tmp_path / "b.txt").write_bytes(b"second")
    (tmp_path / "a.txt").write_bytes(b"first")
    expected = hashlib.sha256(b"a.txt" + b"first" + b"b.txt" + b"second").hexdigest()
    assert file_digest([tmp_path / "b.txt", tmp_path / "a.txt"], tmp_path) == expected
    (tmp_path / "b.txt").write_bytes(b"secone")
    assert file_digest([tmp_path / "a.txt", tmp_path / "b.txt"], tmp_path) != expected


def test_the_data_digest_is_part_of_a_runs_identity():
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["+experiment=ond_system_detection"])
    one = DataInput("d", "/data", "a" * 64, 10)
    other = DataInput("d", "/data", "b" * 64, 10)
    assert config_hash(cfg, [one]) == config_hash(cfg, [one])
    assert config_hash(cfg, [one]) != config_hash(cfg, [other]) != config_hash(cfg)


def test_a_runs_datasets_section_names_its_data(experiment, client, tmp_path):
    from tests.inprocess import run_module

    proc = run_module(
        "owl_eval",
        [
            "+experiment=ond_given_detection",
            "protocol.num_trials=2",
            *experiment["overrides"],
            f"hydra.run.dir={tmp_path}",
        ],
        cwd=tmp_path,
        env={"MLFLOW_DISABLE_TELEMETRY": "true"},
        unset=("MLFLOW_TRACKING_URI",),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    exp = client.get_experiment_by_name(experiment["name"])
    (run,) = client.search_runs([exp.experiment_id])
    (found,) = run.inputs.dataset_inputs
    data = load_digits()
    features = np.asarray(data.data, dtype=np.float64) / 16.0
    labels = np.asarray(data.target, dtype=np.int64)
    full = _by_hand(features, labels)
    assert found.dataset.name == "digits" and found.dataset.digest == full[:32]  # MLflow keeps 36 characters
    profile = json.loads(found.dataset.profile)
    assert profile["sha256"] == full and profile["num_samples"] == 1797 and profile["shape"] == [64]
    assert profile["class_names"] == [str(c) for c in range(10)]
    assert "sklearn.datasets.load_digits" in json.loads(found.dataset.source)["uri"]
    assert [(t.key, t.value) for t in found.tags] == [("mlflow.data.context", "evaluation")]


def test_a_source_evaluation_names_the_files_it_scored(experiment, client, tmp_path):
    from tests.inprocess import run_module

    sample = PROJECT_ROOT / "examples" / "results" / "accuracy_matrix" / "renate_results.json"
    proc = run_module(
        "owl_eval.runner.cli.evaluate",
        ["+source=accuracy_matrix", f"source.path={sample}", *experiment["overrides"], f"hydra.run.dir={tmp_path}"],
        cwd=tmp_path,
        env={"MLFLOW_DISABLE_TELEMETRY": "true"},
        unset=("MLFLOW_TRACKING_URI",),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    exp = client.get_experiment_by_name(experiment["name"])
    (run,) = client.search_runs([exp.experiment_id])
    (found,) = run.inputs.dataset_inputs
    by_hand = hashlib.sha256(b"renate_results.json" + sample.read_bytes()).hexdigest()
    assert found.dataset.name == "source.path: renate_results.json" and found.dataset.digest == by_hand[:32]
    assert json.loads(found.dataset.source)["uri"] == str(sample.resolve())


def test_an_rl_run_names_its_environments_and_a_changed_variant_changes_the_digest():
    pytest.importorskip("gymnasium", reason="the rl extra (gymnasium) is not installed")
    from owl_eval.protocols.lifelong_rl.domains import RLDomain

    def tasks(gravity: float) -> dict:
        return {"cartpole": {"family": "cartpole", "variants": {"default": {}, "low": {"gravity": gravity}}}}

    (one,) = RLDomain("cp", tasks(5.0)).provenance()
    (same,) = RLDomain("cp", tasks(5.0)).provenance()
    (other,) = RLDomain("cp", tasks(5.5)).provenance()
    text = json.dumps(tasks(5.0)["cartpole"], sort_keys=True, default=repr)
    assert one.digest == same.digest == hashlib.sha256(text.encode()).hexdigest() != other.digest
    assert one.name == "cp/cartpole" and one.num_samples == 2 and one.context == "environment"
