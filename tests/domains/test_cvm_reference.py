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

import json

import numpy as np
import pytest

from owl_eval.protocols.trajectory.agents.constant_velocity import ConstantVelocityPredictor
from owl_eval.protocols.trajectory.agents.cv_sampled import ConstantVelocitySampledPredictor
from owl_eval.protocols.trajectory.domains.eth_ucy import EthUcyDomain
from owl_eval.protocols.trajectory.metrics.core import agent_errors

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


@pytest.mark.slow
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


@pytest.mark.slow
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


# --------------------------------------------------------------------------------------------------
# random synthetic tracks against the reference code itself (only where it can be run)
# --------------------------------------------------------------------------------------------------

# Run in an interpreter with torch, inside a checkout of cschoeller/constant_velocity_pedestrian_motion: the
# reference's own PedDataset (sequence_length 20, observed_history 8, min_sequence_length 10, as its RunConfig)
# and evaluate_testset (deterministic CVM) on each json folder given; prints [slices, ADE, FDE] per folder.
REFERENCE_DRIVER = r"""
import json, sys
import numpy as np, torch
import evaluate
from ped_dataset import PedDataset
out = []
for folder in sys.argv[1:]:
    dataset = PedDataset(dataset_path=folder, sequence_length=20, observed_history=8, min_sequence_length=10)
    np.random.seed(0); torch.manual_seed(0)
    out.append([len(dataset), *evaluate.evaluate_testset(dataset)] if len(dataset) else [0, None, None])
print(json.dumps(out))
"""


def _reference_runner():
    import os
    import subprocess

    python, checkout = os.environ.get("CVM_REFERENCE_PYTHON"), os.environ.get("CVM_REFERENCE_DIR")
    if not python or not checkout:
        pytest.skip(
            "set $CVM_REFERENCE_DIR to a checkout of cschoeller/constant_velocity_pedestrian_motion and "
            "$CVM_REFERENCE_PYTHON to an interpreter with torch to run its evaluate.py here"
        )

    def run(folders):
        done = subprocess.run(
            [python, "-c", REFERENCE_DRIVER, *map(str, folders)],
            cwd=checkout,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    return run


def _write_scene(root, rows):
    """``rows`` (frame, pedestrian, x, y) as an ETH/UCY file ``f.txt`` (group x; a one-pedestrian ``g.txt`` for
    training) and as the reference's layout, one json per frame under ``ref/data``."""
    root.mkdir(parents=True)
    (root / "f.txt").write_text("".join(f"{f}\t{p}\t{x:.2f}\t{y:.2f}\n" for f, p, x, y in rows))
    (root / "g.txt").write_text("0\t1\t0\t0\n10\t1\t1\t0\n")
    data = root / "ref" / "data"
    data.mkdir(parents=True)
    (root / "ref" / "dataset_info.json").write_text(json.dumps({"dataset_name": "x"}))
    for frame in sorted({r[0] for r in rows}):
        objects = [{"position": [x, y], "id": p} for f, p, x, y in rows if f == frame]
        (data / f"{frame}.json").write_text(
            json.dumps({"timestamp": frame, "object_list": objects, "frame": frame, "size": len(objects)})
        )
    return root / "ref"


def _ours(root):
    scenes = EthUcyDomain(str(root), test_group="x", groups={"x": ["f"], "y": ["g"]}, extra_train_files=[]).load().test
    pred = ConstantVelocityPredictor().predict(
        scenes.history, pred_len=12, num_preds=1, dt=0.4, rng=np.random.default_rng(0)
    )
    ade, fde, valid = _errors(scenes, pred)
    return int(valid.sum()), float(ade[:, 0][valid].mean()), float(fde[:, 0][valid].mean())


def test_random_gap_free_tracks_give_the_reference_slices_and_errors(tmp_path):
    """Random recordings (frames every 10, 5-59 steps, up to 24 pedestrians; lifetimes from 1 step to the whole
    recording, some starting at the first frame, some ending at the last): the number of scored pedestrian
    windows and the CVM ADE/FDE equal the reference's evaluate.py on the same positions."""
    run = _reference_runner()
    rng = np.random.default_rng(20)
    folders, ours = [], []
    for case in range(12):
        steps, rows = int(rng.integers(5, 60)), []
        for pid in range(1, int(rng.integers(1, 25)) + 1):
            kind = int(rng.integers(0, 4))
            start = 0 if kind in (0, 2) else int(rng.integers(0, steps))
            end = steps - 1 if kind in (1, 2) else min(steps - 1, start + int(rng.integers(0, 35)))
            walk = rng.normal(0, 3, 2) + np.cumsum(rng.normal(0, 0.4, (end - start + 1, 2)), axis=0)
            rows += [(10 * (start + i), pid, *np.round(p, 2).tolist()) for i, p in enumerate(walk)]
        root = tmp_path / str(case)
        folders.append(_write_scene(root, sorted(rows)))
        try:
            ours.append(_ours(root))
        except Exception as exc:  # no window at all: the reference then has 0 slices
            assert "gives no scene" in str(exc)
            ours.append((0, None, None))
    reference = run(folders)
    assert sum(r[0] for r in reference) > 500
    for case, ((count, ade, fde), (ref_count, ref_ade, ref_fde)) in enumerate(zip(ours, reference)):
        assert count == ref_count, case
        if count:  # the reference computes in float32
            assert ade == pytest.approx(ref_ade, rel=1e-6), case
            assert fde == pytest.approx(ref_fde, rel=1e-6), case


def test_a_gap_in_a_track_is_a_masked_step_not_a_step_of_the_walk(tmp_path):
    """METRICS.md's one named difference. A pedestrian seen at steps 0-9 and 11-20 (gone at step 10): the
    reference strings its 20 positions together and slices 20 - 10 + 1 = 11 windows of >= 10 positions; we place
    each position at its frame, so only windows whose 8 observed steps avoid step 10 are scored: starts 0, 1, 2
    (future 8-19 or later, step 10 masked) and 11 (future steps 19, 20): 4 windows."""
    steps = [s for s in range(21) if s != 10]
    rows = [(10 * s, 1, float(s), 0.5 * s) for s in steps]
    ref_folder = _write_scene(tmp_path / "gap", rows)
    count, ade, fde = _ours(tmp_path / "gap")
    assert count == 4
    # walking +1 m in x and +0.5 m in y per step (the gap included): constant velocity is exact
    assert ade == pytest.approx(0.0, abs=1e-9) and fde == pytest.approx(0.0, abs=1e-9)
    try:
        run = _reference_runner()
    except pytest.skip.Exception:
        return
    ((ref_count, ref_ade, _),) = run([ref_folder])
    assert ref_count == 11 and ref_ade > 0.1  # it reads the jump over step 10 as one step of the walk
