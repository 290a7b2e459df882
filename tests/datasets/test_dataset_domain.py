"""``domain=dataset``: the same samples as an ``.npz``, a parquet table, an image folder and a saved Hugging Face data
set give identical OND numbers for the same seed, each run names its data (digest) in its Datasets section, the
known classes can be named, a data set's own train/test split is used, and a changed byte makes a resumed sweep run
again instead of reusing the run made on the old data."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from owl_eval.datasets.classification import LabeledData
from owl_eval.datasets.domain import DatasetDomain
from owl_eval.errors import ConfigError
from tests.datasets.test_readers import png, write_hf

CLASSES = ("ant", "bee", "cow", "dog", "eel", "fox")
PER_CLASS = 40
N = PER_CLASS * len(CLASSES)
SMALL = [
    "protocol.known_classes=4",
    "protocol.num_trials=3",
    "protocol.trials_without_novelty=1",
    "protocol.pre_novelty=20",
    "protocol.post_novelty=30",
    "protocol.novel_classes_per_trial=1",
]


@pytest.fixture(scope="module")
def images():
    """240 8x8 RGB images, 40 per class, in the order an image folder lists them (by class, then file name);
    each class a different mean colour, so the agents can tell classes apart."""
    rng = np.random.default_rng(5)
    y = np.repeat(np.arange(len(CLASSES)), PER_CLASS)
    base = (y[:, None, None, None] * 40 + 20).astype(np.int64)
    pixels = np.clip(base + rng.integers(-30, 31, size=(N, 8, 8, 3)), 0, 255).astype(np.uint8)
    return pixels, y


def write(fmt: str, root, pixels, y):
    flat = pixels.reshape(N, -1)
    if fmt == "npz":
        path = root / "pets.npz"
        np.savez(path, X=flat, y=y, classes=np.array(CLASSES))
    elif fmt == "parquet":
        path = root / "pets.parquet"
        cols = {f"p{j:03d}": pa.array(flat[:, j]) for j in range(flat.shape[1])}
        pq.write_table(pa.table({**cols, "y": pa.array(np.array(CLASSES)[y])}), path)
    elif fmt == "image_folder":
        path = root / "pets"
        for i in range(N):
            folder = path / CLASSES[y[i]]
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{i:03d}.png").write_bytes(png(pixels[i]))
    else:
        path = root / "pets_hf"
        image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
        table = pa.table(
            {
                "image": pa.array(
                    [{"bytes": png(p), "path": f"{i}.png"} for i, p in enumerate(pixels)], type=image_type
                ),
                "label": pa.array(y, type=pa.int64()),
            }
        )
        write_hf(path, table, {"image": {"_type": "Image"}, "label": {"names": list(CLASSES), "_type": "ClassLabel"}})
    return path


def run_ond(experiment, tmp_path, *overrides: str):
    from tests.inprocess import run_module

    proc = run_module(
        "owl_eval",
        ["+experiment=ond_system_detection", "domain=dataset", *SMALL, *experiment["overrides"], *overrides]
        + [f"hydra.run.dir={tmp_path / 'hydra'}"],
        cwd=tmp_path,
        env={"MLFLOW_DISABLE_TELEMETRY": "true"},
        unset=("MLFLOW_TRACKING_URI",),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


@pytest.mark.slow
def test_the_same_samples_in_four_formats_give_the_same_numbers(experiment, client, tmp_path, images):
    pixels, y = images
    runs = {}
    for fmt in ("npz", "parquet", "image_folder", "hf_saved"):
        path = write(fmt, tmp_path, pixels, y)
        flatten = ["domain.flatten=true"] if fmt in ("image_folder", "hf_saved") else []
        run_ond(experiment, tmp_path, f"domain.path={path}", *flatten)
    exp = client.get_experiment_by_name(experiment["name"])
    for run in client.search_runs([exp.experiment_id]):
        (found,) = run.inputs.dataset_inputs
        runs[found.dataset.name] = run
        profile = json.loads(found.dataset.profile)
        assert profile["num_samples"] == N and profile["class_names"] == list(CLASSES)
        assert found.dataset.digest == profile["sha256"][:32]
    assert set(runs) == {"pets.npz", "pets.parquet", "pets", "pets_hf"}
    reference = {k: v for k, v in runs["pets.npz"].data.metrics.items() if not k.startswith("time/")}
    assert reference["top1"] > 0.5  # the agent learned the classes: the comparison is not of constant outputs
    for name, run in runs.items():
        metrics = {k: v for k, v in run.data.metrics.items() if not k.startswith("time/")}
        assert metrics == pytest.approx(reference, rel=1e-12, abs=1e-12), name
    digests = {r.inputs.dataset_inputs[0].dataset.digest for r in runs.values()}
    assert len(digests) == 4  # four different files: four digests


def test_named_known_classes_and_the_data_sets_own_split(tmp_path, images):
    pixels, y = images
    root = tmp_path / "split"
    # train/ and test/ folders: the agent trains on train/, the trials stream test/
    for i in range(N):
        part = "train" if i % PER_CLASS < 25 else "test"
        folder = root / part / CLASSES[y[i]]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:03d}.png").write_bytes(png(pixels[i]))
    data = DatasetDomain(path=str(root), flatten=True).load()
    assert isinstance(data, LabeledData) and data.train_rows is not None
    assert len(data.train_rows) == 25 * len(CLASSES) and data.features.dtype == np.uint8
    from owl_eval.protocols.ond.driver import OndDriver

    protocol = OndDriver(known_classes=["bee", "dog", "ant", "fox"], num_trials=2, pre_novelty=10, post_novelty=20)
    from owl_eval.protocols.ond.trials import split_classes

    split = split_classes(
        data, known_classes=4, train_fraction=0.5, rng=np.random.default_rng(0), known_ids=protocol._known_ids(data)
    )
    assert [CLASSES[c] for c in split.known_classes] == ["ant", "bee", "dog", "fox"]
    assert set(split.train_rows) <= set(data.train_rows.tolist())
    assert not set(split.heldout_known_rows) & set(data.train_rows.tolist())
    with pytest.raises(
        ConfigError, match=r"protocol.known_classes: no class named \['yak'\] in this domain; its classes: ant, bee"
    ):
        OndDriver(known_classes=["ant", "yak"])._known_ids(data)
    with pytest.raises(ConfigError, match=r"\['ant'\] given twice"):
        OndDriver(known_classes=["ant", "ant"])


@pytest.mark.slow
def test_a_changed_byte_is_a_new_run_for_a_resumed_sweep(experiment, client, tmp_path, images):
    pixels, y = images
    path = write("npz", tmp_path, pixels, y)
    sweep = ["-m", f"domain.path={path}", "seed=0", f"hydra.sweep.dir={tmp_path / 'sweep'}"]
    run_ond(experiment, tmp_path, *sweep)
    again = run_ond(experiment, tmp_path, *sweep)
    assert "skipped" in again.stdout + again.stderr  # the same data: the finished run is reused
    changed = pixels.copy()
    changed[0, 0, 0, 0] ^= 1  # one bit of one pixel
    write("npz", tmp_path, changed, y)
    run_ond(experiment, tmp_path, *sweep)
    exp = client.get_experiment_by_name(experiment["name"])
    jobs = [r for r in client.search_runs([exp.experiment_id]) if r.data.tags.get("owl_eval.kind") == "job"]
    assert len(jobs) == 2 and len({r.inputs.dataset_inputs[0].dataset.digest for r in jobs}) == 2
    assert len({r.data.tags["owl_eval.config_hash"] for r in jobs}) == 2
