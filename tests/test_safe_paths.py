"""safe_paths.read_bytes: one open with O_NOFOLLOW | O_NONBLOCK, then a regular-file check on the open file."""

import os

import pytest

from owl_eval.errors import UnsafePathError
from owl_eval.safe_paths import read_bytes, read_text


def test_reads_a_regular_file(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"x\ty\n")
    assert read_bytes(tmp_path / "a.txt") == b"x\ty\n" and read_text(str(tmp_path / "a.txt")) == "x\ty\n"


def test_a_link_a_fifo_a_folder_and_a_missing_file_are_one_error_each(tmp_path):
    (tmp_path / "real.txt").write_text("secret")
    os.symlink(tmp_path / "real.txt", tmp_path / "link.txt")
    os.mkfifo(tmp_path / "pipe")  # opening it for reading without O_NONBLOCK would wait for a writer forever
    (tmp_path / "dir").mkdir()
    for name, words in (
        ("link.txt", "symbolic link"),
        ("pipe", "not a regular file"),
        ("dir", "not a regular file"),
        ("gone.txt", "not found"),
    ):
        with pytest.raises(UnsafePathError, match=words) as err:
            read_bytes(tmp_path / name, what="data file")
        assert str(tmp_path / name) in str(err.value) and "secret" not in str(err.value)


def test_not_utf8_names_line_and_byte(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"ok\nbad \xe9\n")
    with pytest.raises(UnsafePathError, match=r"a.txt, line 2: not UTF-8 text \(byte 0xe9 at offset 7\)"):
        read_text(tmp_path / "a.txt")
