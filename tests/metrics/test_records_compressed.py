"""Every protocol's record is written deflated (np.savez_compressed) and reads back equal.

An ETH/UCY job's trajectory record was 97 MB stored; the sweep of the issue wrote 1.6 GB.
"""

from __future__ import annotations

import zipfile

import numpy as np

from tests.reliability.test_record_errors import (
    continual_record,
    ond_record,
    trajectory_record,
)


def test_every_protocol_record_is_deflated(tmp_path):
    for name, build in (("ond", ond_record), ("continual", continual_record), ("trajectory", trajectory_record)):
        folder = tmp_path / name
        folder.mkdir()
        path = build(folder)
        path = next(folder.glob("*.npz")) if path.is_dir() else path
        with zipfile.ZipFile(path) as zf:
            kinds = {info.filename: info.compress_type for info in zf.infolist()}
        assert set(kinds.values()) == {zipfile.ZIP_DEFLATED}, (name, kinds)


def test_compressed_trajectory_record_loads_back_equal(tmp_path):
    from owl_eval.protocols.trajectory.record import TrajectoryRecord

    path = trajectory_record(tmp_path)
    with np.load(path, allow_pickle=False) as raw:
        expected = {k: raw[k] for k in raw.files}
    record = TrajectoryRecord.load(path)
    np.testing.assert_array_equal(record.path_pred, expected["Path_pred"])
    np.testing.assert_array_equal(record.pred_steps, expected["Pred_steps"])
    assert record.dt == float(expected["dt"])
