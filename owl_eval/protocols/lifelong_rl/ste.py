"""Single-task-expert (STE) references: computed once, stored in a stable directory, reused.

An STE for (task, variant) is an ordinary l2logger log of one training block of ``episodes`` episodes,
run by a fresh agent with a generator derived from (seed, task_name) only, so it is the same whichever
run computes it. It lives in::

    <ste_dir>/<task>_<variant>/<agent label>-<hash>/seed<seed>-ep<episodes>/
        ste_info.json            the full identity (agent config, environment parameters, seed, episodes)
        <task>_<variant>-<stamp>/...   the l2logger log

``<hash>`` covers the agent's config and the environment's parameters, so changing either never reuses
a stale reference. A directory is published by an atomic rename once complete: a crash leaves no STE.
Each name in the path is a checked safe name; an entry whose ``ste_info.json`` is unreadable, not an
object, or points outside its folder counts as absent (it is recomputed), and a stored log is read like
any user log (no link followed).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from owl_eval.formats.l2logger import EpisodeLog, read_log
from owl_eval.safe_paths import SAFE_NAME, check_name, read_text

INFO_FILE = "ste_info.json"


def ste_rng(seed: int, task_name: str) -> np.random.Generator:
    """The STE's generator: depends on the seed and the task name only."""
    return np.random.default_rng([int(seed), *task_name.encode()])


def agent_label(agent_cfg: dict | None, agent_class: str) -> str:
    target = (agent_cfg or {}).get("_target_", agent_class)
    return str(target).rsplit(".", 1)[-1].lower()


class SteStore:
    def __init__(
        self, root: str | os.PathLike, *, seed: int, episodes: int, agent_cfg: dict | None, agent_class: str = "agent"
    ):
        self.root = Path(root).expanduser().resolve()
        self.seed, self.episodes = int(seed), int(episodes)
        self.agent_cfg = json.loads(json.dumps(agent_cfg)) if agent_cfg else None
        self.agent_class = agent_class

    def identity(self, task: str, variant: str, env_identity: dict[str, Any]) -> dict:
        return {
            "task": task,
            "variant": variant,
            "environment": env_identity,
            "seed": self.seed,
            "episodes": self.episodes,
            "agent": self.agent_cfg or {"class": self.agent_class},
        }

    def path(self, identity: dict) -> Path:
        digest = hashlib.sha256(
            json.dumps({"agent": identity["agent"], "environment": identity["environment"]}, sort_keys=True).encode()
        ).hexdigest()[:10]
        label = check_name(
            f"{agent_label(self.agent_cfg, self.agent_class)}-{digest}",
            what="STE agent label",
            where="the STE agent's _target_",
        )
        task = check_name(f"{identity['task']}_{identity['variant']}", what="STE task name", where="the syllabus")
        return self.root / task / label / f"seed{self.seed}-ep{self.episodes}"

    def find(self, identity: dict) -> Path | None:
        """The stored log directory of this identity, or None (absent, incomplete or a different identity)."""
        where = self.path(identity)
        info = where / INFO_FILE
        if not info.is_file():
            return None
        try:
            stored = json.loads(read_text(info, what="STE info file"))
        except (ValueError, RecursionError):  # unreadable, not UTF-8, a link, not JSON: recompute it
            return None
        if not isinstance(stored, dict) or stored.get("identity") != json.loads(json.dumps(identity)):
            return None
        name = stored.get("log_dir")
        if not isinstance(name, str) or not SAFE_NAME.match(name) or ".." in name:
            return None  # the log must be a folder of this entry, never a path out of it
        log_dir = where / name
        return log_dir if log_dir.is_dir() and not log_dir.is_symlink() else None

    def load(self, identity: dict) -> tuple[EpisodeLog, Path] | None:
        found = self.find(identity)
        return None if found is None else (read_log(found), found)

    def compute(self, identity: dict, produce) -> Path:
        """Run ``produce(base_dir) -> scenario_dir`` in a scratch directory, then publish it atomically."""
        final = self.path(identity)
        final.parent.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix=".incomplete-", dir=final.parent))
        try:
            scenario = Path(produce(scratch))
            (scratch / INFO_FILE).write_text(json.dumps({"identity": identity, "log_dir": scenario.name}, indent=2))
            if final.exists() and self.find(identity) is None:  # a stale or broken entry of this key
                shutil.rmtree(final)
            try:
                os.replace(scratch, final)
            except OSError:
                # a parallel job published the same STE first: keep theirs (it has the same numbers)
                found = self.find(identity)
                if found is None:
                    raise
                shutil.rmtree(scratch, ignore_errors=True)
                return found
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        return final / scenario.name
