"""Writes the sample data sets of README "Bring your own data" (run from the repository root; deterministic):

- ``pets.npz``, ``pets.parquet``, ``pets_images/`` (``<class>/<image>.png``) and ``pets_hf/`` (a Hugging Face
  ``save_to_disk`` folder with an ``Image`` column): the same 240 8x8 RGB images of 6 classes in four formats;
- ``day0.npz``, ``day1.npz``, ``day2.npz``: one data set per task of a domain-incremental sequence (the same 6
  classes, the features drifting from day to day);
- ``walkers/``: pedestrian tracks in ``train/`` (``frame,id,x,y`` CSV) and ``test/`` (TrajNet++ ``.ndjson``), 2.5
  frames per second, frame numbers 10 apart.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from PIL import Image

HERE = Path(__file__).resolve().parent
CLASSES = ("ant", "bee", "cow", "dog", "eel", "fox")
PER_CLASS = 40


def pets() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(5)
    y = np.repeat(np.arange(len(CLASSES)), PER_CLASS)
    base = (y[:, None, None, None] * 40 + 20).astype(np.int64)
    return np.clip(base + rng.integers(-30, 31, size=(len(y), 8, 8, 3)), 0, 255).astype(np.uint8), y


def png(pixels: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    return buf.getvalue()


def write_pets(pixels: np.ndarray, y: np.ndarray) -> None:
    flat = pixels.reshape(len(y), -1)
    np.savez(HERE / "pets.npz", X=flat, y=y, classes=np.array(CLASSES))
    cols = {f"p{j:03d}": pa.array(flat[:, j]) for j in range(flat.shape[1])}
    pq.write_table(pa.table({**cols, "y": pa.array(np.array(CLASSES)[y])}), HERE / "pets.parquet")
    for i in range(len(y)):
        folder = HERE / "pets_images" / CLASSES[y[i]]
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:03d}.png").write_bytes(png(pixels[i]))
    hf = HERE / "pets_hf"
    hf.mkdir(exist_ok=True)
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    table = pa.table(
        {
            "image": pa.array(
                [{"bytes": png(p), "path": f"{i:03d}.png"} for i, p in enumerate(pixels)], type=image_type
            ),
            "label": pa.array(y, type=pa.int64()),
        }
    )
    with pa.OSFile(str(hf / "data-00000-of-00001.arrow"), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    features = {"image": {"_type": "Image"}, "label": {"names": list(CLASSES), "_type": "ClassLabel"}}
    (hf / "dataset_info.json").write_text(json.dumps({"features": features}, indent=2) + "\n")
    state = {"_data_files": [{"filename": "data-00000-of-00001.arrow"}], "_split": None}
    (hf / "state.json").write_text(json.dumps(state, indent=2) + "\n")


def write_days() -> None:
    rng = np.random.default_rng(6)
    y = np.repeat(np.arange(len(CLASSES)), 50)
    for day in range(3):
        X = (rng.normal(size=(len(y), 16)) + y[:, None] * 0.8 + day * 0.6).astype(np.float32)
        np.savez(HERE / f"day{day}.npz", X=X, y=y, classes=np.array(CLASSES))


def write_walkers() -> None:
    rng = np.random.default_rng(7)
    for part, walkers in (("train", 24), ("test", 8)):
        folder = HERE / "walkers" / part
        folder.mkdir(parents=True, exist_ok=True)
        rows = []
        for pid in range(walkers):
            start, length = int(rng.integers(0, 30)) * 10, int(rng.integers(20, 35))
            position, velocity = rng.uniform(0, 10, size=2), rng.normal(0, 0.5, size=2)
            for step in range(length):
                velocity = velocity + rng.normal(0, 0.05, size=2)
                position = position + velocity * 0.4
                rows.append((start + 10 * step, pid, round(float(position[0]), 3), round(float(position[1]), 3)))
        rows.sort()
        if part == "train":  # the training tracks as CSV, the test tracks as TrajNet++ ndjson
            lines = ["frame,id,x,y", *(f"{f},{p},{x},{y}" for f, p, x, y in rows)]
            (folder / f"{part}_walkers.csv").write_text("\n".join(lines) + "\n")
        else:
            tracks = [json.dumps({"track": {"f": f, "p": p, "x": x, "y": y}}) for f, p, x, y in rows]
            (folder / f"{part}_walkers.ndjson").write_text("\n".join(tracks) + "\n")


def main() -> None:
    write_pets(*pets())
    write_days()
    write_walkers()


if __name__ == "__main__":
    main()
