"""A job run's name, from values: ``[<job>-]<swept values>-[<condition>-]<agent>-seed<seed>``."""

from __future__ import annotations

import re
from collections.abc import Sequence

MAX_NAME_PART = 24


def name_part(value: str) -> str:
    """A value as a short run-name part: the last path element of a config choice (``ond/knn_novelty``),
    characters other than letters, digits and ``_ . = + -`` replaced."""
    return re.sub(r"[^0-9A-Za-z_.=+-]", "_", value.rstrip("/").rsplit("/", 1)[-1])[:MAX_NAME_PART]


def job_run_name(
    *,
    agent: str,
    seed,
    condition: str | None = None,
    job_num=None,
    task_overrides: Sequence[str] = (),
    swept: Sequence[str] = (),
) -> str:
    """``[<job>-]<swept values>-[<condition>-]<agent>-seed<seed>``, e.g. ``3-handwriting-system-knn_novelty-seed1``.

    ``swept``: the keys the sweep varies; each one's value is read from the job's ``task_overrides``; agent and
    seed have their own places."""
    given = {}
    for override in task_overrides:
        key, sep, value = str(override).partition("=")
        if sep:
            given[key.lstrip("+~")] = value
    shown = [k for k in swept if k not in ("agent", "seed") and k in given]
    parts = [str(job_num)] if job_num is not None else []
    parts += [name_part(given[k]) for k in shown]
    if condition and not any(k.rsplit(".", 1)[-1] == "condition" for k in shown):
        parts.append(name_part(condition))
    parts += [name_part(agent), f"seed{seed}"]
    return "-".join(p for p in parts if p)


def choice_name(choices: dict[str, str], resolved: dict, group: str) -> str:
    """The config option chosen for a group (``ond/knn_novelty``), or its target's class name outside Hydra."""
    if choices.get(group):
        return choices[group]
    node = resolved.get(group)
    if node is None:
        return "none"
    return str(node.get("_target_", "unknown")).rsplit(".", 1)[-1]
