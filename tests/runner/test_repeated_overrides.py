"""``owl_eval.runner.cli.overrides``: the same config key (or valued flag) given twice with different values on one
command line is named with both arguments; one value said twice, a sweep and different keys are not."""

from __future__ import annotations

import pytest

from owl_eval.runner.cli.overrides import repeated_argument_message, split_command_line


@pytest.mark.parametrize(
    "args,first,second",
    [
        (["seed=1", "seed=2"], "'seed=1' (argument 1)", "'seed=2' (argument 2)"),
        (["+x=1", "-m", "x=2"], "'+x=1' (argument 1)", "'x=2' (argument 3)"),
        (["++x=1", "x=2"], "'++x=1'", "'x=2'"),
        (["x=1", "~x"], "'x=1'", "'~x'"),
        (["hydra.run.dir=a", "hydra.run.dir=b"], "'hydra.run.dir=a'", "'hydra.run.dir=b'"),
        (["agent=ond/a", "agent=ond/b"], "'agent=ond/a'", "'agent=ond/b'"),
        (["seed=1,2", "seed=3"], "'seed=1,2'", "'seed=3'"),
        (["-cd", "a", "--config-dir=b"], "'-cd a' (argument 1)", "'--config-dir=b' (argument 3)"),
    ],
)
def test_a_key_given_twice_names_both_arguments(args, first, second):
    message = repeated_argument_message(args)
    assert message is not None and "twice" in message and first in message and second in message, message


@pytest.mark.parametrize(
    "args",
    [
        ["seed=1,2"],
        ["seed=1", "seed=1"],
        ["figures=false", "progress=false", "figures=false"],
        ["agent=ond/knn_novelty", "agent.k=3"],
        ["db@pkg=a", "db=b"],
        ["protocol.batch_size=[1,"],  # Hydra's own parser reports it, in its words
        ["--cfg", "job", "seed=1"],
    ],
)
def test_no_repeat(args):
    assert repeated_argument_message(args) is None


def test_flag_values_are_not_overrides():
    overrides, flags = split_command_line(["--config-name", "x=1", "x=2", "--info", "searchpath", "y=1", "-i", "z=1"])
    assert overrides == [(3, "x=2"), (6, "y=1"), (8, "z=1")]
    assert [(name, text) for _, name, text in flags] == [
        ("--config-name", "--config-name x=1"),
        ("--info", "--info searchpath"),
        ("--info", "-i"),
    ]
