"""Catalogue: a wrong config value stops ``python -m owl_eval`` before any MLflow run exists.

Each case runs the real command line on one bad override and asserts (``assert_clean_failure``): exit code
!= 0, one ``error:`` line naming the key, no traceback, no run created, nothing written outside the store.
Covered: typed protocol, domain and agent settings (``protocol.batch_size=2.5`` used to run with 2), typed
metric settings (``+metrics.treshold=0.7`` used to be logged beside ``threshold``), settings that must fit
the data (``protocol.known_classes=20`` on 10 digits, ``metrics.k_values=[1000]`` with 100 predictions),
ETH/UCY data paths, and agents or baselines of the wrong protocol.
"""

from __future__ import annotations

import gzip

import pytest

from tests.reliability.harness import assert_clean_failure, run_cli

OND = "+experiment=ond_given_detection"
CONTINUAL = "+experiment=continual_split_digits"
CROWD = "+experiment=trajectory_crowd"
ETH_UCY = "+experiment=trajectory_eth_ucy"
RL = "+experiment=lifelong_rl_frozenlake_syllabus"

CASES = [
    # metric settings: unknown key, wrong type, out of range, not fitting the data
    ("metric_typo", [OND, "+metrics.treshold=0.7"], ["metrics.treshold", "did you mean metrics.threshold"]),
    ("metric_not_a_number", [OND, "metrics.threshold=high"], ["metrics.threshold", "expected a number", "high"]),
    ("metric_bool", [OND, "metrics.threshold_grid=maybe"], ["metrics.threshold_grid", "expected true or false"]),
    ("metric_names", [CONTINUAL, "metrics.names=[top1]"], ["metrics.names", "unknown metric(s) ['top1']"]),
    ("k_values_over_num_preds", [CROWD, "metrics.k_values=[1000]"], ["metrics.k_values", "K=1000", "100 predictions"]),
    ("negative_window_length", [RL, "metrics.window_length=-1"], ["metrics.window_length", "expected an integer >= 1"]),
    # protocol settings
    ("batch_size_fraction", [OND, "protocol.batch_size=2.5"], ["protocol.batch_size", "expected an integer", "2.5"]),
    ("num_trials_fraction", [OND, "protocol.num_trials=2.5"], ["protocol.num_trials", "expected an integer", "2.5"]),
    ("sum_tolerance_inf", [OND, "protocol.sum_tolerance=inf"], ["protocol.sum_tolerance", "finite"]),
    ("condition_typo", [OND, "protocol.condition=sytem"], ["protocol.condition", "['system', 'given']"]),
    ("known_classes_over_domain", [OND, "protocol.known_classes=20"], ["protocol.known_classes", "1..9", "'digits'"]),
    ("num_preds_fraction", [CROWD, "protocol.num_preds=2.5"], ["protocol.num_preds", "expected an integer"]),
    ("syllabus_cycles", [RL, "protocol.syllabus.generate.cycles=2.5"], ["protocol.syllabus.generate.cycles"]),
    ("unsafe_worker_id", [RL, "protocol.worker_id=../elsewhere"], ["protocol.worker_id", "not a safe name"]),
    # top-level switches
    ("seed_not_a_number", [OND, "seed=abc"], ["seed", "expected an integer", "abc"]),
    ("figures_not_a_bool", [OND, "figures=maybe"], ["figures", "expected true or false"]),
    # domain and agent settings
    ("domain_count_not_a_number", [CROWD, "domain.min_agents=abc"], ["domain.min_agents", "expected an integer"]),
    ("agent_count_fraction", [OND, "agent.k_class=2.5"], ["agent.k_class", "expected an integer", "2.5"]),
    ("agent_k_over_training_split", [OND, "agent.k_class=100000"], ["agent.k_class", "training samples"]),
    # parts of the wrong protocol
    (
        "rl_agent_under_ond",
        [OND, "agent=lifelong_rl/q_learning"],
        [
            "agent (owl_eval.protocols.lifelong_rl.agents.q_learning.QLearningAgent) is not an OND agent",
            "predict_batch(batch)",
            "agent=ond/<option>",
        ],
    ),
    (
        "trajectory_agent_under_continual",
        [CONTINUAL, "agent=trajectory/knn_futures"],
        ["is not a continual learner", "agent=continual/<option>"],
    ),
    ("baseline_under_continual", [CONTINUAL, "baseline=ond/closed_world"], ["baseline", "choose baseline=none"]),
    (
        "trajectory_domain_under_ond",
        [OND, "domain=crowd_sim"],
        ["domain (owl_eval.protocols.trajectory.domains.crowd_sim.CrowdSimDomain) is not an OND domain"],
    ),
    # ETH/UCY data paths
    ("eth_ucy_path_not_set", [ETH_UCY], ["domain.path is not set"]),
]


@pytest.mark.parametrize("name, args, mentions", CASES, ids=[c[0] for c in CASES])
def test_bad_config_stops_before_any_run(workspace, name, args, mentions):
    if "rl_" in args[0]:
        pytest.importorskip("gymnasium")
    assert_clean_failure(run_cli("runner", args, workspace), *mentions)


TRACKS = "0\t1\t0.0\t0.0\n10\t1\t1.0\t0.0\n"
ETH_UCY_FILES = (
    "biwi_eth",
    "biwi_hotel",
    "students001",
    "students003",
    "crowds_zara01",
    "crowds_zara02",
    "crowds_zara03",
    "uni_examples",
)


def eth_ucy_folder(root, *, leave_out=(), broken=None):
    """A folder with a (tiny) file for every ETH/UCY name but ``leave_out``; ``broken`` gets non-numbers."""
    folder = root / "inputs" / "eth_ucy"
    folder.mkdir(parents=True)
    for name in ETH_UCY_FILES:
        if name not in leave_out:
            text = "frame\tid\tx\ty\n" if name == broken else TRACKS
            (folder / f"{name}.txt.gz").write_bytes(gzip.compress(text.encode()))
    return folder


def test_eth_ucy_path_that_does_not_exist(workspace):
    missing = workspace.root / "inputs" / "nowhere"
    result = run_cli("runner", [ETH_UCY, f"domain.path={missing}"], workspace)
    assert_clean_failure(result, "domain.path=", "nowhere", "is not a folder")


def test_eth_ucy_path_that_is_a_file(workspace):
    file = workspace.root / "inputs" / "biwi_eth.txt"
    file.parent.mkdir()
    file.write_text(TRACKS)
    assert_clean_failure(
        run_cli("runner", [ETH_UCY, f"domain.path={file}"], workspace), "domain.path=", "is not a folder"
    )


def test_eth_ucy_folder_without_the_test_groups_files(workspace):
    folder = eth_ucy_folder(workspace.root, leave_out=("biwi_hotel",))
    result = run_cli("runner", [ETH_UCY, f"domain.path={folder}", "domain.test_group=hotel"], workspace)
    assert_clean_failure(result, "domain.path", "has no file biwi_hotel")


def test_eth_ucy_file_that_is_not_numbers(workspace):
    folder = eth_ucy_folder(workspace.root, broken="crowds_zara01")
    result = run_cli("runner", [ETH_UCY, f"domain.path={folder}", "domain.test_group=hotel"], workspace)
    assert_clean_failure(result, "crowds_zara01.txt.gz", "expected 4 numeric tab-separated columns")
