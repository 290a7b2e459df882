"""``owl_eval.json_input``: a JSON object that names one key twice is ambiguous (JSON's own rule keeps the last
silently): one error naming the key, both values and, when cheap to find, the line of the second."""

from __future__ import annotations

import json

import pytest

from owl_eval.json_input import RepeatedKey, parse_json, refuse_repeated_keys


def test_a_key_twice_is_one_error_with_the_key_and_the_line():
    text = '{\n  "a": 1,\n  "b": {"c": 2},\n  "a": [3]\n}'
    with pytest.raises(ValueError) as err:
        parse_json(text, where="f.json")
    message = str(err.value)
    assert message.startswith("f.json, line 4: the key 'a' is given twice") and "1 and [3]" in message, message


def test_a_key_twice_in_a_nested_object_is_found():
    with pytest.raises(ValueError, match=r"the key 'c' is given twice"):
        parse_json('{"b": [{"c": 1, "c": 1}]}', where="f.json")


def test_the_same_key_in_two_objects_is_fine_and_no_line_is_guessed():
    assert parse_json('[{"a": 1}, {"a": 2}]', where="f.json") == [{"a": 1}, {"a": 2}]
    with pytest.raises(ValueError) as err:  # 'a' is a key three times: which one is the repeat is not guessed
        parse_json('[{"a": 1}, {"a": 2, "a": 3}]', where="f.json")
    assert str(err.value).startswith("f.json: the key 'a'")


def test_the_hook_serves_any_json_loads():
    with pytest.raises(RepeatedKey):
        json.loads('{"x": 1, "x": 2}', object_pairs_hook=refuse_repeated_keys)
    assert json.loads('{"x": 1, "y": 2}', object_pairs_hook=refuse_repeated_keys) == {"x": 1, "y": 2}
