"""A failed sweep's traceback file is created, never opened: a new file (``O_EXCL``, mode 600) in the sweep's own
folder, not a predictable name in the shared temporary folder, where another local user could plant a link that
sends the write to any file of ours (owl_eval.runner.config.error_files.save_traceback).

The sweep runs its job in a joblib worker (the command's process has no job log then, so the traceback needs a file
of its own); the agent crashes. A link is planted at the old name, ``$TMPDIR/owl-eval-error-<pid>.txt``, pointing at
a victim file, as soon as the command's pid is known.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from tests.fixtures.searchpath import TEST_AGENTS
from tests.runner.test_faults import child_env, runner_cmd

pytestmark = pytest.mark.subprocess

CRASHING_SWEEP = [
    "-m",
    "+experiment=ond_given_detection",
    TEST_AGENTS,
    "agent=ond/crashing",
    "agent.crash_at_trial=0",
    "protocol.num_trials=2",
    "seed=0",
    "hydra/launcher=joblib",
    "hydra.launcher.n_jobs=2",  # n_jobs=1 would run the job in the command's process
]


@pytest.mark.slow
def test_a_failed_sweeps_traceback_goes_to_a_new_file_in_its_folder_not_through_a_planted_link(
    experiment, start_background, tmp_path
):
    env = child_env()
    temp = Path(env.get("TMPDIR") or "/tmp")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    # a new interpreter, as joblib sweeps are run from the command line
    proc = start_background(
        runner_cmd(experiment, *CRASHING_SWEEP), log_name="sweep.log", env=env, cwd=experiment["cwd"]
    )
    planted = temp / f"owl-eval-error-{proc.pid}.txt"
    planted.symlink_to(victim)
    try:
        code = proc.wait(timeout=300)
        log = (tmp_path / "sweep.log").read_text()
        assert code == 1, log[-3000:]
        assert victim.read_text() == "precious\n", "the traceback was written through the planted link"
        (line,) = [x for x in log.splitlines() if x.startswith("error:")]
        found = re.search(r"\(traceback in (.+)\)$", line)
        assert found, line
        written = Path(found.group(1))
        sweeps = Path(experiment["cwd"]) / "outputs" / "multiruns"
        assert written.is_file() and written.parent.parent.parent == sweeps, line  # in the sweep's own folder
        assert "AgentCrash" in written.read_text()
        assert stat.S_IMODE(os.lstat(written).st_mode) == 0o600
        assert sorted(p.name for p in temp.glob("owl-eval-error-*")) == [planted.name]  # nothing else in $TMPDIR
    finally:
        planted.unlink(missing_ok=True)
