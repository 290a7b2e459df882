"""Ambiguous and unreadable input: the same thing given twice (a config key on one command line, an option of
``owl-eval-compare``, two classes of one name, two ``.npz`` members of one name, a repeated JSON key) is one
``error:`` line naming both places and no run; text that is not what its format says and empty arrays where a
value per sample is needed are one line naming the file and the array, never a codec's or numpy's message."""

from __future__ import annotations

import pytest

from tests.reliability.harness import assert_clean_failure, run_cli

OND = "+experiment=ond_given_detection"
FAST = ["protocol.num_trials=3", "figures=false"]

REPEATED_KEYS = [
    # (id, module, args, words the error line must contain)
    ("seed", "runner", [OND, "seed=1", "seed=2"], ["'seed'", "seed=1", "seed=2", "twice"]),
    (
        "nested-key",
        "runner",
        [OND, "protocol.batch_size=3", "protocol.batch_size=4"],
        ["protocol.batch_size=3", "protocol.batch_size=4"],
    ),
    ("add-then-set", "runner", [OND, "+agent.k=1", "agent.k=2"], ["'agent.k'", "+agent.k=1", "agent.k=2"]),
    ("force-add", "runner", [OND, "++seed=1", "seed=2"], ["'seed'", "++seed=1", "seed=2"]),
    ("group", "runner", [OND, "domain=digits", "domain=handwriting"], ["'domain'", "domain=handwriting"]),
    ("hydra-key", "runner", [OND, "hydra.job.chdir=false", "hydra.job.chdir=true"], ["'hydra.job.chdir'"]),
    ("sweep-and-value", "runner", ["-m", OND, "seed=1,2", "seed=3"], ["seed=1,2", "seed=3"]),
    ("config-dir", "runner", [OND, "--config-dir", "a", "--config-dir=b"], ["--config-dir", "'--config-dir=b'"]),
    (
        "evaluate",
        "owl_eval.runner.evaluate",
        ["+source=record", "source.path=a", "source.path=b"],
        ["'source.path'", "source.path=a", "source.path=b"],
    ),
]


@pytest.mark.parametrize("module,args,mentions", [pytest.param(*c[1:], id=c[0]) for c in REPEATED_KEYS])
def test_a_key_given_twice_on_the_command_line_is_refused(workspace, module, args, mentions):
    line = assert_clean_failure(run_cli(module, [*FAST, *args] if module == "runner" else args, workspace), *mentions)
    assert "argument" in line  # names both places


def test_the_same_value_twice_and_a_sweep_are_not_refused_as_repeats(workspace):
    # `seed=0 seed=0` says one thing; `seed=1.5` then fails on its own (not as a repeat).
    line = assert_clean_failure(run_cli("runner", [*FAST, OND, "seed=1.5", "seed=1.5"], workspace), "seed", "integer")
    assert "twice" not in line


def test_an_override_hydra_cannot_parse_keeps_hydras_words(workspace):
    line = assert_clean_failure(run_cli("runner", [*FAST, OND, "protocol.batch_size=[1,"], workspace), "[1,")
    assert "twice" not in line
