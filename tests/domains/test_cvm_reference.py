"""ETH/UCY under ``windows: cvm`` gives the constant-velocity paper's numbers (Schoeller et al. 2020, "What the
constant velocity model can teach us about pedestrian motion prediction", RA-L).

Expected values: the paper's public code, cschoeller/constant_velocity_pedestrian_motion ``evaluate.py``, run
(torch 2.13, CPU) on its own ``data/<set>/data/*.json``, which hold exactly the positions of the five files in
``shared/data/eth_ucy`` (every (x, y) row equal, checked before the run; ucy_univ = students001 + students003 with
the pedestrian ids renumbered). Its rule: a pedestrian's positions are sliced by a sliding window of up to 20
positions (stride 1) and a slice is kept when it has at least ``min_sequence_length = 10`` positions, the 8
observed ones and at least 2 future ones, also when it runs past the end of the recording; ADE over the future
positions that exist, FDE at the last of them, averaged over the kept slices.

``evaluate.py`` (OUR, deterministic) printed, per test set, the number of slices, ADE and FDE:
eth_university 2398 / 0.5847902375624745 / 1.1585931788882966, eth_hotel 3376 / 0.2779047010642472 /
0.5115060381841254, ucy_zara01 3821 / 0.34609386456204483 / 0.7641424094862951, ucy_zara02 7888 /
0.31364807253864224 / 0.6947357786752583, ucy_university 32183 / 0.46588903714645663 / 1.0258841715091171.

``evaluate.py --sample`` (OUR-S: 20 samples, each rotated by an angle ~ N(0, 25 degrees), min ADE and min FDE
taken separately) is random (numpy's global generator); the values below are its mean over
``np.random.seed(s)`` for the seeds listed in CVM_S_REFERENCE_SEEDS. The only change made to run it: the rotation
matrix is built as float32 (torch 2 refuses the float64 x float32 product that older torch accepted).

Published figures: after commit 6592976 ("Fixed small discrepancies in data loading", 2019-08-06) the repository's
README gave the averages over the five sets as "OUR: 0.39/0.83, OUR-S: 0.28/0.56" (ADE/FDE), the numbers of the
corrected manuscript (the note was dropped on 2020-01-22, when the RA-L version appeared). They are cut, not
rounded, to two decimals: the code's own averages are 0.3977/0.8310.
"""

from __future__ import annotations

import numpy as np
import pytest

from owl_eval.agents.trajectory.constant_velocity import ConstantVelocityPredictor
from owl_eval.agents.trajectory.cv_sampled import ConstantVelocitySampledPredictor
from owl_eval.domains.eth_ucy import EthUcyDomain
from owl_eval.metrics.trajectory.core import agent_errors

# group: (scored pedestrian windows, ADE, FDE) of evaluate.py, deterministic CVM
CVM_REFERENCE = {
    "eth": (2398, 0.5847902375624745, 1.1585931788882966),
    "hotel": (3376, 0.2779047010642472, 0.5115060381841254),
    "zara1": (3821, 0.34609386456204483, 0.7641424094862951),
    "zara2": (7888, 0.31364807253864224, 0.6947357786752583),
    "univ": (32183, 0.46588903714645663, 1.0258841715091171),
}
CVM_S_REFERENCE_SEEDS = (0, 1)
# group: (min ADE over 20 samples, min FDE over 20 samples) of evaluate.py --sample, mean over the seeds above
CVM_S_REFERENCE = {
    # seed 0: eth 0.43912870500649714 / 0.8061707103065681, hotel 0.19824340710840024 / 0.3503194500230665,
    # zara1 0.24556360871281321 / 0.48418136093707265, zara2 0.21895846611878797 / 0.45089991046837935,
    # univ 0.34219758433856107 / 0.7126608541652204; seed 1: eth 0.4421574543640849 / 0.8085000592967833,
    # hotel 0.19959434997760758 / 0.3523808356135327, zara1 0.24525710227642142 / 0.4851821603402918,
    # zara2 0.2201913059559689 / 0.45300877260383016, univ 0.342069504631479 / 0.7123917278206823
    "eth": (0.44064307968529104, 0.8073353848016757),
    "hotel": (0.1989188785430039, 0.35135014281829957),
    "zara1": (0.24541035549461732, 0.48468176063868224),
    "zara2": (0.21957488603737843, 0.45195434153610475),
    "univ": (0.34213354448502004, 0.7125262909929513),
}
PUBLISHED_AVERAGE = {"cvm": (0.39, 0.83), "cvm_s": (0.28, 0.56)}  # the reference repository's README
TOLERANCE = 0.005  # relative, the bar for agreement with the reference


@pytest.fixture(scope="module")
def test_scenes():
    from tests.conftest import SHARED_DIR

    if not SHARED_DIR.is_dir():
        pytest.skip(f"the shared folder {SHARED_DIR} is absent (it sits beside the clone in CI only)")
    path = SHARED_DIR / "data" / "eth_ucy"
    return {g: EthUcyDomain(str(path), test_group=g).load().test for g in CVM_REFERENCE}


