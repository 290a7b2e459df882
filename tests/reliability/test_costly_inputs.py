"""Inputs that would cost far more than their size: refused from what they declare, before they are expanded.

A few-megabyte file can declare terabytes: a zip bomb ``.npz`` whose member's ``.npy`` header declares
``(10**6, 10**6)`` float64 over a tiny deflate stream, a CSV or TSV of a million columns (4 MB, but minutes and
gigabytes in a column-wise parser), a PNG whose header declares 100,000 x 100,000 pixels. Each is crafted here
and run through the command line (``tests/reliability/harness.py``): one ``error:`` line naming the file (the
member, its declared shape and the bytes it would need; the column count; the pixel count), no run, nothing
written, and within :data:`SECONDS` seconds.
"""

from __future__ import annotations

import io
import os
import struct
import time
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest

from tests.reliability.harness import assert_clean_failure, run_cli
from tests.reliability.test_l2logger_errors import write_log
from tests.reliability.test_record_errors import ond_record
from tests.reliability.test_sailon_errors import A, cli_args, cls, gt, inputs

SECONDS = 10  # each refusal comes within this (they take well under a second; a machine may be busy)
EVALUATE = "owl_eval.runner.cli.evaluate"
TERA = (10**6, 10**6)  # float64: 8 * 10**12 bytes declared
DATASET = [
    "+experiment=ond_system_detection",
    "domain=dataset",
    "protocol.known_classes=4",
    "protocol.num_trials=3",
    "protocol.trials_without_novelty=1",
    "protocol.pre_novelty=20",
    "protocol.post_novelty=30",
    "protocol.novel_classes_per_trial=1",
]


def npz_bomb(path: Path, member: str = "X", shape: tuple[int, ...] = TERA, others: dict | None = None) -> Path:
    """An ``.npz`` whose deflated member ``member`` declares ``shape`` float64 (its ``.npy`` header and the zip's
    uncompressed size agree) over 1 MB of zeros, a few kilobytes deflated; ``others``: ordinary members first."""
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": "<f8", "fortran_order": False, "shape": shape})
    header = head.getvalue()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, array in (others or {}).items():
            buffer = io.BytesIO()
            np.save(buffer, array)
            zf.writestr(name + ".npy", buffer.getvalue())
        info = zipfile.ZipInfo(member + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
        info.compress_type = zipfile.ZIP_DEFLATED
        with zf.open(info, "w", force_zip64=True) as fh:
            fh.write(header + bytes(1 << 20))
        info.file_size = len(header) + int(np.prod(shape, dtype=object)) * 8  # what the central directory declares
    assert path.stat().st_size < 100_000
    return path


def real_npz_bomb(path: Path, member: str, length: int) -> Path:
    """A genuine zip bomb: one deflated member, a ``.npy`` of ``length`` float64 zeros that truly inflates to
    ``8 * length`` bytes, in a file of about a thousandth of that. The stream is one compressed block of zeros
    repeated (a full flush between blocks resets the compressor, so each block compresses to the same bytes);
    the CRC-32 is left 0: a reader that checks the declared size never reaches it."""
    head = io.BytesIO()
    np.lib.format.write_array_header_1_0(head, {"descr": "<f8", "fortran_order": False, "shape": (length,)})
    header = head.getvalue()
    block = 1 << 24
    count, rest = divmod(8 * length, block)
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    start = deflate.compress(header) + deflate.flush(zlib.Z_FULL_FLUSH)
    piece = deflate.compress(bytes(block)) + deflate.flush(zlib.Z_FULL_FLUSH)
    stream = start + piece * count + deflate.compress(bytes(rest)) + deflate.flush()
    name = (member + ".npy").encode()
    size = len(header) + 8 * length
    assert size < 2**32  # plain zip headers, no zip64
    fields = struct.pack("<HHHHIII", 0, 8, 0, 0x21, 0, len(stream), size)  # flags, deflate, time, date, crc, sizes
    local = struct.pack("<IH", 0x04034B50, 20) + fields + struct.pack("<HH", len(name), 0) + name
    central = (
        struct.pack("<IHH", 0x02014B50, 20, 20) + fields + struct.pack("<HHHHHII", len(name), 0, 0, 0, 0, 0, 0) + name
    )
    offset = len(local) + len(stream)
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 1, 1, len(central), offset, 0)
    path.write_bytes(local + stream + central + end)
    return path


