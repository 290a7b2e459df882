"""The command line itself: Hydra's own errors (overrides that do not parse, unknown keys and options,
broken interpolations), the top-level switches and the tracking node are each one ``error:`` line, and no
run exists afterwards. An agent that crashes mid-run is the one failure that leaves a run: FAILED, with
the completed trials scored, and still a single ``error:`` line on the console."""

from __future__ import annotations

import pytest

from tests.fixtures.searchpath import TEST_AGENTS
from tests.reliability.harness import assert_clean_failure, run_cli

OND = "+experiment=ond_given_detection"
FAST = ["protocol.num_trials=3", "figures=false"]

CASES = [
    # (id, module, args, words the error line must contain)
    (
        "typo-key",
        "runner",
        [OND, "protocol.batch_sizee=3"],
        ["protocol.batch_sizee: unknown key (did you mean protocol.batch_size?)", "valid keys"],
    ),
    ("unknown-experiment", "runner", ["+experiment=nope"], ["experiment", "'nope'", "ond_given_detection"]),
    ("unknown-domain", "runner", [OND, "domain=nope"], ["domain", "'nope'", "digits"]),
    ("unknown-agent", "runner", [OND, "agent=ond/nope"], ["agent", "ond/knn_novelty"]),
    ("override-syntax", "runner", [OND, "protocol.batch_size=[1,"], ["[1,"]),
    ("missing-interpolation", "runner", [OND, "protocol.batch_size=${oops}"], ["protocol.batch_size", "oops"]),
    ("seed-fraction", "runner", [OND, "seed=1.5"], ["seed", "integer"]),
    ("seed-negative", "runner", [OND, "seed=-1"], ["seed", ">= 0"]),
    ("progress-not-bool", "runner", [OND, "progress=2"], ["progress", "true or false"]),
    ("tracking-unknown-key", "runner", [OND, "+tracking.bogus=1"], ["tracking.bogus", "unknown key"]),
    ("agent-target-missing", "runner", [OND, "agent._target_=nowhere.Nothing"], ["agent", "nowhere.Nothing"]),
    ("agent-unknown-param", "runner", [OND, "+agent.bogus=1"], ["agent", "bogus"]),
    ("launcher-unknown", "runner", [OND, "hydra/launcher=nope"], ["hydra/launcher", "nope"]),
    ("unknown-flag", "runner", [OND, "--bogus"], ["--bogus", "key=value"]),
    ("evaluate-no-source", "owl_eval.runner.cli.evaluate", [], ["source", "sailon"]),
    ("evaluate-no-path", "owl_eval.runner.cli.evaluate", ["+source=sailon"], ["source.path"]),
    ("evaluate-unknown-source", "owl_eval.runner.cli.evaluate", ["+source=nope"], ["source", "'nope'"]),
    ("evaluate-typo-key", "owl_eval.runner.cli.evaluate", ["+source=sailon", "source.pth=x"], ["source.pth"]),
    ("evaluate-seed", "owl_eval.runner.cli.evaluate", ["+source=sailon", "source.path=x", "seed=x"], ["seed"]),
]


# The catalogue runs the CLI in-process (tests/inprocess.py); these cases run the real `python -m` command line.
REAL_COMMAND_LINE = {"typo-key", "evaluate-no-source"}


@pytest.mark.parametrize(
    "module,args,mentions",
    [pytest.param(*c[1:], id=c[0], marks=[pytest.mark.subprocess] if c[0] in REAL_COMMAND_LINE else []) for c in CASES],
)
def test_cli_error_is_one_line_and_creates_no_run(workspace, module, args, mentions):
    assert_clean_failure(run_cli(module, [*FAST, *args] if module == "runner" else args, workspace), *mentions)


def test_sweep_whose_every_job_has_a_config_error_leaves_no_run(workspace):
    # The sweep's parent run exists before its jobs; when every job stops on a config error it is removed.
    result = run_cli("runner", ["-m", OND, *FAST, "protocol.batch_size=2.5,3.5"], workspace)
    line = assert_clean_failure(result, "protocol.batch_size", "integer", "2.5")
    assert "overrides" in line  # names the sweep job that failed


def test_crashing_agent_leaves_one_failed_run_with_the_completed_trials(workspace):
    from mlflow.tracking import MlflowClient

    result = run_cli(
        "runner",
        [OND, TEST_AGENTS, "agent=ond/crashing", "agent.crash_at_trial=2", "protocol.num_trials=4", "figures=false"],
        workspace,
    )
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 1
    assert len(lines) == 1 and lines[0].startswith("error:") and "AgentCrash" in lines[0] and "trial002" in lines[0], (
        result.stderr
    )
    assert "Traceback" not in result.stdout + result.stderr
    assert result.runs_after == result.runs_before + 1
    client = MlflowClient(tracking_uri=f"sqlite:///{workspace.db}")
    experiments = [e.experiment_id for e in client.search_experiments()]
    (run,) = client.search_runs(experiments, filter_string="attributes.run_name != 'existing'")
    assert run.info.status == "FAILED" and run.data.tags["partial_record"] == "true"
    assert "top1" in run.data.metrics
    from pathlib import Path

    from owl_eval.protocols.ond.record import OndRecord

    fetched = workspace.store / "fetched"
    assert "Traceback" in Path(client.download_artifacts(run.info.run_id, "error.txt", str(fetched))).read_text()
    record = OndRecord.load(client.download_artifacts(run.info.run_id, "record/ond_record.npz", str(fetched)))
    assert len(record.trials) == 2  # trials 0 and 1 completed before the crash in trial 2
