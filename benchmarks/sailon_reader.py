"""Reading sail-on-client OND results: ``SailonSource.load()`` against ``pyarrow.csv.read_csv`` of the same files.

    python benchmarks/sailon_reader.py [--tests 20] [--samples 2560] [--known 414] [--repeats 3]

Writes ``--tests`` tests of ``--samples`` rows with ``--known + 1`` class scores each (default 20 x 2,560 x 415)
in sail-on-client's local-harness layout to a temporary folder: ground truth ``<test_id>_single_df.csv``
(``id,detection,classification``), ``<test_id>_metadata.json``, and one session's
``S.<test_id>_detection.csv`` / ``S.<test_id>_classification.csv``. Then times (median of ``--repeats``
runs, wall and CPU seconds):

- ours: ``SailonSource(...).load()``, the whole reading with every check (finite values in [0, 1], rows
  summing to 1, ids matching the ground truth, red light, classes) into an ``OndRecord``;
- pyarrow: ``pyarrow.csv.read_csv`` of the same CSV files (the three per test), nothing checked.

and prints both and their ratio (the target: ours within 2x of pyarrow).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile

import numpy as np
import pyarrow.csv as pacsv

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))

from timing import median_time  # noqa: E402

from owl_eval.protocols.ond.sources.sailon import SailonSource  # noqa: E402


def write_layout(root: pathlib.Path, *, tests: int, samples: int, known: int, seed: int = 0) -> list[pathlib.Path]:
    """The sail-on-client layout under ``root``; returns the CSV files written."""
    rng = np.random.default_rng(seed)
    ids = np.char.add(np.char.add("known_classes/images/val/", np.arange(samples).astype(str)), ".JPEG")
    files = []
    for t in range(tests):
        test_id = f"OND.{100 + t}.000.{t:04d}"
        red = int(rng.integers(samples // 4, samples // 2))
        classes = rng.integers(1, known + 1, samples)
        novel = (np.arange(samples) >= red) & (rng.random(samples) < 0.5)
        novel[red] = True
        classes[novel] = 0  # the package's convention: the class is the score column, 0 = unknown
        detection = (np.arange(samples) >= red).astype(int)
        gt = root / f"{test_id}_single_df.csv"
        gt.write_text(
            "id,detection,classification\n" + "".join(f"{i},{d},{c}\n" for i, d, c in zip(ids, detection, classes))
        )
        (root / f"{test_id}_metadata.json").write_text(json.dumps({"round_size": 32, "red_light": str(ids[red])}))
        world = np.clip(np.cumsum(rng.random(samples) < 0.01) * 0.3, 0, 1)
        det = root / f"S.{test_id}_detection.csv"
        det.write_text("".join(f"{i},{p:.6f}\n" for i, p in zip(ids, world)))
        scores = np.round(rng.dirichlet(np.ones(known + 1), samples), 8)
        scores[:, 0] = np.maximum(1 - scores[:, 1:].sum(1), 0)
        cls = root / f"S.{test_id}_classification.csv"
        cls.write_text("".join(i + "," + ",".join(f"{v:.8f}" for v in row) + "\n" for i, row in zip(ids, scores)))
        files += [gt, det, cls]
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tests", type=int, default=20)
    parser.add_argument("--samples", type=int, default=2560)
    parser.add_argument("--known", type=int, default=414, help="known classes K (K + 1 score columns)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = pathlib.Path(tmp)
        files = write_layout(root, tests=args.tests, samples=args.samples, known=args.known)
        size = sum(f.stat().st_size for f in files) / 1e6
        print(
            f"{args.tests} tests x {args.samples} rows x {args.known + 1} scores: {len(files)} CSV files, {size:.0f} MB"
        )

        def ours():
            data = SailonSource(path=str(root), session="S").load()
            assert len(data.record.trials) == args.tests

        def arrow():
            for f in files:
                pacsv.read_csv(f)

        ours()  # warm up imports and the page cache
        arrow()
        ours_wall, ours_cpu = median_time(ours, args.repeats)
        arrow_wall, arrow_cpu = median_time(arrow, args.repeats)
    print(f"ours   SailonSource.load():   median of {args.repeats}: {ours_wall:.3f} s wall, {ours_cpu:.3f} s CPU")
    print(f"pyarrow.csv.read_csv (files): median of {args.repeats}: {arrow_wall:.3f} s wall, {arrow_cpu:.3f} s CPU")
    print(f"ratio ours / pyarrow: {ours_wall / arrow_wall:.2f}x wall, {ours_cpu / arrow_cpu:.2f}x CPU (target <= 2x)")


if __name__ == "__main__":
    main()
