"""Reading .npz files for the streamed trajectory table (owl_eval.formats.npz): the same arrays as numpy's own
reader, every member's CRC checked before a memory map is scored, forged headers refused, chunk sizes typed."""

from __future__ import annotations

import io
import struct
import zipfile

import numpy as np
import pytest

import owl_eval.protocols.trajectory.metrics as T
from owl_eval.formats.npz import npz_arrays, verify_npz
from owl_eval.metrics.validation import MetricInputError
from owl_eval.protocols.trajectory.evaluation import trajectory_table_npz


def _arrays():
    rng = np.random.default_rng(0)
    return {
        "x": rng.normal(size=(4, 3)),
        "fortran": np.asfortranarray(rng.normal(size=(3, 5))),
        "scalar": np.array(0.4),
        "empty": np.zeros((0, 3)),
        "flags": rng.random((2, 2)) > 0.5,
        "names": np.array(["a", "bc"]),
        "big_endian": np.arange(6, dtype=">i4"),
        "ints": np.arange(5),
    }


@pytest.mark.parametrize("save", [np.savez, np.savez_compressed])
def test_arrays_equal_numpys_reader(tmp_path, save):
    path = tmp_path / "a.npz"
    save(path, **_arrays())
    got = npz_arrays(path)
    with np.load(path, allow_pickle=False) as expected:
        assert sorted(got) == sorted(expected.files)
        for name in expected.files:
            assert got[name].dtype == expected[name].dtype and got[name].shape == expected[name].shape, name
            np.testing.assert_array_equal(np.asarray(got[name]), expected[name], err_msg=name)


def _corrupt(path, member):
    """Overwrite 8 data bytes of a stored member (after its .npy header) without updating the CRC; flip a
    byte of a deflated member's compressed data."""
    with zipfile.ZipFile(path) as zf:
        if zf.getinfo(member).compress_type == zipfile.ZIP_DEFLATED:
            return _flip_deflated_byte(path, member)
    with zipfile.ZipFile(path) as zf, open(path, "rb") as fh:
        info = zf.getinfo(member)
        fh.seek(info.header_offset + 26)
        n_name, n_extra = struct.unpack("<HH", fh.read(4))
        fh.seek(info.header_offset + 30 + n_name + n_extra)
        np.lib.format.read_magic(fh)
        np.lib.format.read_array_header_1_0(fh)
        offset = fh.tell() + 8
    data = bytearray(path.read_bytes())
    data[offset : offset + 8] = np.float64(47.0).tobytes()
    path.write_bytes(bytes(data))


def test_corrupted_member_is_refused_not_scored(tmp_path):
    # Truth at the origin, every prediction 1 m away: ADE 1. A damaged byte in Path_pred used to be
    # memory-mapped and scored (the ADE 0.84 -> 47.96); now the CRC check names the member.
    path = tmp_path / "preds.npz"
    pred = np.zeros((4, 3, 2, 5, 2))
    pred[..., 0] = 1.0
    np.savez(path, Path_true=np.zeros((4, 1, 2, 5, 2)), Path_pred=pred, Pred_steps=np.ones((4, 2, 5), bool))
    assert trajectory_table_npz(path, rng=np.random.default_rng(0), kde=False)["ade_marginal"] == 1.0
    _corrupt(path, "Path_pred.npy")
    with pytest.raises(MetricInputError, match=r"preds.npz: member 'Path_pred.npy' is corrupted \(Bad CRC-32"):
        trajectory_table_npz(path, rng=np.random.default_rng(0), kde=False)
    with pytest.raises(MetricInputError, match="'Path_pred.npy' is corrupted"):
        verify_npz(path)
    assert set(npz_arrays(path, verify=False)) == {"Path_true", "Path_pred", "Pred_steps"}  # the check is the CRC


