"""owl_eval.formats.csv_table: the CSV readers behind the sail-on-client (and accuracy-matrix) sources.

Values are written by hand; each case states what a CSV parser must make of the text.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from owl_eval.formats.csv_table import read_numeric_rows, read_rows
from owl_eval.sources import SourceFormatError

PATH = Path("scores.csv")


def numeric(text: str, quote_char: str = '"'):
    return read_numeric_rows(PATH, text.encode(), min_width=2, name="p_{}".format, quote_char=quote_char)


@pytest.mark.parametrize(
    "text",
    [
        "a,0.25,0.75\nb,1,0\n",  # plain
        "\ufeffa,0.25,0.75\r\nb,1,0\r\n\r\n",  # BOM, CRLF, a blank trailing line
        "a,0.25,0.75\rb,1,0\r",  # old Mac line ends
        'a,"0.25",0.75\n"b",1,"0"\n',  # quoted numbers and ids
        "a,0.25,0.75\n   \nb,1,0\n\n\n",  # a whitespace-only line (pyarrow refuses it: the fallback reads it)
        "a, 0.25 ,0.75\nb,1,0\n",  # spaces around a number
    ],
)
def test_the_same_table_however_written(text):
    table = numeric(text)
    assert table.ids.tolist() == ["a", "b"]
    np.testing.assert_array_equal(table.values, [[0.25, 0.75], [1.0, 0.0]])


def test_ids_stay_strings():
    table = numeric("001,0.5\n1e3,0.5\n")
    assert table.ids.tolist() == ["001", "1e3"]


def test_line_numbers_are_physical_lines():
    # the id of the second row spans lines 3-4 (quoted line break); a blank line 5; the third row is line 6
    text = 'a,0.1\n\n"b\nc",0.2\n\nd,0.3\n'
    table = numeric(text)
    assert table.ids.tolist() == ["a", "b\nc", "d"]
    np.testing.assert_array_equal(table.line_numbers, [1, 3, 6])
    rows = read_rows(PATH, skip_header=False, text=text)
    np.testing.assert_array_equal(rows.line_numbers, [1, 3, 6])


def test_pipe_quotes():
    rows = read_rows(PATH, skip_header=True, text="id,text\nx,|a , b||c\nd|\n", quote_char="|")
    assert rows.header == ["id", "text"] and rows.fields.tolist() == [["x", "a , b|c\nd"]]


@pytest.mark.parametrize(
    "text, words",
    [
        ("a,0.1\nb,0.2,0.3\n", ["row 2", "expected 2 comma-separated fields", "got 3"]),
        ('a,0.1\n"b\nc",0.2\nd,0.3,0.4\n', ["row 4", "expected 2", "got 3"]),  # after a quoted line break
        ("a,0.1\nb,true\n", ["row 2", "'p_0'", "expected a number", "'true'"]),
        ("a,0.1\nb,\n", ["row 2", "'p_0'", "expected a number", "''"]),
        ('a,0.1\n"b,0.2\nc,0.3\n', ["row 2", "not closed"]),
        ("a\nb\n", ["row 1", "expected 2 comma-separated fields, got 1"]),
    ],
)
def test_errors_name_the_line(text, words):
    with pytest.raises(SourceFormatError) as info:
        numeric(text)
    message = str(info.value)
    assert message.startswith("scores.csv, ") and "\n" not in message
    for w in words:
        assert w in message, message


def test_text_after_a_closing_quote():
    """The ground-truth reader is strict; the result reader reads it as pandas (sail-on-client) does."""
    with pytest.raises(
        SourceFormatError, match=r"scores\.csv, row 2: expected a ',' or the end of the line after a closing"
    ):
        read_rows(PATH, skip_header=False, text='a,0.1\n"b"x,0.2\n')
    assert numeric('a,0.1\n"b"x,0.2\n').ids.tolist() == ["a", "bx"]


def test_not_utf8_names_the_line():
    with pytest.raises(SourceFormatError, match=r"scores\.csv, line 2: not UTF-8"):
        read_numeric_rows(PATH, b"a,0.5\nb\xe9,0.5\n", min_width=2)


def test_nan_is_left_to_the_caller():
    table = numeric("a,nan\nb,0.5\n")
    assert np.isnan(table.values[0, 0]) and table.values[1, 0] == 0.5
