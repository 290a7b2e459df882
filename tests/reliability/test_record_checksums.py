"""A record re-scored after one of its files changed is refused, never reported as the re-score of the old run.

Every record's ``save`` writes ``record_checksums.json`` (SHA-256 of every file of the folder); ``owl-eval-evaluate
+source=record`` compares the folder with it: a rewritten, removed or added file is one ``error:`` line naming
the file (and both SHA-256s), no run, nothing written. A record without checksums (saved before they were kept)
is scored as before and tagged ``owl_eval.record_unverified=true``. The downloaded-record flow of the README
(``mlflow artifacts download ... -a record``, then ``+source=record``) is run end to end on the store.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.reliability.harness import assert_clean_failure, run_cli
from tests.reliability.test_record_errors import continual_record, ond_record

EVALUATE = "owl_eval.runner.cli.evaluate"
K = "metrics.k_values=[2]"  # the trajectories fixture has 2 predictions per agent


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rescore(workspace, path: Path, *args: str):
    return run_cli(EVALUATE, ["+source=record", f"source.path={path}", *args], workspace)


def runs(workspace) -> list:
    """The store's runs made by the tests (the template's run 'existing' left out), newest first."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{workspace.db}")
    experiments = [e.experiment_id for e in client.search_experiments()]
    return client.search_runs(experiments, filter_string="attributes.run_name != 'existing'")