def test_forged_header_and_objects_name_the_member(tmp_path):
    buf = io.BytesIO()
    np.lib.format.write_array(buf, np.zeros((2, 3)))
    with zipfile.ZipFile(tmp_path / "forged.npz", "w") as zf:
        zf.writestr("a.npy", buf.getvalue().replace(b"(2, 3)", b"(9, 3)"))  # claims 216 bytes, holds 48
    with pytest.raises(
        MetricInputError,
        match=r"member 'a.npy' has a header for shape \(9, 3\) of float64 \(216 bytes\) "
        r"but holds 48 bytes",
    ):
        npz_arrays(tmp_path / "forged.npz")
    for save in (np.savez, np.savez_compressed):
        save(tmp_path / "obj.npz", a=np.array([None, 1], dtype=object))
        with pytest.raises(MetricInputError, match="member 'a.npy' holds Python objects"):
            npz_arrays(tmp_path / "obj.npz")
    (tmp_path / "text.npz").write_text("not a zip")
    with pytest.raises(MetricInputError, match="text.npz: not a readable .npz"):
        npz_arrays(tmp_path / "text.npz")


@pytest.mark.parametrize("chunk_size", [2.5, 0, -1, True, "4"])
def test_chunk_size_must_be_a_positive_integer(tmp_path, chunk_size):
    true, pred, mask = np.zeros((2, 1, 1, 2)), np.zeros((2, 3, 1, 1, 2)), np.ones((2, 1, 1), bool)
    np.savez(tmp_path / "a.npz", Path_true=true[:, None], Path_pred=pred, Pred_steps=mask)
    with pytest.raises(MetricInputError, match="chunk_size: expected a positive integer"):
        T.trajectory_table(true, pred, mask, rng=np.random.default_rng(0), kde=False, chunk_size=chunk_size)
    with pytest.raises(MetricInputError, match="chunk_size: expected a positive integer"):
        trajectory_table_npz(tmp_path / "a.npz", rng=np.random.default_rng(0), kde=False, chunk_size=chunk_size)


def _flip_deflated_byte(path, member, at=0.5):
    """Flip one byte in the middle of a deflated member's compressed data (the CRC is not updated)."""
    with zipfile.ZipFile(path) as zf, open(path, "rb") as fh:
        info = zf.getinfo(member)
        assert info.compress_type == zipfile.ZIP_DEFLATED
        fh.seek(info.header_offset + 26)
        n_name, n_extra = struct.unpack("<HH", fh.read(4))
        offset = info.header_offset + 30 + n_name + n_extra + int(info.compress_size * at)
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x10
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("at", [0.0, 0.02, 0.5])  # in the .npy header's bytes, near it, in the data
def test_corrupted_deflated_member_is_refused(tmp_path, at):
    # Records are written with np.savez_compressed: their members are read in full (no map), and the
    # CRC-32 is checked at the end of that read, also with verify=False; damage that garbles the header
    # is named as damage too, not as a malformed .npy.
    path = tmp_path / "rec.npz"
    rng = np.random.default_rng(3)
    np.savez_compressed(path, Path_pred=rng.normal(size=(50, 40)).round(2), other=np.arange(3))
    _flip_deflated_byte(path, "Path_pred.npy", at)
    for verify in (True, False):
        with pytest.raises(MetricInputError, match=r"rec.npz: member 'Path_pred.npy' is corrupted"):
            npz_arrays(path, verify=verify)


def test_deflated_members_are_decompressed_once(tmp_path, monkeypatch):
    """npz_arrays skips deflated members in its CRC pre-check: they are checked while being read."""
    path = tmp_path / "rec.npz"
    np.savez_compressed(path, a=np.arange(1000.0), b=np.ones((20, 20)))
    opened = []
    real_open = zipfile.ZipFile.open

    def counting_open(self, name, *args, **kwargs):
        opened.append(getattr(name, "filename", name))
        return real_open(self, name, *args, **kwargs)

    monkeypatch.setattr(zipfile.ZipFile, "open", counting_open)
    arrays = npz_arrays(path)
    assert sorted(opened) == ["a.npy", "b.npy"]
    np.testing.assert_array_equal(arrays["a"], np.arange(1000.0))
