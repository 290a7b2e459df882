"""Continual task sequences from files: ``domain=split_dataset`` (tasks of classes, a given or seeded class order,
the data set's own split) and ``domain=dataset_sequence`` (one data set per task), checked on data made here, then
run from the command line with the Datasets section read back from the store."""

from __future__ import annotations

import numpy as np
import pytest

from owl_eval.errors import ConfigError
from owl_eval.protocols.continual.dataset_domains import DatasetSequence, SplitDataset

CLASSES = ("a", "b", "c", "d", "e", "f")


def write_npz(path, rng, *, shift=0.0, per_class=30, split=False, classes=CLASSES):
    y = np.repeat(np.arange(len(classes)), per_class)
    X = (rng.normal(size=(len(y), 4, 2)) + y[:, None, None] + shift).astype(np.float32)
    if split:
        train = np.arange(len(y)) % 3 != 0
        np.savez(
            path, X_train=X[train], y_train=y[train], X_test=X[~train], y_test=y[~train], classes=np.array(classes)
        )
    else:
        np.savez(path, X=X, y=y, classes=np.array(classes))
    return X, y


def test_classes_split_into_tasks_in_the_given_order(tmp_path):
    X, y = write_npz(tmp_path / "d.npz", np.random.default_rng(0))
    domain = SplitDataset(path=str(tmp_path / "d.npz"), classes_per_task=2, class_order=["f", "a", "c", "b", "e", "d"])
    tasks = domain.tasks(np.random.default_rng(1))
    assert [t.classes for t in tasks] == [(5, 0), (2, 1), (4, 3)]
    assert domain.num_features == 8 and domain.num_classes == 6
    for t in tasks:
        assert t.X_train.dtype == np.float32 and t.X_train.shape[1] == 8  # flat, in the data's own dtype
        assert not set(t.train_index) & set(t.test_index)
        assert set(np.unique(t.y_train)) == set(t.classes) == set(np.unique(t.y_test))
        # 30 per class, test_fraction 0.3: 9 test and 21 train samples per class
        assert len(t.y_test) == 18 and len(t.y_train) == 42
        assert np.array_equal(t.X_train, X[t.train_index].reshape(-1, 8))


def test_a_drawn_order_depends_on_the_seed_only(tmp_path):
    write_npz(tmp_path / "d.npz", np.random.default_rng(0))
    domain = SplitDataset(path=str(tmp_path / "d.npz"), classes_per_task=3)
    one = [t.classes for t in domain.tasks(np.random.default_rng(7))]
    assert one == [t.classes for t in domain.tasks(np.random.default_rng(7))]
    assert sorted(c for task in one for c in task) == list(range(6))
    orders = {tuple(t.classes for t in domain.tasks(np.random.default_rng(s))) for s in range(8)}
    assert len(orders) > 1
    assert domain.tags() == {"class_order": "drawn by the seed"}


def test_the_data_sets_own_split_is_used(tmp_path):
    write_npz(tmp_path / "s.npz", np.random.default_rng(0), split=True)
    tasks = SplitDataset(path=str(tmp_path / "s.npz"), classes_per_task=6).tasks(np.random.default_rng(0))
    (task,) = tasks
    assert len(task.y_train) == 120 and len(task.y_test) == 60  # rows with index % 3 == 0 are the test split


def test_bad_task_settings_are_one_line_each(tmp_path):
    write_npz(tmp_path / "d.npz", np.random.default_rng(0))
    path = str(tmp_path / "d.npz")
    with pytest.raises(ConfigError, match=r"domain.classes_per_task: 4 does not divide the 6 classes of 'd.npz'"):
        SplitDataset(path=path, classes_per_task=4).check()
    with pytest.raises(ConfigError, match=r"domain.class_order: no class named \['z'\] in 'd.npz'"):
        SplitDataset(path=path, class_order=["a", "b", "c", "d", "e", "z"]).check()
    with pytest.raises(ConfigError, match=r"domain.class_order must name each of the 6 classes"):
        SplitDataset(path=path, class_order=["a", "b"]).check()
    y = np.array([0, 0, 0, 1])
    np.savez(tmp_path / "few.npz", X=np.zeros((4, 2), np.float32), y=y, classes=np.array(["x", "y"]))
    with pytest.raises(ConfigError, match=r"class\(es\) \['y'\] have fewer than 2 samples"):
        SplitDataset(path=str(tmp_path / "few.npz"), classes_per_task=1).tasks(np.random.default_rng(0))


def test_one_data_set_per_task(tmp_path):
    rng = np.random.default_rng(0)
    paths = []
    for day in range(3):
        write_npz(tmp_path / f"day{day}.npz", rng, shift=0.5 * day)
        paths.append(str(tmp_path / f"day{day}.npz"))
    domain = DatasetSequence(paths=paths)
    tasks = domain.tasks(np.random.default_rng(0))
    assert [t.task_id for t in tasks] == [0, 1, 2] and all(t.classes == tuple(range(6)) for t in tasks)
    assert [i.name for i in domain.provenance()] == ["day0.npz", "day1.npz", "day2.npz"]
    write_npz(tmp_path / "other.npz", rng, classes=("a", "b", "c", "d", "e", "g"))
    with pytest.raises(
        ConfigError, match=r"domain.paths: 'other.npz' has the classes .* every task of a domain-incremental"
    ):
        DatasetSequence(paths=[paths[0], str(tmp_path / "other.npz")]).check()
    with pytest.raises(ConfigError, match=r"domain.paths: expected a list of data sets"):
        DatasetSequence(paths="day0.npz")


@pytest.mark.parametrize("kind", [pytest.param("split_dataset", marks=pytest.mark.slow), "dataset_sequence"])
def test_a_continual_run_on_files_names_its_data(kind, experiment, client, tmp_path):
    from tests.inprocess import run_module

    rng = np.random.default_rng(3)
    paths = []
    for day in range(2):
        write_npz(tmp_path / f"day{day}.npz", rng, shift=day)
        paths.append(str(tmp_path / f"day{day}.npz"))
    where = f"domain.path={paths[0]}" if kind == "split_dataset" else f"domain.paths=[{','.join(paths)}]"
    proc = run_module(
        "owl_eval",
        ["+experiment=continual_split_digits", f"domain={kind}", where, "agent=continual/sklearn"]
        + [*experiment["overrides"], f"hydra.run.dir={tmp_path / 'hydra'}"],
        cwd=tmp_path,
        env={"MLFLOW_DISABLE_TELEMETRY": "true"},
        unset=("MLFLOW_TRACKING_URI",),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = client.search_runs([client.get_experiment_by_name(experiment["name"]).experiment_id])
    assert run.info.status == "FINISHED" and "average_accuracy" in run.data.metrics
    names = [d.dataset.name for d in run.inputs.dataset_inputs]
    assert names == (["day0.npz"] if kind == "split_dataset" else ["day0.npz", "day1.npz"])
    tasks = run.data.tags["task_classes"].split(" | ")
    assert len(tasks) == (3 if kind == "split_dataset" else 2)