def rewrite_predictions(npz: Path) -> None:
    """The record's predictions rewritten in place, as a script regenerating them would: a valid record of
    the same layout whose numbers differ."""
    with np.load(npz, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    arrays["agent/p_world_changed"] = 1.0 - arrays["agent/p_world_changed"]
    np.savez_compressed(npz, **arrays)


def test_rewritten_predictions_are_refused_naming_the_file_and_both_checksums(tmp_path, workspace):
    npz = ond_record(tmp_path / "record")
    assert (tmp_path / "record" / "record_checksums.json").is_file()
    saved = sha256(npz)
    rewrite_predictions(npz)
    line = assert_clean_failure(rescore(workspace, tmp_path / "record"), str(npz), "changed", saved, sha256(npz))
    assert "mlflow artifacts download" in line  # what to do
    # the file given directly is checked against its folder's checksums too
    assert_clean_failure(rescore(workspace, npz), str(npz), "changed")


def test_unchanged_record_is_rescored_and_tagged_with_its_checksums(tmp_path, workspace):
    ond_record(tmp_path / "record")
    result = rescore(workspace, tmp_path / "record")
    assert result.returncode == 0, result.stderr
    (run,) = runs(workspace)
    assert run.info.status == "FINISHED"
    assert run.data.tags["owl_eval.record_sha256"] == sha256(tmp_path / "record" / "record_checksums.json")
    assert "owl_eval.record_unverified" not in run.data.tags


def test_a_record_without_checksums_is_scored_but_tagged_unverified(tmp_path, workspace):
    ond_record(tmp_path / "record")
    (tmp_path / "record" / "record_checksums.json").unlink()
    result = rescore(workspace, tmp_path / "record")
    assert result.returncode == 0, result.stderr
    warning = [line for line in result.stdout.splitlines() if "WARNING" in line and "record_checksums.json" in line]
    assert warning and "owl_eval.record_unverified" in warning[0], result.stdout  # Hydra's log goes to stdout
    (run,) = runs(workspace)
    assert run.info.status == "FINISHED" and run.data.tags["owl_eval.record_unverified"] == "true"
    assert "owl_eval.record_sha256" not in run.data.tags


def test_removed_added_and_edited_text_files_are_refused(tmp_path, workspace):
    """Siblings: a file listed but gone, a file the run did not save, a text copy edited, a forged checksums file."""
    continual_record(tmp_path / "gone")
    (tmp_path / "gone" / "accuracy_matrix.csv").unlink()
    assert_clean_failure(rescore(workspace, tmp_path / "gone"), "accuracy_matrix.csv", "missing")

    continual_record(tmp_path / "added")
    (tmp_path / "added" / "notes.txt").write_text("added later\n")
    assert_clean_failure(rescore(workspace, tmp_path / "added"), "notes.txt", "not part of the record")

    continual_record(tmp_path / "edited")
    csv = tmp_path / "edited" / "renate_results.json"
    csv.write_text(csv.read_text().replace("0.9", "0.95"))
    assert_clean_failure(rescore(workspace, tmp_path / "edited"), "renate_results.json", "changed")

    continual_record(tmp_path / "forged")
    (tmp_path / "forged" / "record_checksums.json").write_text(json.dumps({"files": []}))
    assert_clean_failure(rescore(workspace, tmp_path / "forged"), "record_checksums.json")


def test_rl_record_with_an_edited_log_or_an_added_ste_log_is_refused(tmp_path, workspace):
    from owl_eval.formats.l2logger import read_log
    from owl_eval.protocols.lifelong_rl.record import RLRecord
    from tests.sources.test_record_source import write_l2log

    log_dir = write_l2log(tmp_path / "logs")
    RLRecord(log=read_log(log_dir), log_dir=log_dir).save(tmp_path / "record")
    shutil.copytree(tmp_path / "record", tmp_path / "added")
    (tsv,) = (tmp_path / "record" / "l2log").rglob("1-test/data-log.tsv")
    assert "\t7.0\n" in tsv.read_text()
    tsv.write_text(tsv.read_text().replace("\t7.0\n", "\t70.0\n"))  # an evaluation reward rewritten
    assert_clean_failure(rescore(workspace, tmp_path / "record"), str(tsv), "changed")

    # an STE log dropped into the record later would be read as a reference: refused
    shutil.copytree(log_dir, tmp_path / "added" / "ste" / "task_a" / log_dir.name)
    assert_clean_failure(rescore(workspace, tmp_path / "added"), "ste/task_a", "not part of the record")


def test_downloaded_record_is_verified_and_a_rewritten_download_refused(tmp_path, workspace):
    """The README's flow: a run's record downloaded from the store, then re-scored; then one file rewritten."""
    from mlflow.tracking import MlflowClient

    ond_record(tmp_path / "saved")
    assert rescore(workspace, tmp_path / "saved").returncode == 0
    (first,) = runs(workspace)
    client = MlflowClient(tracking_uri=f"sqlite:///{workspace.db}")
    downloaded = Path(client.download_artifacts(first.info.run_id, "record", str(tmp_path / "downloaded")))
    assert (downloaded / "record_checksums.json").is_file()  # the logged record carries its checksums
    result = rescore(workspace, downloaded, "+metrics.threshold=0.7")
    assert result.returncode == 0, result.stderr
    second = next(r for r in runs(workspace) if r.info.run_id != first.info.run_id)
    assert second.data.tags["owl_eval.record_sha256"] == sha256(downloaded / "record_checksums.json")

    rewrite_predictions(downloaded / "ond_record.npz")
    assert_clean_failure(rescore(workspace, downloaded), "ond_record.npz", "changed")
    assert len(runs(workspace)) == 2


def test_a_plugin_protocol_record_is_sealed_by_the_runner(tmp_path, workspace):
    """A plugin's record whose ``save`` writes no checksums (the example plugin's) gets them from the runner: its
    logged record is re-scored as verified, and refused once changed."""
    pytest.importorskip("owl_eval_selective")
    from mlflow.tracking import MlflowClient

    result = run_cli("runner", ["+experiment=selective_digits", "figures=false"], workspace)
    assert result.returncode == 0, result.stderr
    (run,) = runs(workspace)
    client = MlflowClient(tracking_uri=f"sqlite:///{workspace.db}")
    downloaded = Path(client.download_artifacts(run.info.run_id, "record", str(tmp_path / "downloaded")))
    assert (downloaded / "record_checksums.json").is_file()
    assert rescore(workspace, downloaded).returncode == 0
    rescored = next(r for r in runs(workspace) if r.info.run_id != run.info.run_id)
    assert rescored.data.tags["owl_eval.record_sha256"] == sha256(downloaded / "record_checksums.json")
    (npz,) = downloaded.glob("*_record.npz")
    with np.load(npz, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    arrays["confidence"] = arrays["confidence"][::-1].copy()
    np.savez_compressed(npz, **arrays)
    assert_clean_failure(rescore(workspace, downloaded), npz.name, "changed")


def test_rewritten_predictions_file_named_by_a_trajectories_record_is_refused(tmp_path, workspace):
    """The record of a ``+source=trajectories`` run points at the predictions file outside it (not copied: it may
    be gigabytes); the record keeps its SHA-256, and a re-score after the file was rewritten is refused."""
    from mlflow.tracking import MlflowClient

    from tests.reliability.test_trajectories_errors import arrays

    predictions = tmp_path / "predictions.npz"
    np.savez(predictions, **arrays())
    first = run_cli(EVALUATE, ["+source=trajectories", f"source.path={predictions}", K], workspace)
    assert first.returncode == 0, first.stderr
    (run,) = runs(workspace)
    client = MlflowClient(tracking_uri=f"sqlite:///{workspace.db}")
    downloaded = Path(client.download_artifacts(run.info.run_id, "record", str(tmp_path / "downloaded")))
    summary = json.loads((downloaded / "trajectory_source.json").read_text())
    assert summary["sha256"] == sha256(predictions)
    assert rescore(workspace, downloaded, "+" + K).returncode == 0
    rescored = next(r for r in runs(workspace) if r.info.run_id != run.info.run_id)
    assert rescored.data.tags["owl_eval.predictions_sha256"] == sha256(predictions)

    saved = sha256(predictions)
    data = arrays()
    data["Path_pred"] = data["Path_pred"] + 0.5  # new predictions, same layout
    np.savez(predictions, **data)
    assert_clean_failure(
        rescore(workspace, downloaded, "+" + K), str(predictions), "changed", saved, sha256(predictions)
    )

    # a summary saved before checksums were kept: scored, tagged unverified
    del summary["sha256"]
    (downloaded / "trajectory_source.json").write_text(json.dumps(summary))
    (downloaded / "record_checksums.json").unlink()
    result = rescore(workspace, downloaded, "+" + K)
    assert result.returncode == 0, result.stderr
    newest = [r for r in runs(workspace) if r.info.run_id not in (run.info.run_id, rescored.info.run_id)]
    assert [r.data.tags.get("owl_eval.record_unverified") for r in newest] == ["true"]