def timed(module: str, args: list[str], workspace):
    clock = time.perf_counter()
    result = run_cli(module, args, workspace, timeout=120)
    elapsed = time.perf_counter() - clock
    assert elapsed < SECONDS, f"took {elapsed:.1f} s; expected a refusal within {SECONDS} s\n{result.stderr[-2000:]}"
    return result


def wide_csv(first: str, columns: int = 10**6, rows: int = 2) -> str:
    """``rows`` lines of ``first`` then ``columns - 1`` zeros: 4 MB for a million columns and two rows."""
    line = first + ",0" * (columns - 1)
    return "\n".join([line] * rows) + "\n"


# -- .npz zip bombs -----------------------------------------------------------------------------------------
def test_zip_bomb_predictions_npz_is_refused_naming_member_shape_and_bytes(workspace):
    bomb = npz_bomb(workspace.root / "predictions.npz", member="Path_pred")
    result = timed(EVALUATE, ["+source=trajectories", f"source.path={bomb}"], workspace)
    assert_clean_failure(result, str(bomb), "'Path_pred.npy'", "(1000000, 1000000)", "8000000000000 bytes")


def test_genuine_3_mb_zip_bomb_is_refused_before_it_is_inflated(workspace):
    """The reported case: a 3 MB ``.npz`` that truly inflates to 3 GB (a bare MemoryError before)."""
    bomb = real_npz_bomb(workspace.root / "predictions.npz", "Path_pred", 375_000_000)
    assert bomb.stat().st_size < 4_000_000
    with zipfile.ZipFile(bomb) as zf:  # a real deflate stream: its first megabyte inflates to zeros
        with zf.open("Path_pred.npy") as fh:
            assert np.lib.format.read_magic(fh) == (1, 0) and fh.read(1 << 20).strip(b" \n").endswith(bytes(1000))
    result = timed(EVALUATE, ["+source=trajectories", f"source.path={bomb}"], workspace)
    assert_clean_failure(result, str(bomb), "'Path_pred.npy'", "(375000000,)", "3000000000 bytes")


def test_zip_bomb_record_is_refused(tmp_path, workspace):
    """A record's ``.npz`` replaced by a bomb (its checksums would refuse it too; the size is checked first)."""
    folder = tmp_path / "record"
    npz = ond_record(folder)
    npz_bomb(npz, member="agent/p_class", others={"known_classes": np.arange(3)})
    result = timed(EVALUATE, ["+source=record", f"source.path={folder}"], workspace)
    assert_clean_failure(result, str(npz), "'agent/p_class.npy'", "(1000000, 1000000)", "8000000000000 bytes")


def test_zip_bomb_data_set_is_refused(workspace):
    bomb = npz_bomb(workspace.root / "data.npz", member="X", others={"y": np.arange(10)})
    result = timed("runner", [*DATASET, f"domain.path={bomb}"], workspace)
    assert_clean_failure(result, str(bomb), "'X.npy'", "(1000000, 1000000)", "8000000000000 bytes")


def test_member_over_the_bound_but_within_memory_is_refused_by_the_bound(workspace):
    """4 GB declared: more than the 2 GiB a compressed member may inflate to, whatever memory the machine has."""
    bomb = npz_bomb(workspace.root / "predictions.npz", member="Path_pred", shape=(500_000_000,))
    result = timed(EVALUATE, ["+source=trajectories", f"source.path={bomb}"], workspace)
    assert_clean_failure(result, str(bomb), "(500000000,)", "4000000000 bytes", "2147483648 bytes", "np.savez")


# -- a million columns ----------------------------------------------------------------------------------------
def test_million_column_csv_data_set_is_refused(workspace):
    table = workspace.root / "wide.csv"
    table.write_text(wide_csv("y", rows=1) + wide_csv("1", rows=1))
    result = timed("runner", [*DATASET, f"domain.path={table}"], workspace)
    assert_clean_failure(result, str(table), "1000000 fields", "100000")


def test_million_column_accuracy_matrix_is_refused(workspace):
    table = workspace.root / "accuracy.csv"
    table.write_text(wide_csv("0.5"))
    result = timed(EVALUATE, ["+source=accuracy_matrix", f"source.path={table}"], workspace)
    assert_clean_failure(result, str(table), "1000000 fields", "100000")


