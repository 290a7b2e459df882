"""Data sets written by Hugging Face ``datasets``' ``save_to_disk``, read with pyarrow (no ``datasets`` needed).

A ``Dataset`` folder holds ``dataset_info.json``, ``state.json`` (its ``_data_files`` list the shards) and the
shards ``data-00000-of-0000N.arrow`` (Arrow IPC *stream* files, memory-mapped here). A ``DatasetDict`` folder
holds ``dataset_dict.json`` (``{"splits": [...]}``) and one such folder per split.

Columns: the labels are ``label_column`` if given, else the one ``ClassLabel`` feature (its ``names``, in
``dataset_info.json`` -> ``features`` -> ``<column>`` -> ``names``, are the class names), else ``labels``, else
``label``. The features are an ``Image`` column (a struct of ``bytes`` and ``path``: decoded as image folders
are), else the column named ``features`` when there is one, else the one list/array column (``Sequence``,
``List``, ``Array2D``...: ``[N, ...]``), else every other scalar numeric column (as a table's are).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from owl_eval.datasets.base import DataSet, Digest, fail, make_dataset
from owl_eval.datasets.images import ImageStack, image_size_hw
from owl_eval.datasets.tables import label_values, split_table
from owl_eval.errors import ConfigError
from owl_eval.json_input import parse_json

INFO, STATE, DICT = "dataset_info.json", "state.json", "dataset_dict.json"


def is_hf_saved(path: Path) -> bool:
    return (path / DICT).is_file() or ((path / INFO).is_file() and (path / STATE).is_file())


def _json(path: Path, digest: Digest) -> Any:
    try:
        raw = path.read_bytes()
    except OSError:
        raise fail(f"{path}: cannot be read; expected the JSON file save_to_disk writes") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise fail(f"{path}: not valid UTF-8 JSON; expected the JSON file save_to_disk writes") from None
    value = parse_json(text, where=str(path), error=ConfigError)
    digest.add(path)
    return value


def _shards(folder: Path, state: Any) -> list[Path]:
    files = state.get("_data_files") if isinstance(state, dict) else None
    if not isinstance(files, list) or not files:
        found = sorted(folder.glob("data-*.arrow"))
        if not found:
            raise fail(f"{folder / STATE}: lists no data files and the folder holds no data-*.arrow; expected shards")
        return found
    out = []
    for entry in files:
        name = entry.get("filename") if isinstance(entry, dict) else None
        if not isinstance(name, str) or "/" in name or "\\" in name or name.startswith("."):
            raise fail(f"{folder / STATE}: data file {name!r} is not a file name in the folder; expected data-*.arrow")
        out.append(folder / name)
    return out


def _read_arrow(path: Path) -> pa.Table:
    try:
        source = pa.memory_map(str(path), "r")
        try:
            return pa.ipc.open_stream(source).read_all()
        except pa.ArrowInvalid:
            source.seek(0)
            return pa.ipc.open_file(source).read_all()
    except (pa.ArrowException, OSError, ValueError):
        raise fail(f"{path}: not a readable Arrow file (damaged or truncated); expected a save_to_disk shard") from None


def _list_to_numpy(column: pa.ChunkedArray, name: str, where: str) -> np.ndarray:
    """A list (or nested list) column as ``[N, ...]``: every row of one shape."""
    array = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if isinstance(array, pa.ExtensionArray):
        array = array.storage
    n = len(array)
    shape: list[int] = []
    while pa.types.is_list(array.type) or pa.types.is_large_list(array.type) or pa.types.is_fixed_size_list(array.type):
        if array.null_count:
            raise fail(f"{where}: column {name!r} has missing values; expected a value in every row")
        lengths = array.value_lengths().to_numpy(zero_copy_only=False)
        rows = len(array)
        if rows and (lengths != lengths[0]).any():
            raise fail(f"{where}: column {name!r} holds lists of different lengths; expected one shape for all rows")
        shape.append(int(lengths[0]) if rows else 0)
        array = array.flatten()
    if not (pa.types.is_integer(array.type) or pa.types.is_floating(array.type) or pa.types.is_boolean(array.type)):
        raise fail(f"{where}: column {name!r} holds {array.type}; expected numbers")
    if array.null_count:
        raise fail(f"{where}: column {name!r} has missing values; expected a value in every row")
    return array.to_numpy(zero_copy_only=False).reshape(n, *shape)


def _is_image(feature: Any, field: pa.Field) -> bool:
    if isinstance(feature, dict) and feature.get("_type") == "Image":
        return True
    return pa.types.is_struct(field.type) and {f.name for f in field.type} == {"bytes", "path"}


def _images(column: pa.ChunkedArray, name: str, where: str, size) -> np.ndarray:
    stack = ImageStack(len(column), image_size_hw(size))
    i = 0
    for chunk in column.chunks:
        data = chunk.field("bytes").to_pylist()
        paths = chunk.field("path").to_pylist()
        for raw, p in zip(data, paths):
            if raw is None:
                raise fail(
                    f"{where}: column {name!r} row {i} has no embedded image bytes (path {p!r}); expected images saved in the data set"
                )
            stack.put(i, raw, where=f"{where}: column {name!r} row {i} ({p})")
            i += 1
    return stack.result(False)


def _one_split(folder: Path, digest: Digest, opts: dict[str, Any]) -> tuple[dict, dict, list | None]:
    info = _json(folder / INFO, digest)
    state = _json(folder / STATE, digest)
    feats_info = info.get("features") if isinstance(info, dict) else None
    feats_info = feats_info if isinstance(feats_info, dict) else {}
    tables = []
    for shard in _shards(folder, state):
        if not shard.is_file():
            raise fail(f"{shard}: data file listed in {folder / STATE} not found")
        tables.append(_read_arrow(shard))
        digest.add(shard)
    where = str(folder)
    try:
        table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
    except pa.ArrowInvalid:
        raise fail(f"{where}: its shards have different columns; expected one schema") from None
    names = table.column_names
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise fail(f"{where}: column {dup[0]!r} appears twice; expected distinct column names")
    class_label = [
        n for n in names if isinstance(feats_info.get(n), dict) and feats_info[n].get("_type") == "ClassLabel"
    ]
    label = opts["label_column"]
    if label is None:
        if len(class_label) == 1:
            label = class_label[0]
        else:
            label = next((n for n in (opts["labels"], "label", "labels") if n in names), opts["labels"])
    if label not in names:
        raise fail(f"{where}: label column {label!r} not found; the columns are {names[:30]}")
    classes = None
    if label in class_label:
        classes = feats_info[label].get("names")
        if not isinstance(classes, list):
            raise fail(f"{folder / INFO}: ClassLabel {label!r} has no list of names; expected features.{label}.names")
    fields = {f.name: f for f in table.schema}
    images = [n for n in names if n != label and _is_image(feats_info.get(n), fields[n])]
    if len(images) > 1 and opts["features"] not in images:
        raise fail(f"{where}: image columns {images}; give features=<column> to pick one")
    lists = [
        n
        for n in names
        if n != label
        and (
            pa.types.is_list(fields[n].type)
            or pa.types.is_large_list(fields[n].type)
            or pa.types.is_fixed_size_list(fields[n].type)
            or isinstance(fields[n].type, pa.ExtensionType)
        )
    ]
    pick = opts["features"] if opts["features"] in names else None
    if pick is None and images:
        pick = images[0]
    if pick is None and len(lists) == 1:
        pick = lists[0]
    if pick is None and len(lists) > 1:
        raise fail(f"{where}: several array columns {lists}; give features=<column> to pick one")
    if pick is None:
        f, lab = split_table(table, where=where, labels=label, label_column=label, split_column=opts["split_column"])
        return f, lab, classes
    if pick in images:
        features = _images(table.column(pick), pick, where, opts["image_size"])
        if opts["flatten"]:
            features = features.reshape(len(features), -1)
    else:
        features = _list_to_numpy(table.column(pick), pick, where)
    return {"all": features}, {"all": label_values(table.column(label), label, where)}, classes


def read_hf_saved(path: Path, **opts: Any) -> DataSet:
    """A ``save_to_disk`` folder (``Dataset`` or ``DatasetDict``) as a :class:`DataSet`."""
    digest = Digest(path)
    if (path / DICT).is_file():
        meta = _json(path / DICT, digest)
        splits = meta.get("splits") if isinstance(meta, dict) else None
        if not isinstance(splits, list) or not splits or not all(isinstance(s, str) for s in splits):
            raise fail(f'{path / DICT}: no list of split names; expected {{"splits": ["train", ...]}}')
        feats, labs, classes = {}, {}, None
        for split in splits:
            folder = path / split
            if "/" in split or split.startswith(".") or not is_hf_saved(folder):
                raise fail(f"{folder}: split {split!r} listed in {path / DICT} is not a saved data set folder")
            f, lab, c = _one_split(folder, digest, opts)
            if len(f) != 1:
                raise fail(f"{folder}: a split column inside a DatasetDict split; expected splits as folders")
            if classes is not None and c is not None and c != classes:
                raise fail(f"{folder}: ClassLabel names {c[:10]} differ from another split's {classes[:10]}")
            classes = classes if classes is not None else c
            feats[split], labs[split] = f["all"], lab["all"]
    else:
        feats, labs, classes = _one_split(path, digest, opts)
    return make_dataset(path=path, fmt="hf_saved", features=feats, labels=labs, digest=digest, classes=classes)
