"""The column-wise reader (pyarrow.csv) against Python's csv module and ``float``, row by row, on logs with
every quirk the format allows: quoted JSON with doubled quotes, a quoted tab, pandas' missing-value tokens,
numbers with spaces, CRLF, a BOM, a last line without newline, integer and free-text extra columns."""

import csv
import io
import json
import math

import numpy as np
import pytest

from owl_eval.formats.l2logger import read as l2read
from owl_eval.formats.l2logger import read_log

COLUMNS = [
    "block_num",
    "exp_num",
    "worker_id",
    "block_type",
    "block_subtype",
    "task_name",
    "task_params",
    "exp_status",
    "timestamp",
    "episode_step_count",
    "note",
    "reward",
]
NA = ["", "NA", "nan", "null", "N/A", "#N/A", "NaN"]


def _field(text: str) -> str:
    """Quote as Python's csv writer does with QUOTE_MINIMAL (what l2logger writes)."""
    if any(c in text for c in '\t"\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _write_log(root, rng, n_blocks=12):
    """Files as l2logger lays them out, with quirks; returns the files' texts by path."""
    (root / "logger_info.json").parent.mkdir(parents=True, exist_ok=True)
    (root / "logger_info.json").write_text(json.dumps({"metrics_columns": ["reward"], "log_format_version": "1.1"}))
    (root / "scenario_info.json").write_text("{}")
    exp = 0
    written = {}
    for b in range(n_blocks):
        btype = "train" if b % 3 else "test"
        task = ["Reach_Easy", "push_hard", "lift_mid"][b % 3]
        params = json.dumps({"goal": [b, 2], "label": 'say "hi"' + ("\tx" if b == 4 else "")})
        rows = []
        for _ in range(int(rng.integers(1, 30))):
            r = rng.normal()
            kind = rng.random()
            reward = rng.choice(NA) if kind < 0.1 else (f" {r!r} " if kind < 0.15 else repr(r))
            note = "free text, " + str(exp) if b % 2 else str(exp)
            fields = [str(b), str(exp), "worker-1", btype, "wake", task, params, "complete"]
            fields += [f"20240101T000000.{exp:06d}", str(int(rng.integers(1, 500))), note, reward]
            rows.append("\t".join(_field(f) for f in fields))
            exp += 1
        text = "\t".join(COLUMNS) + "\n" + "\n".join(rows) + "\n"
        if b == 2:
            text = text.replace("\n", "\r\n")
        if b == 3:
            text = "\ufeff" + text
        if b == 5:
            text = text[:-1]
        path = root / "worker-1" / f"{b}-{btype}" / "data-log.tsv"
        path.parent.mkdir(parents=True)
        path.write_bytes(text.encode())
        written[path] = text
    return written


def _expected(written):
    """Every row by Python's csv module, numbers by float() with pandas' missing-value tokens as NaN."""
    rows = []
    for text in written.values():
        body = text.removeprefix("\ufeff").replace("\r\n", "\n")
        rows += list(csv.reader(io.StringIO(body), delimiter="\t", quotechar='"'))[1:]
    rows.sort(key=lambda r: int(r[1]))
    cols = {name: [r[j] for r in rows] for j, name in enumerate(COLUMNS)}
    cols["reward"] = [math.nan if v.strip() in NA else float(v) for v in cols["reward"]]
    cols["episode_step_count"] = [float(v) for v in cols["episode_step_count"]]
    cols["task_name"] = [t.lower() for t in cols["task_name"]]
    return cols


def _assert_read_as(log, cols):
    assert len(log) == len(cols["exp_num"])
    for name in COLUMNS:
        got = log[name].tolist()
        if name in ("block_num", "exp_num"):
            assert got == [int(v) for v in cols[name]], name
        elif name in ("reward", "episode_step_count"):
            np.testing.assert_array_equal(np.asarray(got, dtype=float), np.asarray(cols[name]), err_msg=name)
        else:
            assert got == cols[name], name


@pytest.mark.parametrize("seed", [0, 1])
def test_column_wise_reading_equals_the_csv_module(tmp_path, seed, monkeypatch):
    written = _write_log(tmp_path / "scn-1", np.random.default_rng(seed))
    cols = _expected(written)

    def text_reader_used(*args, **kwargs):
        raise AssertionError("a well-formed log must be read column-wise")

    with monkeypatch.context() as m:
        m.setattr(l2read, "_read_bodies_as_text", text_reader_used)
        log = read_log(tmp_path / "scn-1", raw=True)
    _assert_read_as(log, cols)
    # a blank line sends the files through the csv-module reader: the same values
    first = next(iter(written))
    first.write_bytes((written[first].removeprefix("\ufeff") + "\n").encode())
    _assert_read_as(read_log(tmp_path / "scn-1", raw=True), cols)


def test_rows_map_to_their_file_lines(tmp_path):
    written = _write_log(tmp_path / "scn-1", np.random.default_rng(3), n_blocks=6)
    log = read_log(tmp_path / "scn-1", raw=True)
    for path, text in written.items():  # plain loop: the file and line of each exp_num
        for lineno, row in enumerate(text.removeprefix("\ufeff").replace("\r\n", "\n").split("\n")[1:], start=2):
            if row:
                i = int(np.flatnonzero(log["exp_num"] == int(row.split("\t")[1]))[0])
                assert log.where(i) == f"{path.resolve()} line {lineno}"
