"""JSON a user's data set or track file holds, with a key given twice, is one error naming the file and the key
(JSON's own rule would keep the last silently)."""

from __future__ import annotations

import numpy as np
import pytest

from owl_eval.datasets import read_dataset
from owl_eval.errors import ConfigError
from owl_eval.protocols.trajectory.domains.files import _parse_ndjson
from tests.datasets.test_readers import CLASS_LABEL, SEQUENCE, hf_arrays_table, write_hf


def test_a_saved_hugging_face_folder_with_a_key_twice(tmp_path):
    folder = tmp_path / "hf"
    write_hf(folder, hf_arrays_table(np.zeros((3, 2)), [0, 1, 2]), {"x": SEQUENCE, "label": CLASS_LABEL})
    info = folder / "dataset_info.json"
    info.write_text(info.read_text().replace('"citation": ""', '"features": {},\n  "citation": ""', 1))
    with pytest.raises(ConfigError) as err:
        read_dataset(folder)
    assert "dataset_info.json" in str(err.value) and "'features' is given twice" in str(err.value), str(err.value)


def test_a_trajnet_line_with_a_key_twice(tmp_path):
    path = tmp_path / "a.ndjson"
    text = '{"track": {"f": 0, "p": 1, "x": 0.0, "y": 0.0}}\n{"track": {"f": 10, "p": 1, "x": 1.0, "x": 2.0, "y": 0}}\n'
    with pytest.raises(ValueError, match=r"a\.ndjson, line 2: the key 'x' is given twice"):
        _parse_ndjson(path, text)
