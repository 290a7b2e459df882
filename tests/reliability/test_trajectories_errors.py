"""``owl-eval-evaluate +source=trajectories`` on broken, damaged or mistyped General-Framework
``.npz`` files: each is one ``error:`` line naming the file, the array (zip member), the axis or index (or
the config key), no run, nothing written outside the store. Includes a member corrupted after it was
written (its CRC no longer matches: it used to be memory-mapped and scored), coordinates of 1e308, pickled
object arrays and a forged ``.npy`` header."""

from __future__ import annotations

import io
import struct
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tests.reliability.harness import assert_clean_failure, run_cli

NAN = np.nan


def arrays() -> dict[str, np.ndarray]:
    """2 scenes, 2 predictions, 2 agents, 2 steps (the arrays of tests/sources/test_trajectories_source.py)."""
    true = np.full((2, 1, 2, 2, 2), NAN)
    pred = np.full((2, 2, 2, 2, 2), NAN)
    mask = np.zeros((2, 2, 2), bool)
    true[0, 0, 0] = [[1, 0], [2, 0]]
    pred[0, :, 0] = [[[1, 0], [2, 0]], [[1, 1], [2, 1]]]
    true[0, 0, 1, 0], pred[0, 0, 1, 0], pred[0, 1, 1, 0] = [0, 5], [0, 5], [0, 8]
    mask[0, 0] = True
    mask[0, 1, 0] = True
    true[1, 0, 0] = 0.0
    pred[1, 0, 0], pred[1, 1, 0] = [3, 4], [0, 1]
    mask[1, 0] = True
    log_probs = np.full((2, 3, 2), NAN)
    log_probs[0, :, 0], log_probs[0, :, 1], log_probs[1, :, 0] = [-1, -2, -1.5], [-3, -1, -2], [-1, -2, -0.5]
    return {"Path_true": true, "Path_pred": pred, "Pred_steps": mask, "Log_probs": log_probs}


def member_data_offset(path: Path, member: str) -> int:
    """Byte offset in the file of ``member``'s first data byte: after the zip header, and for a stored
    (uncompressed) member after the .npy header too."""
    with zipfile.ZipFile(path) as zf, open(path, "rb") as fh:
        info = zf.getinfo(member)
        fh.seek(info.header_offset + 26)
        n_name, n_extra = struct.unpack("<HH", fh.read(4))
        fh.seek(info.header_offset + 30 + n_name + n_extra)
        if info.compress_type == zipfile.ZIP_STORED:
            np.lib.format.read_magic(fh)
            np.lib.format.read_array_header_1_0(fh)
        return fh.tell()


def corrupt_member(path: Path, member: str, at: int = 8) -> None:
    """Overwrite 8 bytes of ``member``'s data (``at`` bytes in) without fixing its CRC: a damaged copy."""
    offset = member_data_offset(path, member) + at
    data = bytearray(path.read_bytes())
    data[offset : offset + 8] = np.float64(47.0).tobytes()
    path.write_bytes(bytes(data))


def forged_header_npz(path: Path) -> None:
    """A valid zip (CRCs right) whose Path_pred.npy header claims more data than the member holds."""
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arrays()["Path_pred"])
    raw = buf.getvalue().replace(b"(2, 2, 2, 2, 2)", b"(9, 2, 2, 2, 2)")
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        for name, arr in arrays().items():
            if name != "Path_pred":
                out = io.BytesIO()
                np.lib.format.write_array(out, arr)
                zf.writestr(f"{name}.npy", out.getvalue())
        zf.writestr("Path_pred.npy", raw)


def changed(**change):
    def write(path: Path) -> None:
        data = {k: v for k, v in arrays().items() if change.get(k, 0) is not None} | {
            k: v for k, v in change.items() if v is not None
        }
        np.savez(path, **data)

    return write


def with_value(key, index, value):
    a = arrays()
    a[key][index] = value
    return changed(**{key: a[key]})


def compressed_objects(path: Path) -> None:
    np.savez_compressed(path, **arrays() | {"Path_pred": np.array([None, 1], dtype=object)})


def corrupted(member, compress=False):
    def write(path: Path) -> None:
        (np.savez_compressed if compress else np.savez)(path, **arrays())
        corrupt_member(path, member, at=40 if compress else 8)

    return write


def truncated(path: Path) -> None:
    np.savez(path, **arrays())
    path.write_bytes(path.read_bytes()[:-200])


CLASSES = {"P_true": np.array([[1.0, 0.0], [0.0, 1.0]]), "P_pred": np.array([[0.8, 0.2], [0.3, 0.7]])}

