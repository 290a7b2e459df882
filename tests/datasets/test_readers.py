"""owl_eval.datasets: every format reads back the arrays that were written, lazily, with a stable digest, and every
bad input is one ConfigError line naming the file."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import struct
import tracemalloc
import warnings
import zipfile

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from PIL import Image

from owl_eval.datasets import DataSet, Split, read_dataset
from owl_eval.errors import ConfigError

N, F, C = 60, 5, 3
CLASSES = ("cat", "dog", "eel")


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, F)).astype(np.float32)
    y = np.arange(N) % C  # every class present
    rng.shuffle(y)
    pixels = rng.integers(0, 256, size=(N, 8, 8, 3), dtype=np.uint8)
    return X, y.astype(np.int64), pixels


def png(pixels: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    return buf.getvalue()


def write_hf(folder, table: pa.Table, features: dict) -> None:
    """A folder as ``Dataset.save_to_disk`` writes it: an Arrow IPC stream shard, dataset_info.json, state.json."""
    folder.mkdir(parents=True)
    with pa.OSFile(str(folder / "data-00000-of-00001.arrow"), "wb") as sink:
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
    info = {"citation": "", "description": "", "features": features, "homepage": "", "license": ""}
    (folder / "dataset_info.json").write_text(json.dumps(info, indent=2))
    state = {
        "_data_files": [{"filename": "data-00000-of-00001.arrow"}],
        "_fingerprint": "0123456789abcdef",
        "_format_columns": None,
        "_format_kwargs": {},
        "_format_type": None,
        "_output_all_columns": False,
        "_split": None,
    }
    (folder / "state.json").write_text(json.dumps(state, indent=2, sort_keys=True))


CLASS_LABEL = {"names": list(CLASSES), "_type": "ClassLabel"}
SEQUENCE = {"feature": {"dtype": "float32", "_type": "Value"}, "_type": "Sequence"}


def hf_arrays_table(X, y) -> pa.Table:
    return pa.table({"x": pa.array(list(X), type=pa.list_(pa.float32())), "label": pa.array(y, type=pa.int64())})


def write_format(fmt: str, root, X, y):
    names = np.array(CLASSES)[y]
    if fmt == "npz_stored":
        path = root / "d.npz"
        np.savez(path, X=X, y=y, classes=np.array(CLASSES))
    elif fmt == "npz_compressed":
        path = root / "d.npz"
        np.savez_compressed(path, X=X, y=names)  # string labels name their classes
    elif fmt == "npy":
        path = root / "d"
        path.mkdir()
        np.save(path / "X.npy", X)
        np.save(path / "y.npy", y)
        np.save(path / "classes.npy", np.array(CLASSES))
    elif fmt == "parquet":
        path = root / "d.parquet"
        cols = {f"f{j}": pa.array(X[:, j]) for j in range(F)}
        pq.write_table(pa.table({**cols, "y": pa.array(names)}), path)
    elif fmt == "csv":
        path = root / "d.csv"
        lines = ["a,b,c,d,e,label"] + [",".join([*(repr(float(v)) for v in X[i]), names[i]]) for i in range(N)]
        path.write_text("\n".join(lines) + "\n")
    elif fmt == "hf_saved":
        path = root / "d"
        write_hf(path, hf_arrays_table(X, y), {"x": SEQUENCE, "label": CLASS_LABEL})
    return path


FORMATS = {"npz_stored": "npz", "npz_compressed": "npz", "npy": "npy", "parquet": "parquet", "csv": "csv"}
FORMATS["hf_saved"] = "hf_saved"


def listing(root) -> dict:
    return {os.path.join(d, f): os.stat(os.path.join(d, f)).st_mtime_ns for d, _, files in os.walk(root) for f in files}


@pytest.mark.parametrize("fmt", list(FORMATS))
def test_every_format_reads_back_what_was_written(tmp_path, data, fmt):
    X, y, _ = data
    path = write_format(fmt, tmp_path, X, y)
    before = listing(tmp_path)
    ds = read_dataset(path)
    assert listing(tmp_path) == before  # nothing written into the user's folder
    assert isinstance(ds, DataSet) and ds.format == FORMATS[fmt]
    assert ds.name == path.name and ds.source == str(path.resolve())
    assert ds.class_names == CLASSES
    assert list(ds.splits) == ["all"] and isinstance(ds.splits["all"], Split)
    split = ds.splits["all"]
    assert np.array_equal(split.features, X) and split.features.shape == (N, F)
    assert split.labels.dtype == np.int64 and np.array_equal(split.labels, y)
    assert ds.num_samples == N and ds.shape == (F,)
    assert re.fullmatch(r"[0-9a-f]{64}", ds.digest)
    profile = ds.profile()
    assert profile["splits"] == {"all": N} and profile["class_names"] == list(CLASSES)
    assert profile["digest"] == ds.digest and profile["shape"] == [F] and profile["num_samples"] == N
    json.dumps(profile)


def image_order(y):
    """Image folders list samples by class folder, then by file name (the sample index here)."""
    return np.lexsort((np.arange(N), y))


@pytest.mark.parametrize("flatten", [False, True])
def test_an_image_folder_reads_back_its_pixels(tmp_path, data, flatten):
    _, y, pixels = data
    root = tmp_path / "images"
    for i in range(N):
        folder = root / CLASSES[y[i]]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:03d}.png").write_bytes(png(pixels[i]))
    (root / "cat" / "notes.txt").write_text("not an image")  # left out, as torchvision does
    before = listing(tmp_path)
    ds = read_dataset(root, flatten=flatten)
    assert listing(tmp_path) == before
    order = image_order(y)
    assert ds.format == "image_folder" and ds.class_names == CLASSES
    feats = ds.splits["all"].features
    assert feats.dtype == np.uint8
    expected = pixels[order].reshape(N, -1) if flatten else pixels[order]
    assert np.array_equal(feats, expected)
    assert np.array_equal(ds.splits["all"].labels, y[order])


def test_an_image_column_of_a_saved_hf_data_set_reads_back_its_pixels(tmp_path, data):
    _, y, pixels = data
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    images = pa.array([{"bytes": png(p), "path": f"{i}.png"} for i, p in enumerate(pixels)], type=image_type)
    table = pa.table({"image": images, "label": pa.array(y, type=pa.int64())})
    write_hf(tmp_path / "hf", table, {"image": {"_type": "Image"}, "label": CLASS_LABEL})
    ds = read_dataset(tmp_path / "hf")
    assert ds.format == "hf_saved" and ds.class_names == CLASSES
    assert np.array_equal(ds.splits["all"].features, pixels)
    assert np.array_equal(ds.splits["all"].labels, y)
    assert ds.shape == (8, 8, 3)


def test_images_are_resized_to_image_size_and_must_agree_in_size_without_it(tmp_path):
    for name, size in (("a", (8, 8)), ("b", (10, 6))):
        (tmp_path / "imgs" / name).mkdir(parents=True)
        Image.new("RGB", size, (10, 20, 30)).save(tmp_path / "imgs" / name / "0.png")
    ds = read_dataset(tmp_path / "imgs", image_size=[4, 5])
    assert ds.shape == (4, 5, 3) and (ds.splits["all"].features == [10, 20, 30]).all()
    assert read_dataset(tmp_path / "imgs", image_size=6).shape == (6, 6, 3)
    with pytest.raises(ConfigError, match=r"b/0\.png: images differ in size .*image_size") as err:
        read_dataset(tmp_path / "imgs")
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("fmt", ["npz_stored", "npy"])
def test_uncompressed_arrays_are_memory_mapped_in_their_own_dtype(tmp_path, data, fmt):
    X, y, _ = data
    ds = read_dataset(write_format(fmt, tmp_path, X, y))
    feats = ds.splits["all"].features
    assert isinstance(feats, np.memmap) and feats.dtype == np.float32


def test_compressed_members_are_read_in_their_own_dtype(tmp_path, data):
    X, y, _ = data
    feats = read_dataset(write_format("npz_compressed", tmp_path, X, y)).splits["all"].features
    assert not isinstance(feats, np.memmap) and feats.dtype == np.float32


def test_fortran_ordered_stored_members_map_correctly(tmp_path, data):
    X, y, _ = data
    np.savez(tmp_path / "f.npz", X=np.asfortranarray(X), y=y)
    feats = read_dataset(tmp_path / "f.npz").splits["all"].features
    assert isinstance(feats, np.memmap) and np.array_equal(feats, X)


# --- splits ---


def test_train_and_test_image_folders_are_splits(tmp_path, data):
    _, y, pixels = data
    for i in range(N):
        split = "train" if i < 40 else "test"
        folder = tmp_path / "imgs" / split / CLASSES[y[i]]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:03d}.png").write_bytes(png(pixels[i]))
    ds = read_dataset(tmp_path / "imgs")
    assert list(ds.splits) == ["train", "test"] and ds.class_names == CLASSES
    for split, rows in (("train", np.arange(40)), ("test", np.arange(40, N))):
        order = rows[np.lexsort((rows, y[rows]))]
        assert np.array_equal(ds.splits[split].features, pixels[order])
        assert np.array_equal(ds.splits[split].labels, y[order])
    assert ds.profile()["splits"] == {"train": 40, "test": 20}


@pytest.mark.parametrize("column", ["split", "part"])
def test_a_split_column_gives_splits(tmp_path, data, column):
    X, y, _ = data
    which = np.where(np.arange(N) < 45, "train", "test")
    cols = {f"f{j}": pa.array(X[:, j]) for j in range(F)}
    pq.write_table(pa.table({**cols, column: pa.array(which), "y": pa.array(y)}), tmp_path / "t.parquet")
    ds = read_dataset(tmp_path / "t.parquet", split_column=None if column == "split" else column)
    assert list(ds.splits) == ["train", "test"] and ds.shape == (F,)
    assert np.array_equal(ds.splits["train"].features, X[:45]) and np.array_equal(ds.splits["test"].labels, y[45:])
    assert ds.class_names == ("0", "1", "2")


def test_split_arrays_give_splits(tmp_path, data):
    X, y, _ = data
    np.savez(tmp_path / "s.npz", X_train=X[:50], y_train=y[:50], X_test=X[50:], y_test=y[50:])
    ds = read_dataset(tmp_path / "s.npz")
    assert sorted(ds.splits) == ["test", "train"]
    assert np.array_equal(ds.splits["train"].features, X[:50]) and np.array_equal(ds.splits["test"].labels, y[50:])
    assert ds.num_samples == N


def test_integer_labels_without_classes_name_their_classes_by_value(tmp_path, data):
    X, y, _ = data
    np.savez(tmp_path / "v.npz", X=X, y=y * 10 + 3)
    ds = read_dataset(tmp_path / "v.npz")
    assert ds.class_names == ("3", "13", "23") and np.array_equal(ds.splits["all"].labels, y)


def test_a_dataset_dict_gives_splits(tmp_path, data):
    X, y, _ = data
    root = tmp_path / "dd"
    write_hf(root / "train", hf_arrays_table(X[:30], y[:30]), {"x": SEQUENCE, "label": CLASS_LABEL})
    write_hf(root / "test", hf_arrays_table(X[30:], y[30:]), {"x": SEQUENCE, "label": CLASS_LABEL})
    (root / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "test"]}))
    ds = read_dataset(root)
    assert list(ds.splits) == ["train", "test"] and ds.class_names == CLASSES
    assert np.array_equal(ds.splits["test"].features, X[30:]) and np.array_equal(ds.splits["train"].labels, y[:30])


# --- digest ---


def test_the_digest_is_stable_and_changes_with_one_byte(tmp_path, data):
    X, y, _ = data
    path = write_format("npy", tmp_path, X, y)
    first = read_dataset(path).digest
    assert read_dataset(path).digest == first
    raw = bytearray((path / "y.npy").read_bytes())
    raw[-8] = (raw[-8] + 1) % 3  # the low byte of the last label (int64, little-endian): another class
    (path / "y.npy").write_bytes(bytes(raw))
    assert read_dataset(path).digest != first


def test_the_digest_of_an_image_folder_changes_with_one_byte(tmp_path, data):
    _, y, pixels = data
    for i in range(6):
        folder = tmp_path / "imgs" / CLASSES[y[i]]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i}.png").write_bytes(png(pixels[i]))
    first = read_dataset(tmp_path / "imgs").digest
    assert read_dataset(tmp_path / "imgs").digest == first
    # the same images in a copy of the folder elsewhere: the same digest (relative paths only)
    other = tmp_path / "elsewhere" / "imgs"
    for p in (tmp_path / "imgs").rglob("*.png"):
        (other / p.parent.name).mkdir(parents=True, exist_ok=True)
        (other / p.parent.name / p.name).write_bytes(p.read_bytes())
    assert read_dataset(other).digest == first
    target = next((tmp_path / "imgs").rglob("*.png"))
    raw = bytearray(target.read_bytes())
    raw[-1] ^= 1  # the last byte of the IEND chunk's CRC: Pillow reads the image without checking it
    target.write_bytes(bytes(raw))
    changed = read_dataset(tmp_path / "imgs")
    assert np.array_equal(changed.splits["all"].features, read_dataset(other).splits["all"].features)
    changed = changed.digest
    assert changed != first


def test_the_digest_rule_by_hand(tmp_path, data):
    """One file: sha256 of its name (UTF-8), NUL, its size in decimal, NUL, then its bytes."""
    X, y, _ = data
    path = write_format("csv", tmp_path, X, y)
    raw = path.read_bytes()
    expected = hashlib.sha256(path.name.encode() + b"\0" + str(len(raw)).encode() + b"\0" + raw).hexdigest()
    assert read_dataset(path).digest == expected


def test_the_digest_rule_by_hand_for_a_folder(tmp_path, data):
    X, y, _ = data
    path = write_format("npy", tmp_path, X, y)
    h = hashlib.sha256()
    for rel in sorted(["X.npy", "y.npy", "classes.npy"]):
        raw = (path / rel).read_bytes()
        h.update(rel.encode() + b"\0" + str(len(raw)).encode() + b"\0" + raw)
    (path / "unused.npy").write_bytes(b"not read")  # not an array the reader uses: not in the digest
    assert read_dataset(path).digest == h.hexdigest()


# --- errors ---


def one_line_error(match: str, path, **kwargs) -> str:
    with pytest.raises(ConfigError, match=match) as err:
        read_dataset(path, **kwargs)
    message = str(err.value)
    assert "\n" not in message and "Traceback" not in message
    return message


def test_labels_and_features_of_different_lengths(tmp_path, data):
    X, y, _ = data
    np.savez(tmp_path / "len.npz", X=X, y=y[:-1])
    one_line_error(r"len\.npz: array 'X' has 60 rows but 'y' has 59", tmp_path / "len.npz")


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_features_name_their_rows(tmp_path, data, bad):
    X, y, _ = data
    X = X.copy()
    for row in (3, 7, 11, 20, 30, 40, 50):
        X[row, 1] = bad
    (tmp_path / "nan").mkdir()
    np.save(tmp_path / "nan" / "X.npy", X)
    np.save(tmp_path / "nan" / "y.npy", y)
    one_line_error(r"nan: features hold NaN or infinite values \(rows \[3, 7, 11, 20, 30\]\)", tmp_path / "nan")


def test_an_empty_class_folder(tmp_path, data):
    _, _, pixels = data
    (tmp_path / "imgs" / "a").mkdir(parents=True)
    (tmp_path / "imgs" / "b").mkdir(parents=True)
    (tmp_path / "imgs" / "a" / "0.png").write_bytes(png(pixels[0]))
    (tmp_path / "imgs" / "b" / "readme.txt").write_text("x")
    one_line_error(r"imgs/b: class folder 'b' holds no images", tmp_path / "imgs")


@pytest.mark.parametrize("damage", ["truncated", "garbage"])
def test_an_unreadable_image(tmp_path, data, damage):
    _, _, pixels = data
    (tmp_path / "imgs" / "a").mkdir(parents=True)
    (tmp_path / "imgs" / "a" / "0.png").write_bytes(png(pixels[0]))
    raw = png(pixels[1])
    (tmp_path / "imgs" / "a" / "1.png").write_bytes(raw[: len(raw) // 2] if damage == "truncated" else b"not a png")
    one_line_error(r"imgs/a/1\.png: not a readable image", tmp_path / "imgs")


def test_an_unknown_label_column_lists_the_columns(tmp_path, data):
    X, y, _ = data
    path = write_format("csv", tmp_path, X, y)
    one_line_error(r"d\.csv: label column 'target' not found; the columns are \['a', 'b'", path, label_column="target")


def test_a_missing_array_lists_the_arrays(tmp_path, data):
    X, y, _ = data
    np.savez(tmp_path / "m.npz", features=X, y=y)
    one_line_error(r"m\.npz: array 'X' not found; the arrays are \['features', 'y'\]", tmp_path / "m.npz")
    assert read_dataset(tmp_path / "m.npz", features="features").num_samples == N


def test_two_npz_members_of_one_name(tmp_path, data):
    X, y, _ = data
    path = tmp_path / "dup.npz"
    with warnings.catch_warnings(), zipfile.ZipFile(path, "w") as zf:
        warnings.simplefilter("ignore", UserWarning)  # zipfile warns of the duplicate name it writes
        for name, arr in (("X", X), ("y", y), ("X", X)):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, arr)
            zf.writestr(f"{name}.npy", buf.getvalue())
    one_line_error(r"dup\.npz: member 'X\.npy' appears twice", path)


@pytest.mark.parametrize("fmt", ["csv", "parquet"])
def test_two_columns_of_one_name(tmp_path, fmt):
    table = pa.table([pa.array([1.0, 2.0]), pa.array([3.0, 4.0]), pa.array([0, 1])], names=["a", "a", "y"])
    path = tmp_path / f"dup.{fmt}"
    pq.write_table(table, path) if fmt == "parquet" else pacsv.write_csv(table, path)
    one_line_error(rf"dup\.{fmt}: column 'a' appears twice", path)


def test_class_names_that_are_not_text(tmp_path, data):
    X, y, _ = data
    np.savez(tmp_path / "b.npz", X=X, y=y, classes=np.array([b"cat", b"\xff\xfe", b"eel"]))
    one_line_error(
        r"b\.npz: member 'classes\.npy': class name at position 1 is not UTF-8 text \(byte 0xff .*b'\\xff\\xfe'\)",
        tmp_path / "b.npz",
    )


def test_a_class_folder_name_that_is_not_text(tmp_path, data):
    _, _, pixels = data
    root = tmp_path / "imgs"
    root.mkdir()
    bad = os.path.join(os.fsencode(root), b"\xff")
    os.mkdir(bad)
    with open(os.path.join(bad, b"0.png"), "wb") as fh:
        fh.write(png(pixels[0]))
    one_line_error(r"imgs.*is not valid UTF-8 text", root)


def test_an_empty_data_set(tmp_path):
    np.savez(tmp_path / "e.npz", X=np.zeros((0, 4), np.float32), y=np.zeros(0, np.int64))
    one_line_error(r"e\.npz: the data set holds no samples", tmp_path / "e.npz")
    (tmp_path / "t.csv").write_text("a,y\n")
    one_line_error(r"t\.csv: the data set holds no samples", tmp_path / "t.csv")


def test_a_compressed_member_declaring_more_than_2_gib_is_refused_before_reading(tmp_path, data):
    X, y, _ = data
    path = tmp_path / "bomb.npz"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, arr in (("X", X), ("y", y)):
            buf = io.BytesIO()
            np.lib.format.write_array(buf, arr)
            zf.writestr(f"{name}.npy", buf.getvalue())
    raw = bytearray(path.read_bytes())
    at = raw.index(b"PK\x01\x02")  # the central directory entry of X.npy (written first)
    assert raw[at + 46 : at + 51] == b"X.npy"
    raw[at + 24 : at + 28] = struct.pack("<I", 2**31 + 1)  # its declared uncompressed size
    path.write_bytes(bytes(raw))
    one_line_error(r"bomb\.npz: member 'X\.npy' declares 2147483649 bytes uncompressed, more than 2147483648", path)


def test_a_truncated_npz(tmp_path, data):
    X, y, _ = data
    np.savez_compressed(tmp_path / "t.npz", X=X, y=y)
    raw = (tmp_path / "t.npz").read_bytes()
    (tmp_path / "t.npz").write_bytes(raw[: len(raw) // 2])
    one_line_error(r"t\.npz: not a readable \.npz", tmp_path / "t.npz")


def test_anything_else_names_the_path_and_the_formats(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    one_line_error(
        r"notes\.txt: not a data set this reader knows; expected a \.npz file.*save_to_disk", tmp_path / "notes.txt"
    )
    one_line_error(r"missing: no such file or folder", tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    one_line_error(r"empty: not a data set this reader knows", tmp_path / "empty")


def test_labels_outside_the_classes(tmp_path, data):
    X, y, _ = data
    np.savez(tmp_path / "o.npz", X=X, y=y + 1, classes=np.array(CLASSES))
    one_line_error(r"o\.npz: label 3 at row \d+ .*outside 0\.\.2", tmp_path / "o.npz")


def test_a_string_feature_column(tmp_path):
    (tmp_path / "s.csv").write_text("a,b,y\n1.0,x,0\n2.0,z,1\n")
    one_line_error(r"s\.csv: column 'b' has type string; expected numbers", tmp_path / "s.csv")


# --- size ---


def test_a_100_mb_array_reads_without_copying(tmp_path):
    rows, cols = 200_000, 128
    folder = tmp_path / "big"
    folder.mkdir()
    X = np.lib.format.open_memmap(folder / "X.npy", mode="w+", dtype=np.float32, shape=(rows, cols))
    for start in range(0, rows, 50_000):
        X[start : start + 50_000] = np.random.default_rng(start).standard_normal((50_000, cols), dtype=np.float32)
    X.flush()
    del X
    np.save(folder / "y.npy", (np.arange(rows) % 10).astype(np.int64))
    tracemalloc.start()
    try:
        ds = read_dataset(folder)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert isinstance(ds.splits["all"].features, np.memmap) and ds.shape == (cols,)
    assert peak < 20 * 2**20, f"peak {peak / 2**20:.1f} MiB"


def test_a_flipped_byte_in_a_stored_member_is_refused_by_its_crc(tmp_path, data):
    """A memory map bypasses zipfile's CRC-32: the file's members are checked once when it is opened."""
    X, y, _ = data
    path = tmp_path / "d.npz"
    np.savez(path, X=X, y=y)
    raw = bytearray(path.read_bytes())
    at = raw.index(X.tobytes()[:16]) + 8  # inside X's values, past its header
    raw[at] ^= 0x01
    path.write_bytes(bytes(raw))
    message = one_line_error(r"member 'X.npy' is corrupted", path)
    assert str(path) in message
