"""The README's promises: its agent example runs as written, its config snippet composes."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from runner.domains.classification import DigitsDomain
from runner.protocols.ond import OndProtocol

README = Path(__file__).resolve().parents[2] / "README.md"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", README.read_text(), flags=re.S)


def test_readme_agent_example_runs_and_beats_chance():
    code = next(b for b in _blocks("python") if "class NearestMeanAgent" in b)
    namespace: dict = {}
    exec(compile(code, "README-agent", "exec"), namespace)
    agent = namespace["NearestMeanAgent"]()
    record = OndProtocol(num_trials=3, condition="given").run(domain=DigitsDomain(), agent=agent,
                                                              rng=np.random.default_rng(0), progress=False)
    known = np.concatenate([t.gt_class[t.gt_class > 0] for t in record.trials])
    predicted = np.concatenate([np.argmax(t.p_class[t.gt_class > 0], 1) for t in record.trials])
    # 6 known classes: chance is 1/6 on known samples.
    assert np.mean(predicted == known) > 0.5


def test_readme_names_the_commands_that_exist():
    text = README.read_text()
    for experiment in re.findall(r"\+experiment=([a-z_]+)", text):
        assert (README.parent / "conf" / "experiment" / f"{experiment}.yaml").is_file(), experiment
