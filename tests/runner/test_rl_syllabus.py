"""Syllabus parsing and validation, the templates, and the packaged syllabus files."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from owl_eval.protocols.lifelong_rl.syllabus import (
    Block,
    SyllabusError,
    cycle_template,
    parse_syllabus,
    validate_against,
)

CONF = Path(__file__).resolve().parents[2] / "owl_eval" / "protocols" / "lifelong_rl" / "conf"


def blocks(*rows):
    return [{"type": t, "task": task, "variant": v, "episodes": n} for t, task, v, n in rows]


def test_cl_template_by_hand():
    got = cycle_template([("cartpole", "a"), ("cartpole", "b")], cycles=2, train_episodes=7, test_episodes=3)
    tr = lambda v: Block("train", "cartpole", v, 7)  # noqa: E731
    te = lambda v: Block("test", "cartpole", v, 3)  # noqa: E731
    assert got == [
        tr("a"),
        te("a"),
        te("b"),
        tr("b"),
        te("a"),
        te("b"),
        tr("a"),
        te("a"),
        te("b"),
        tr("b"),
        te("a"),
        te("b"),
    ]


def test_ant_templates_evaluate_before_training():
    a = cycle_template(
        [("cartpole", "v"), ("frozenlake", "v")], cycles=1, train_episodes=5, test_episodes=2, initial_test=True
    )
    assert [(b.type, b.task) for b in a] == [
        ("test", "cartpole"),
        ("test", "frozenlake"),
        ("train", "cartpole"),
        ("test", "cartpole"),
        ("test", "frozenlake"),
        ("train", "frozenlake"),
        ("test", "cartpole"),
        ("test", "frozenlake"),
    ]
    b = cycle_template(
        [("cartpole", "x"), ("cartpole", "y"), ("frozenlake", "z")],
        cycles=1,
        train_episodes=5,
        test_episodes=0,
        initial_test=True,
    )
    assert [b_.task_name for b_ in b] == ["cartpole_x", "cartpole_y", "frozenlake_z"]


def test_generate_equals_the_explicit_blocks():
    explicit = parse_syllabus(
        {
            "kind": "CL",
            "blocks": blocks(
                ("train", "c", "a", 4),
                ("test", "c", "a", 2),
                ("test", "c", "b", 2),
                ("train", "c", "b", 4),
                ("test", "c", "a", 2),
                ("test", "c", "b", 2),
            ),
        }
    )
    generated = parse_syllabus(
        {
            "kind": "CL",
            "generate": {"task_variants": ["c/a", "c/b"], "cycles": 1, "train_episodes": 4, "test_episodes": 2},
        }
    )
    assert explicit == generated and generated.episodes == 16
    assert generated.trained == [("c", "a"), ("c", "b")]


@pytest.mark.parametrize(
    "bad, message",
    [
        ({"type": "trian"}, "syllabus.blocks[1].type: expected 'train' or 'test', got 'trian'"),
        ({"episodes": 0}, "syllabus.blocks[1].episodes: expected an integer >= 1, got 0"),
        ({"episodes": 2.5}, "syllabus.blocks[1].episodes"),
        ({"task": ""}, "syllabus.blocks[1].task: expected a non-empty string"),
        ({"epsiodes": 3}, "syllabus.blocks[1]: unknown key 'epsiodes'"),
    ],
)
def test_bad_block_names_the_index_and_the_key(bad, message):
    rows = blocks(("train", "c", "a", 4), ("test", "c", "a", 2))
    rows[1].update(bad)
    with pytest.raises(SyllabusError) as err:
        parse_syllabus({"kind": "CL", "blocks": rows})
    assert message in str(err.value)


def test_missing_key_is_named():
    rows = blocks(("train", "c", "a", 4))
    del rows[0]["variant"]
    with pytest.raises(SyllabusError, match=r"syllabus.blocks\[0\].variant: missing"):
        parse_syllabus({"kind": "CL", "blocks": rows})


@pytest.mark.parametrize(
    "kind, rows, message",
    [
        ("CL", [("train", "c", "a", 4), ("train", "f", "a", 4)], "exactly one task"),
        ("ANT_A", [("train", "c", "a", 4), ("test", "c", "a", 1)], "at least two tasks"),
        (
            "ANT_A",
            [("train", "c", "a", 4), ("test", "c", "a", 1), ("train", "f", "a", 4)],
            "syllabus.blocks[2].task: f_a is trained but never evaluated",
        ),
        (
            "ANT_A",
            [
                ("train", "c", "a", 4),
                ("test", "c", "a", 1),
                ("train", "c", "b", 4),
                ("test", "c", "b", 1),
                ("train", "f", "a", 4),
                ("test", "f", "a", 1),
            ],
            "one variant per task",
        ),
        (
            "ANT_B",
            [("train", "c", "a", 4), ("test", "c", "a", 1), ("train", "f", "a", 4), ("test", "f", "a", 1)],
            "several variants",
        ),
        ("CL", [("test", "c", "a", 4)], "no training block"),
        ("XYZ", [("train", "c", "a", 4)], "syllabus.kind: expected one of"),
    ],
)
def test_kind_rules(kind, rows, message):
    with pytest.raises(SyllabusError) as err:
        parse_syllabus({"kind": kind, "blocks": blocks(*rows)})
    assert message in str(err.value)


def test_blocks_xor_generate():
    with pytest.raises(SyllabusError, match="exactly one of 'blocks'"):
        parse_syllabus({"kind": "CL"})
    with pytest.raises(SyllabusError, match="unknown key"):
        parse_syllabus({"kind": "CL", "generate": {"task_variants": ["c/a"], "cycle": 2}})


def test_unknown_task_or_variant_in_the_domain():
    class Domain:
        name, tasks = "d", {"cartpole": None}

        def variants(self, task):
            return ["default"]

    s = parse_syllabus(
        {"kind": "CL", "blocks": blocks(("train", "cartpole", "default", 2), ("train", "cartpole", "longg", 2))}
    )
    with pytest.raises(SyllabusError, match=r"syllabus.blocks\[1\].variant: unknown variant 'longg'"):
        validate_against(s, Domain())


@pytest.mark.parametrize(
    "name, kind, trained",
    [("cartpole_cl", "CL", 3), ("frozenlake_cl", "CL", 3), ("ant_a", "ANT_A", 2), ("ant_b", "ANT_B", 4)],
)
def test_packaged_syllabus_files_parse(name, kind, trained):
    s = parse_syllabus(OmegaConf.to_container(OmegaConf.load(CONF / "syllabus" / f"{name}.yaml"), resolve=True))
    assert s.kind == kind and len(s.trained) == trained


def test_packaged_syllabi_only_name_tasks_and_variants_of_the_domains():
    pytest.importorskip("gymnasium")
    from owl_eval.protocols.lifelong_rl.domains import RLDomain

    tasks = {}
    for d in ("cartpole", "frozenlake"):
        cfg = OmegaConf.to_container(OmegaConf.load(CONF / "domain" / f"{d}.yaml"))
        tasks.update(cfg["tasks"])
    both = RLDomain("both", tasks)
    for name in ("cartpole_cl", "frozenlake_cl", "ant_a", "ant_b"):
        validate_against(
            parse_syllabus(OmegaConf.to_container(OmegaConf.load(CONF / "syllabus" / f"{name}.yaml"))), both
        )


@pytest.mark.parametrize(
    "generate, message",
    [
        ({"cycles": 2.5}, "protocol.syllabus.generate.cycles: expected an integer, got 2.5 (float)"),
        ({"train_episodes": "many"}, "protocol.syllabus.generate.train_episodes: expected an integer, got 'many'"),
        ({"test_episodes": -1}, "protocol.syllabus.generate.test_episodes: expected an integer >= 0, got -1"),
        ({"initial_test": "maybe"}, "protocol.syllabus.generate.initial_test: expected true or false, got 'maybe'"),
    ],
)
def test_template_arguments_are_typed(generate, message):
    with pytest.raises(SyllabusError) as err:
        parse_syllabus({"kind": "CL", "generate": {"task_variants": ["c/a"]} | generate})
    assert str(err.value) == message


def test_episode_counts_given_as_whole_floats_give_the_same_blocks():
    a = parse_syllabus(
        {"kind": "CL", "generate": {"task_variants": ["c/a", "c/b"], "cycles": 2.0, "train_episodes": "4"}}
    )
    b = parse_syllabus({"kind": "CL", "generate": {"task_variants": ["c/a", "c/b"], "cycles": 2, "train_episodes": 4}})
    assert a == b


def test_task_names_become_paths_so_they_must_be_safe():
    from owl_eval.errors import UnsafePathError

    with pytest.raises(
        UnsafePathError, match=r"protocol.syllabus.blocks\[0\]: task_variant name '\.\._a' is not a safe name"
    ):
        parse_syllabus({"kind": "CL", "blocks": [{"type": "train", "task": "..", "variant": "a", "episodes": 1}]})