CASES = [
    # (id, how the file is written, extra args, words the error line must contain)
    ("corrupted-member", corrupted("Path_pred.npy"), [], ["preds.npz", "'Path_pred.npy'", "corrupted", "CRC"]),
    (
        "corrupted-compressed-member",
        corrupted("Path_true.npy", compress=True),
        [],
        ["preds.npz", "'Path_true.npy'", "corrupted"],
    ),
    ("truncated-file", truncated, [], ["preds.npz", "not a readable .npz"]),
    ("not-a-zip", lambda p: p.write_text("Path_true,Path_pred\n1,2\n"), [], ["preds.npz", "not a readable .npz"]),
    ("forged-npy-header", forged_header_npz, [], ["preds.npz", "'Path_pred.npy'", "header for shape (9, 2, 2, 2, 2)"]),
    (
        "pickled-objects",
        changed(Path_pred=np.array([None, 1], dtype=object)),
        [],
        ["preds.npz", "'Path_pred.npy'", "Python objects"],
    ),
    ("pickled-objects-compressed", compressed_objects, [], ["preds.npz", "'Path_pred.npy'", "Python objects"]),
    ("missing-member", changed(Pred_steps=None), [], ["preds.npz", "'Pred_steps' (mask) not found"]),
    (
        "strings-as-coordinates",
        changed(Path_pred=np.full((2, 2, 2, 2, 2), "x")),
        [],
        ["'Path_pred'", "dtype <U1", "numbers"],
    ),
    (
        "true-wrong-agents",
        changed(Path_true=np.zeros((2, 1, 3, 2, 2))),
        [],
        ["'Path_true'", "axis 2 (N_A)", "expected 2"],
    ),
    ("pred-xyz", changed(Path_pred=np.zeros((2, 2, 2, 2, 3))), [], ["'Path_pred'", "axis 4 (x, y)", "expected 2"]),
    ("mask-wrong-steps", changed(Pred_steps=np.ones((2, 2, 3), bool)), [], ["'Pred_steps'", "axis 2 (N_O)"]),
    (
        "log-probs-wrong-columns",
        changed(Log_probs=np.zeros((2, 2, 2))),
        [],
        ["'Log_probs'", "axis 1 (N_P + 1)", "expected 3"],
    ),
    (
        "nan-at-counted-step",
        with_value("Path_true", (1, 0, 0, 1, 0), NAN),
        [],
        ["'Path_true' [scene 1, 0, agent 0, step 1]", "NaN"],
    ),
    (
        "prediction-1e308",
        with_value("Path_pred", (0, 1, 0, 0, 1), 1e308),
        [],
        ["'Path_pred' [scene 0, prediction 1, agent 0, step 0]", "1e+308", "beyond"],
    ),
    (
        "prediction-inf",
        with_value("Path_pred", (1, 0, 0, 1, 0), -np.inf),
        [],
        ["'Path_pred' [scene 1, prediction 0, agent 0, step 1]", "inf"],
    ),
    (
        "mask-not-binary",
        changed(Pred_steps=np.where(arrays()["Pred_steps"], 2, 0)),
        [],
        ["'Pred_steps' [scene 0, agent 0, step 0] is 2"],
    ),
    (
        "log-prob-plus-inf",
        with_value("Log_probs", (0, 1, 1), np.inf),
        [],
        ["'Log_probs' [scene 0, column 1, agent 1]", "+inf"],
    ),
    (
        "class-truth-without-predictions",
        changed(P_true=CLASSES["P_true"]),
        [],
        ["'P_true' is there but 'P_pred' is not"],
    ),
    (
        "class-probabilities-as-text",
        changed(**CLASSES | {"P_pred": np.array([["a", "b"], ["c", "d"]])}),
        [],
        ["'P_pred'", "expected numbers"],
    ),
    (
        "class-rows-not-summing",
        changed(**CLASSES | {"P_pred": np.array([[0.5, 0.6], [0.5, 0.5]])}),
        [],
        ["'P_pred' scene 0 sums to 1.1"],
    ),
    ("chunk-size-fraction", changed(), ["source.chunk_size=2.5"], ["source.chunk_size", "integer"]),
    ("chunk-size-negative", changed(), ["source.chunk_size=-1"], ["source.chunk_size", ">= 1"]),
    ("seed-negative", changed(), ["source.seed=-3"], ["source.seed", ">= 0"]),
    ("log-probs-unknown-array", changed(), ["source.log_probs=Nope"], ["preds.npz", "'Nope' (log_probs) not found"]),
    ("path-is-a-directory", lambda p: p.mkdir(), [], ["preds.npz", "not a regular file"]),
    ("missing-file", lambda p: None, [], ["preds.npz", "not found"]),
]


@pytest.mark.parametrize("write, args, mentions", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_trajectories_error_is_one_line_and_creates_no_run(workspace, write, args, mentions):
    inputs = workspace.root / "inputs"
    inputs.mkdir()
    path = inputs / "preds.npz"
    write(path)
    result = run_cli("owl_eval.runner.cli.evaluate", ["+source=trajectories", f"source.path={path}", *args], workspace)
    assert_clean_failure(result, *mentions)