@pytest.mark.parametrize("rel", [cls(A), gt(A)], ids=["classification", "ground-truth"])
def test_million_column_sailon_csv_is_refused(workspace, rel):
    root = inputs(workspace)
    (root / rel).write_text(wide_csv("x"))
    result = timed(EVALUATE, cli_args(root), workspace)
    assert_clean_failure(result, str(root / rel), "1000000 fields", "100000")


def test_million_column_l2logger_tsv_is_refused(workspace):
    root = write_log(workspace.root / "inputs")
    tsv = root / "worker-default" / "0-train" / "data-log.tsv"
    tsv.write_text("\t".join(f"c{j}" for j in range(10**6)) + "\n")
    result = timed(EVALUATE, ["+source=l2logger", f"source.path={root}"], workspace)
    line = assert_clean_failure(result, str(tsv), "1000000 columns", "100000")
    assert len(line) < 1000  # names the count, does not quote the header


def long_field_csv(rows: int = 1000, columns: int = 100, at: tuple[int, int] = (500, 50)) -> str:
    """``rows`` x ``columns`` zeros (200 KB) with one field of 100,000 characters at ``at`` (0-based): 40 GB
    as one fixed-width text array, where every cell is as wide as the longest field."""
    lines = [["0"] * columns for _ in range(rows)]
    lines[at[0]][at[1]] = "x" * 100_000
    return "\n".join(",".join(line) for line in lines) + "\n"


def test_one_long_field_in_a_wide_accuracy_matrix_is_refused(workspace):
    table = workspace.root / "accuracy.csv"
    table.write_text(long_field_csv())
    result = timed(EVALUATE, ["+source=accuracy_matrix", f"source.path={table}"], workspace)
    assert_clean_failure(result, f"{table}, row 501, column 51", "100000 characters", "40000000000 bytes")


def test_one_long_field_in_sailon_ground_truth_is_refused(workspace):
    root = inputs(workspace)
    text = (root / gt(A)).read_text().splitlines()
    rows = [text[0], *text[1:]] + [text[1]] * 20_000  # a long ground truth (the row checks come after)
    rows[2] = rows[2] + "x" * 100_000  # the last field of line 3 made 100,000 characters longer
    (root / gt(A)).write_text("\n".join(rows) + "\n")
    result = timed(EVALUATE, cli_args(root), workspace)
    assert_clean_failure(result, f"{root / gt(A)}, row 3", "characters", "bytes")


# -- images that declare gigapixels ----------------------------------------------------------------------------
def png_declaring(width: int, height: int) -> bytes:
    """A PNG whose header declares ``width`` x ``height`` RGB pixels over an empty image stream (a few bytes)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"")) + chunk(b"IEND", b"")


def image_folder(root: Path, width: int, height: int) -> Path:
    from PIL import Image

    for name in ("cat", "dog"):
        (root / name).mkdir(parents=True)
        Image.new("RGB", (8, 8)).save(root / name / "b.png")
    (root / "cat" / "a.png").write_bytes(png_declaring(width, height))
    return root / "cat" / "a.png"


def test_image_declaring_ten_gigapixels_is_refused(workspace):
    bomb = image_folder(workspace.root / "images", 100_000, 100_000)
    result = timed("runner", [*DATASET, f"domain.path={workspace.root / 'images'}", "domain.image_size=8"], workspace)
    assert_clean_failure(result, str(bomb), "10000000000 pixels", "MAX_IMAGE_PIXELS")


def test_pixel_limit_holds_when_a_library_switched_it_off(workspace, monkeypatch):
    """``PIL.Image.MAX_IMAGE_PIXELS = None`` (what some libraries set) leaves Pillow's default bound in force."""
    from PIL import Image

    if workspace.in_process is False or os.environ.get("OWL_EVAL_TEST_SUBPROCESS") == "1":
        pytest.skip("the setting is made in this process")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", None)
    bomb = image_folder(workspace.root / "images", 20_000, 20_000)
    result = timed("runner", [*DATASET, f"domain.path={workspace.root / 'images'}", "domain.image_size=8"], workspace)
    assert_clean_failure(result, str(bomb), "20000x20000", "400000000", "89478485")
