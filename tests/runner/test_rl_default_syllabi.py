"""Every lifelong-RL metric the README lists has a value in the default run of each shipped syllabus experiment.

For each shipped syllabus experiment, its composed default syllabus (block layout from the Hydra config) carries a
log of that layout through ``evaluate_log`` with every listed lifetime metric defined (no environment: whether a
metric is defined depends on the layout, e.g. performance recovery needs a task trained in 3 blocks). The real
default run of each, read back from MLflow, is in the integration suite (integration/test_default_syllabi.py: a
minute of agents learning at the shipped sizes).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from owl_eval.formats.l2logger import EpisodeLog
from owl_eval.metrics.results import NA
from owl_eval.protocols.lifelong_rl.metrics import evaluate_log
from owl_eval.protocols.lifelong_rl.syllabus import parse_syllabus

ROOT = Path(__file__).resolve().parents[2]
CONFIG_DIR = ROOT / "owl_eval" / "conf"
RL_CONFIG_DIR = ROOT / "owl_eval" / "protocols" / "lifelong_rl" / "conf"
SYLLABUS_EXPERIMENTS = sorted(
    p.stem for p in (RL_CONFIG_DIR / "experiment").glob("lifelong_rl_*.yaml") if not p.stem.endswith("_ste")
)
# how the README's paragraph abbreviates the names it lists
README_TOKENS = {
    "perf_recovery": ["perf_recovery"],
    "perf_maintenance_mrlep/mrtlp": ["perf_maintenance_mrlep", "perf_maintenance_mrtlp"],
    "forward/backward_transfer_ratio/contrast": [
        f"{d}_transfer_{k}" for d in ("forward", "backward") for k in ("ratio", "contrast")
    ],
    "ste_rel_perf": ["ste_rel_perf"],
    "sample_efficiency": ["sample_efficiency"],
    "avg_train_perf": ["avg_train_perf"],
    "avg_eval_perf": ["avg_eval_perf"],
    "saturation": ["saturation"],
    "time_to_saturation": ["time_to_saturation"],
    "normalized_integral": ["normalized_integral"],
    "recovery_time": ["recovery_time"],
    "time_to_learn": ["time_to_learn"],
    "eval_train_gap": ["eval_train_gap"],
}


def readme_rl_metrics() -> list[str]:
    """The metric names of the README's lifelong-RL paragraph ("Logged: ... per-task values")."""
    text = " ".join((ROOT / "README.md").read_text().split())
    logged = re.search(r"Logged: l2metrics' lifetime metrics (.*?) per-task values", text)
    assert logged, "the README's lifelong-RL 'Logged:' paragraph moved: update this test"
    tokens = re.findall(r"`([^`]+)`", logged.group(1))
    assert tokens == list(README_TOKENS), tokens  # a name added to the README must be added here
    return [name for t in tokens for name in README_TOKENS[t]]


def test_the_readme_lists_the_lifetime_metrics():
    names = readme_rl_metrics()
    assert len(names) == 17 and "perf_recovery" in names and "perf_maintenance_mrtlp" in names


def _default_syllabus(experiment: str):
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("config", overrides=[f"+experiment={experiment}"])
    return parse_syllabus(OmegaConf.to_container(cfg.protocol.syllabus, resolve=True))


def _curve(rng, n: int, start: float, learning: bool) -> np.ndarray:
    climb = np.linspace(0.0, 1.0, n) if learning else np.zeros(n)
    return start + climb + rng.normal(0.0, 0.2, n)


@pytest.mark.parametrize("experiment", SYLLABUS_EXPERIMENTS)
def test_the_default_syllabus_layout_defines_every_readme_metric(experiment):
    syllabus = _default_syllabus(experiment)
    rng = np.random.default_rng(0)
    skill: dict[str, float] = {}
    block, btype, task, reward = [], [], [], []
    for i, b in enumerate(syllabus.blocks):
        level = skill.get(b.task_name, 0.0)
        reward.append(_curve(rng, b.episodes, level, b.type == "train"))
        if b.type == "train":
            skill[b.task_name] = level + 1.0
        for _ in range(b.episodes):
            block.append(i)
            btype.append(b.type)
            task.append(b.task_name)
    log = EpisodeLog.from_columns(
        block_num=block,
        block_type=np.array(btype, object),
        task_name=np.array(task, object),
        reward=np.concatenate(reward),
    )
    ste = [
        EpisodeLog.from_columns(
            block_num=np.zeros(60, int), block_type="train", task_name=f"{t}_{v}", reward=_curve(rng, 60, 0.0, True)
        )
        for t, v in syllabus.trained
    ]
    lifetime = evaluate_log(log, ste_logs=ste)["lifetime"]
    missing = {
        n: lifetime[n].reason for n in readme_rl_metrics() if isinstance(lifetime.get(n, NA("not reported")), NA)
    }
    assert not missing, f"{experiment}: N/A in the default syllabus: {missing}"
    assert all(math.isfinite(lifetime[n]) for n in readme_rl_metrics())
