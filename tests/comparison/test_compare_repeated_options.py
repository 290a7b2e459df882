"""``owl-eval-compare`` refuses an option given twice with different values (the last one silently won): one
``error:`` line naming both."""

from __future__ import annotations

import pytest

from owl_eval.comparison import cli


@pytest.mark.parametrize(
    "args,mentions",
    [
        (["experiment=a", "experiment=b"], ["experiment=a", "experiment=b"]),
        (["experiment=a", "experiment_name=b"], ["experiment=a", "experiment_name=b"]),
        (["experiment=a", "--metrics", "top1", "--metrics=oscr"], ["--metrics top1", "--metrics=oscr"]),
        (["experiment=a", "--tag", "agent=x", "--tag", "agent=y"], ["--tag agent=x", "--tag agent=y"]),
        (["experiment=a", "--out", "o1", "--out", "o2"], ["--out o1", "--out o2"]),
        (["--sweep", "r1", "--sweep=r2"], ["--sweep r1", "--sweep=r2"]),
        (["experiment=a", "--uri", "sqlite:///a.db", "--uri", "sqlite:///b.db"], ["--uri"]),
    ],
    ids=["experiment", "experiment-name", "metrics", "tag-key", "out", "sweep", "uri"],
)
def test_an_option_given_twice_is_one_error_naming_both(args, mentions):
    with pytest.raises(SystemExit) as stopped:
        cli.cli(args)
    message = str(stopped.value.code)
    assert message.startswith("error:") and "\n" not in message and "twice" in message, message
    for text in mentions:
        assert text in message, message


def test_the_same_value_twice_and_tags_of_different_keys_are_accepted():
    opts = cli.parse_args(["experiment=a", "experiment=a", "--tag", "agent=x", "--tag", "seed=1", "--tag=seed=1"])
    assert opts["experiment"] == "a" and opts["tags"] == {"agent": "x", "seed": "1"}


def test_a_uri_given_twice_is_named_without_its_password():
    secret = "owl-eval-secret-5e2a"
    with pytest.raises(SystemExit) as stopped:
        cli.cli(["experiment=a", "--uri", f"postgresql://u:{secret}@h/a", f"--uri=postgresql://u:{secret}x@h/b"])
    message = str(stopped.value.code)
    assert "twice" in message and "u:***@h/a" in message and secret not in message, message
