"""Lifelong-RL syllabi: parsing, validation and the templates of the seed's three syllabus types.

A syllabus is a list of blocks ``{type: train|test, task, variant, episodes}`` and a ``kind``:

- ``CL``: one task, several parametric variants; evaluation blocks optional (recommended).
- ``ANT_A``: several tasks, one variant each; every trained task must have evaluation blocks.
- ``ANT_B``: several tasks, at least one with several variants; every trained (task, variant) must have
  evaluation blocks. (The seed's text for A and B is identical; we follow the L2M protocols in which B
  adds parametric variation to A.)
- ``custom``: no structural rule.

In YAML a syllabus gives either ``blocks`` explicitly or ``generate`` (the template's arguments)::

    kind: CL
    generate: {task_variants: [cartpole/default, cartpole/weak_force], cycles: 2,
               train_episodes: 100, test_episodes: 5}
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from owl_eval.errors import ConfigError
from owl_eval.safe_paths import check_name
from owl_eval.typed import as_bool, as_int

KINDS = ("CL", "ANT_A", "ANT_B", "custom")
BLOCK_TYPES = ("train", "test")
BLOCK_KEYS = ("type", "task", "variant", "episodes")
GENERATE_KEYS = ("task_variants", "cycles", "train_episodes", "test_episodes", "initial_test")


class SyllabusError(ConfigError):
    """A syllabus that cannot run: the message names the block index and the key (``protocol.syllabus...``)."""


@dataclass(frozen=True)
class Block:
    type: str
    task: str
    variant: str
    episodes: int

    @property
    def task_name(self) -> str:
        return f"{self.task}_{self.variant}"


@dataclass(frozen=True)
class Syllabus:
    kind: str
    blocks: tuple[Block, ...]

    @property
    def tasks(self) -> list[str]:
        return list(dict.fromkeys(b.task for b in self.blocks))

    @property
    def trained(self) -> list[tuple[str, str]]:
        """Distinct (task, variant) pairs with a training block, in order of first training."""
        return list(dict.fromkeys((b.task, b.variant) for b in self.blocks if b.type == "train"))

    @property
    def episodes(self) -> int:
        return sum(b.episodes for b in self.blocks)


# ----------------------------------------------------------------------------------------- templates


def _pairs(task_variants: Sequence) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for i, tv in enumerate(task_variants):
        if isinstance(tv, str) and tv.count("/") == 1:
            task, variant = tv.split("/")
            out.append((task, variant))
        elif isinstance(tv, Sequence) and not isinstance(tv, str) and len(tv) == 2:
            out.append((str(tv[0]), str(tv[1])))
        else:
            raise SyllabusError(f"protocol.syllabus.generate.task_variants[{i}]: expected 'task/variant', got {tv!r}")
    if not out:
        raise SyllabusError("protocol.syllabus.generate.task_variants: expected at least one 'task/variant'")
    return out


def cycle_template(
    task_variants, *, cycles: int = 2, train_episodes: int = 100, test_episodes: int = 10, initial_test: bool = False
) -> list[Block]:
    """Each cycle trains every (task, variant) in order; after each training block every pair is evaluated
    (``test_episodes`` 0: no evaluation); ``initial_test``: also evaluate everything before any training."""
    pairs = _pairs(task_variants)
    where = "protocol.syllabus.generate"
    cycles = _typed(as_int, cycles, f"{where}.cycles", minimum=1)
    train_episodes = _typed(as_int, train_episodes, f"{where}.train_episodes", minimum=1)
    test_episodes = _typed(as_int, test_episodes, f"{where}.test_episodes", minimum=0)
    initial_test = _typed(as_bool, initial_test, f"{where}.initial_test")
    tests = [Block("test", t, v, test_episodes) for t, v in pairs] if test_episodes > 0 else []
    blocks = list(tests) if initial_test else []
    for _ in range(cycles):
        for t, v in pairs:
            blocks.append(Block("train", t, v, train_episodes))
            blocks.extend(tests)
    return blocks


def _typed(check, value, key, **bounds):
    """``check(value, key, ...)`` with its ConfigError as a :class:`SyllabusError`."""
    try:
        return check(value, key, **bounds)
    except SyllabusError:
        raise
    except ConfigError as exc:
        raise SyllabusError(str(exc)) from None


# ----------------------------------------------------------------------------------------- parsing


def parse_syllabus(node: Mapping[str, Any]) -> Syllabus:
    """A validated :class:`Syllabus` from a config node (``kind`` plus ``blocks`` or ``generate``)."""
    if not isinstance(node, Mapping):
        raise SyllabusError(
            f"protocol.syllabus: expected a mapping with 'kind' and 'blocks' (or 'generate'), got {type(node).__name__}"
        )
    unknown = sorted(set(node) - {"kind", "blocks", "generate", "description"})
    if unknown:
        raise SyllabusError(f"protocol.syllabus: unknown key(s) {unknown}; valid: kind, blocks, generate, description")
    kind = node.get("kind", "custom")
    if kind not in KINDS:
        raise SyllabusError(f"protocol.syllabus.kind: expected one of {list(KINDS)}, got {kind!r}")
    has_blocks, has_generate = node.get("blocks") is not None, node.get("generate") is not None
    if has_blocks == has_generate:
        raise SyllabusError(
            "protocol.syllabus: give exactly one of 'blocks' (a list) or 'generate' (template arguments)"
        )
    if has_generate:
        gen = node["generate"]
        bad = sorted(set(gen) - set(GENERATE_KEYS))
        if bad:
            raise SyllabusError(f"protocol.syllabus.generate: unknown key(s) {bad}; valid: {list(GENERATE_KEYS)}")
        gen = dict(gen)
        if kind in ("ANT_A", "ANT_B"):
            gen.setdefault("initial_test", True)
        blocks = cycle_template(gen.pop("task_variants", ()), **gen)
    else:
        blocks = [_parse_block(i, b) for i, b in enumerate(_as_list(node["blocks"]))]
    syllabus = Syllabus(kind=kind, blocks=tuple(blocks))
    validate_structure(syllabus)
    return syllabus


def _as_list(blocks) -> list:
    if isinstance(blocks, (str, bytes)) or not isinstance(blocks, Sequence):
        raise SyllabusError(f"protocol.syllabus.blocks: expected a list of blocks, got {type(blocks).__name__}")
    if not blocks:
        raise SyllabusError("protocol.syllabus.blocks: the list is empty")
    return list(blocks)


def _parse_block(i: int, b) -> Block:
    where = f"protocol.syllabus.blocks[{i}]"
    if not isinstance(b, Mapping):
        raise SyllabusError(f"{where}: expected a mapping {{type, task, variant, episodes}}, got {b!r}")
    unknown = sorted(set(b) - set(BLOCK_KEYS))
    if unknown:
        raise SyllabusError(f"{where}: unknown key {unknown[0]!r}; a block has keys {list(BLOCK_KEYS)}")
    missing = [k for k in BLOCK_KEYS if k not in b]
    if missing:
        raise SyllabusError(f"{where}.{missing[0]}: missing (a block has keys {list(BLOCK_KEYS)})")
    if b["type"] not in BLOCK_TYPES:
        raise SyllabusError(f"{where}.type: expected 'train' or 'test', got {b['type']!r}")
    for key in ("task", "variant"):
        if not isinstance(b[key], str) or not b[key]:
            raise SyllabusError(f"{where}.{key}: expected a non-empty string, got {b[key]!r}")
    episodes = _typed(as_int, b["episodes"], f"{where}.episodes", minimum=1)
    return Block(b["type"], b["task"], b["variant"], episodes)


def validate_structure(s: Syllabus) -> None:
    """The kind's rules (see the module docstring); every ``<task>_<variant>`` is a safe file name (it names
    the STE store's directories)."""
    for i, b in enumerate(s.blocks):
        check_name(b.task_name, what="task_variant name", where=f"protocol.syllabus.blocks[{i}]")
    if not any(b.type == "train" for b in s.blocks):
        raise SyllabusError(f"protocol.syllabus ({s.kind}): no training block")
    tasks = s.tasks
    variants = {t: list(dict.fromkeys(b.variant for b in s.blocks if b.task == t)) for t in tasks}
    if s.kind == "CL" and len(tasks) != 1:
        raise SyllabusError(
            f"protocol.syllabus (CL): exactly one task expected, got {tasks}; use ANT_A/ANT_B for several tasks"
        )
    if s.kind in ("ANT_A", "ANT_B"):
        if len(tasks) < 2:
            raise SyllabusError(f"protocol.syllabus ({s.kind}): at least two tasks expected, got {tasks}")
        if s.kind == "ANT_A":
            many = {t: v for t, v in variants.items() if len(v) > 1}
            if many:
                raise SyllabusError(f"protocol.syllabus (ANT_A): one variant per task expected, got {many}; use ANT_B")
        elif all(len(v) == 1 for v in variants.values()):
            raise SyllabusError(
                f"protocol.syllabus (ANT_B): at least one task with several variants expected, got {variants}"
            )
        tested = {(b.task, b.variant) for b in s.blocks if b.type == "test"}
        for i, b in enumerate(s.blocks):
            if b.type == "train" and (b.task, b.variant) not in tested:
                raise SyllabusError(
                    f"protocol.syllabus.blocks[{i}].task: {b.task_name} is trained but never evaluated; "
                    f"evaluation blocks are mandatory in {s.kind}"
                )


def validate_against(s: Syllabus, domain) -> None:
    """Every block's task and variant exist in the domain."""
    for i, b in enumerate(s.blocks):
        if b.task not in domain.tasks:
            raise SyllabusError(
                f"protocol.syllabus.blocks[{i}].task: unknown task {b.task!r} in domain {domain.name!r}; "
                f"tasks: {list(domain.tasks)}"
            )
        if b.variant not in domain.variants(b.task):
            raise SyllabusError(
                f"protocol.syllabus.blocks[{i}].variant: unknown variant {b.variant!r} of task {b.task!r}; "
                f"variants: {domain.variants(b.task)}"
            )