def _errors(scenes, pred):
    ade, fde, valid = agent_errors(scenes.future, pred, scenes.future_mask)
    return ade, fde, valid


def test_scored_pedestrians_and_constant_velocity_errors_equal_the_reference(test_scenes):
    averages = []
    for group, (count, ade_ref, fde_ref) in CVM_REFERENCE.items():
        scenes = test_scenes[group]
        pred = ConstantVelocityPredictor().predict(
            scenes.history, pred_len=12, num_preds=1, dt=0.4, rng=np.random.default_rng(0)
        )
        ade, fde, valid = _errors(scenes, pred)
        assert int(valid.sum()) == count, group
        # every scored pedestrian: a full 8-step history and 2..12 future positions, as the reference's slices
        steps = scenes.future_mask.sum(-1)[valid]
        assert steps.min() == 2 and steps.max() == 12, group
        assert np.isfinite(scenes.history[valid]).all(), group
        ade_mean, fde_mean = ade[:, 0][valid].mean(), fde[:, 0][valid].mean()
        # the reference computes in float32: agreement is far inside the 0.5 % bar
        assert ade_mean == pytest.approx(ade_ref, rel=1e-6), group
        assert fde_mean == pytest.approx(fde_ref, rel=1e-6), group
        averages.append((ade_mean, fde_mean))
    ade_avg, fde_avg = np.mean(averages, axis=0)
    # the README's figures are cut (not rounded) to two decimals: 0.3977 -> 0.39, 0.8310 -> 0.83
    assert np.floor(ade_avg * 100) / 100 == PUBLISHED_AVERAGE["cvm"][0]
    assert np.floor(fde_avg * 100) / 100 == PUBLISHED_AVERAGE["cvm"][1]


def test_sampled_constant_velocity_over_five_seeds_equals_the_reference_cvm_s(test_scenes):
    averages = []
    for group, (ade_ref, fde_ref) in CVM_S_REFERENCE.items():
        scenes = test_scenes[group]
        per_seed = []
        for seed in range(5):
            pred = ConstantVelocitySampledPredictor(sigma_degrees=25.0).predict(
                scenes.history, pred_len=12, num_preds=20, dt=0.4, rng=np.random.default_rng(seed)
            )
            ade, fde, valid = _errors(scenes, pred)
            per_seed.append((ade.min(1)[valid].mean(), fde.min(1)[valid].mean()))
        ade_mean, fde_mean = np.mean(per_seed, axis=0)
        averages.append((ade_mean, fde_mean))
        assert ade_mean == pytest.approx(ade_ref, rel=TOLERANCE), group
        assert fde_mean == pytest.approx(fde_ref, rel=TOLERANCE), group
    ade_avg, fde_avg = np.mean(averages, axis=0)
    assert np.floor(ade_avg * 100) / 100 == PUBLISHED_AVERAGE["cvm_s"][0]
    assert np.floor(fde_avg * 100) / 100 == PUBLISHED_AVERAGE["cvm_s"][1]


@pytest.mark.slow
def test_the_paper_table_comes_out_of_a_command_line_sweep(mlflow_store, client, tmp_path):
    """The README's line: one sweep over the five test groups, read back from the store."""
    import os
    import subprocess
    import sys
    import uuid

    from tests.conftest import PROJECT_ROOT, SHARED_DIR

    if not SHARED_DIR.is_dir():
        pytest.skip(f"the shared folder {SHARED_DIR} is absent (it sits beside the clone in CI only)")
    name = f"cvm-table-{uuid.uuid4().hex[:8]}"
    cmd = [
        sys.executable,
        "-m",
        "owl_eval",
        "-m",
        "+experiment=trajectory_eth_ucy",
        f"domain.path={SHARED_DIR / 'data' / 'eth_ucy'}",
        "domain.test_group=eth,hotel,univ,zara1,zara2",
        "agent=trajectory/constant_velocity",
        "protocol.num_preds=1",  # deterministic: one prediction is the whole distribution
        "metrics.k_values=[1]",
        "tracking.log_record=false",
        "figures=false",
        "progress=false",
        f"tracking.uri={mlflow_store['uri']}",
        f"tracking.artifact_location={mlflow_store['artifacts']}",
        f"experiment_name={name}",
        f"hydra.sweep.dir={tmp_path / 'sweep'}",
    ]
    env = {k: v for k, v in os.environ.items() if k != "OWL_EVAL_PARENT_RUN_ID"}
    proc = subprocess.run(cmd, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    exp = client.get_experiment_by_name(name)
    runs = client.search_runs([exp.experiment_id], filter_string="tags.windows = 'cvm'")
    by_group = {r.data.params["domain.test_group"]: r for r in runs}
    assert sorted(by_group) == sorted(CVM_REFERENCE)
    for group, (count, ade_ref, fde_ref) in CVM_REFERENCE.items():
        r = by_group[group]
        assert r.info.status == "FINISHED"
        assert r.data.metrics["detail/num_agents"] == count, group
        assert r.data.metrics["ade_marginal"] == pytest.approx(ade_ref, rel=TOLERANCE), group
        assert r.data.metrics["fde_marginal"] == pytest.approx(fde_ref, rel=TOLERANCE), group
