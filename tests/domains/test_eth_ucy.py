"""ETH/UCY loader: a tiny hand-written file (frame spacing, windows, masks counted by hand) and the real files."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from owl_eval.protocols.trajectory.domains.eth_ucy import (
    DataPathError,
    EthUcyDomain,
    file_scenes,
    read_tracks,
    track_grid,
)

# Frames every 10. Pedestrian 1 walks +1 m per step along x at frames 0..50 (6 steps).
# Pedestrian 2 is at frames 10, 20, (30 missing), 40, 50, 60 (y = 5).
# Pedestrian 3 appears only at frames 50 and 60.
TINY = """0\t1\t0.0\t0.0
10\t1\t1.0\t0.0
10\t2\t0.0\t5.0
20\t1\t2.0\t0.0
20\t2\t0.5\t5.0
30\t1\t3.0\t0.0
40\t1\t4.0\t0.0
40\t2\t1.5\t5.0
50\t1\t5.0\t0.0
50\t2\t2.0\t5.0
50\t3\t9.0\t9.0
60\t2\t2.5\t5.0
60\t3\t9.0\t8.0
"""


@pytest.fixture()
def tiny_dir(tmp_path):
    """The tiny scene as one group per file: 'a' (gzipped) for test, 'b' (a copy, plain text) for training."""
    with gzip.open(tmp_path / "a.txt.gz", "wt") as fh:
        fh.write(TINY)
    (tmp_path / "b.txt").write_text(TINY)
    return tmp_path


def test_grid_places_frames_by_step(tiny_dir):
    grid, ids, first = track_grid(read_tracks(tiny_dir / "a.txt.gz"), frame_step=10)
    # frames 0..60 step 10 -> 7 steps; 3 pedestrians
    assert grid.shape == (7, 3, 2) and first == 0 and list(ids) == [1, 2, 3]
    assert np.isnan(grid[3, 1]).all()  # pedestrian 2 missing at frame 30
    assert grid[4, 1].tolist() == [1.5, 5.0]  # frame 40 is step 4
    with pytest.raises(DataPathError, match="frame_step"):
        track_grid(read_tracks(tiny_dir / "a.txt.gz"), frame_step=20)  # frame 10 is off a 20-grid


def test_windows_and_masks_match_a_hand_count(tiny_dir):
    # obs 2 + pred 2 = 4 steps; 7 steps -> window starts 0, 1, 2, 3; last observed step = start + 1.
    s = file_scenes(
        tiny_dir / "a.txt.gz",
        frame_step=10,
        obs_len=2,
        pred_len=2,
        stride=1,
        max_agents=8,
        windows="last_observed",
        dt=0.4,
    )
    # present at step 1: peds 1, 2 | step 2: 1, 2 | step 3: 1 (2 missing) | step 4: 1, 2 -> 4 scenes
    assert s.scene_frame.tolist() == [0, 10, 20, 30]
    assert s.agent_mask.sum(1).tolist() == [2, 2, 1, 2]
    # scene 0 (steps 0..3): ped 2 history = [absent, present], future = [present, absent(frame 30)]
    assert s.history_mask[0, 1].tolist() == [False, True]
    assert s.future_mask[0, 1].tolist() == [True, False]
    # ped 1 future in scene 0 = frames 20, 30 -> x = 2, 3
    assert s.future[0, 0, :, 0].tolist() == [2.0, 3.0]
    # scene 3 (steps 3..6): ped 1 present until frame 50 (step 5), so its future = [frame 50, absent]
    assert s.future_mask[3, 0].tolist() == [True, False]
    # ped 3 first seen at step 5 = a future step of scene 3: not an agent of any scene (never at a last observed step)
    assert s.num_agents == 2


def test_agent_chunks(tiny_dir):
    chunked = file_scenes(
        tiny_dir / "a.txt.gz",
        frame_step=10,
        obs_len=2,
        pred_len=2,
        stride=1,
        max_agents=1,
        windows="last_observed",
        dt=0.4,
    )
    # max_agents=1 splits each window into one scene per agent: 2 + 2 + 1 + 2 = 7 scenes, nobody dropped
    assert chunked.scene_frame.tolist() == [0, 0, 10, 10, 20, 30, 30]
    assert chunked.agent_mask.sum() == 7


def test_split_is_by_file_and_errors_name_the_key(tiny_dir):
    dom = EthUcyDomain(
        str(tiny_dir), test_group="x", groups={"x": ["a"], "y": ["b"]}, extra_train_files=[], obs_len=2, pred_len=2
    )
    splits = dom.load()
    assert set(splits.test.scene_source) == {"a"} and set(splits.train.scene_source) == {"b"}
    assert splits.test.dt == pytest.approx(0.4)
    with pytest.raises(DataPathError, match="domain.path is not set"):
        EthUcyDomain(None).load()
    with pytest.raises(DataPathError, match="domain.path=.*not a folder"):
        EthUcyDomain(str(tiny_dir / "nope")).load()
    with pytest.raises(DataPathError, match="has no file biwi_eth"):
        EthUcyDomain(str(tiny_dir)).load()
    with pytest.raises(ValueError, match="domain.test_group"):
        EthUcyDomain(str(tiny_dir), test_group="mars")


def test_real_files_frame_spacing_and_windows(shared_dir):
    path = shared_dir / "data" / "eth_ucy"
    rows = read_tracks(path / "biwi_hotel.txt.gz")
    # every frame is a multiple of 10 from the first one (0.4 s at 25 fps)
    assert np.all((rows[:, 0] - rows[:, 0].min()) % 10 == 0)
    dom = EthUcyDomain(str(path), test_group="hotel")
    splits = dom.load()
    test = splits.test
    assert set(test.scene_source) == {"biwi_hotel"}
    assert "biwi_hotel" not in set(splits.train.scene_source)
    assert {"crowds_zara03", "uni_examples", "students001"} <= set(splits.train.scene_source)
    assert test.history.shape[2:] == (8, 2) and test.future.shape[2:] == (12, 2)
    # plain-loop count (windows: cvm): agents of the scene starting at frame F are the pedestrians listed at
    # every frame F..F + 70 and at two of F + 80..F + 190 at least
    f0 = int(test.scene_frame[10])
    frames_of = {}
    for frame, pid in rows[:, :2]:
        frames_of.setdefault(pid, set()).add(int(frame))
    expected = sum(
        all(f0 + 10 * k in fr for k in range(8)) and sum(f0 + 10 * k in fr for k in range(8, 20)) >= 2
        for fr in frames_of.values()
    )
    in_scenes = test.agent_mask[test.scene_frame == f0].sum()
    assert in_scenes == expected
    # the first agent's history equals the file rows of its pedestrian (looked up by position at F + 70)
    s = int(np.nonzero(test.scene_frame == f0)[0][0])
    last = test.history[s, 0, -1]
    pid = rows[(rows[:, 0] == f0 + 70) & np.all(np.isclose(rows[:, 2:], last), axis=1), 1][0]
    for k in range(8):
        hit = rows[(rows[:, 0] == f0 + 10 * k) & (rows[:, 1] == pid)]
        if len(hit):
            assert test.history[s, 0, k].tolist() == hit[0, 2:].tolist()
        else:
            assert np.isnan(test.history[s, 0, k]).all()


# ------------------------------------------------------------------------------ checks before any run


def test_check_reads_every_file_once_and_load_reuses_it(tiny_dir, monkeypatch):
    import owl_eval.protocols.trajectory.domains.eth_ucy as eth_ucy

    reads = []
    real = eth_ucy.read_tracks
    monkeypatch.setattr(eth_ucy, "read_tracks", lambda path: reads.append(path.name) or real(path))
    dom = EthUcyDomain(
        str(tiny_dir), test_group="x", groups={"x": ["a"], "y": ["b"]}, extra_train_files=[], obs_len=2, pred_len=2
    )
    dom.check()
    assert sorted(reads) == ["a.txt.gz", "b.txt"]
    splits = dom.load(np.random.default_rng(0))
    assert dom.load(np.random.default_rng(1)) is splits and len(reads) == 2


@pytest.mark.parametrize(
    "content, message",
    [
        (b"\x1f\x8b\x08garbage", "a.txt.gz: not a readable gzip file"),
        (gzip.compress(b"0\t1\t0.0\t\xff\n", mtime=0), "a.txt.gz: not UTF-8 text (byte 0xff at offset 8)"),
        (
            gzip.compress(b"# only a comment\n\n", mtime=0),
            "a.txt.gz: no rows (expected tab-separated frame, pedestrian_id, x, y)",
        ),
        (
            gzip.compress(b"0\t1\t0.0\t0.0\n10\t1\tnan\t0.0\n", mtime=0),
            "a.txt.gz: data row 2, column x: expected a finite number, got nan",
        ),
        (
            gzip.compress(b"0\t1\t0.0\t0.0\n1e15\t1\t1.0\t0.0\n", mtime=0),
            "100000000000001 time steps x 1 pedestrians is too large",
        ),
    ],
)
def test_a_broken_file_is_one_error_naming_it(tmp_path, content, message):
    (tmp_path / "a.txt.gz").write_bytes(content)
    (tmp_path / "b.txt").write_text(TINY)
    dom = EthUcyDomain(
        str(tmp_path), test_group="x", groups={"x": ["a"], "y": ["b"]}, extra_train_files=[], obs_len=2, pred_len=2
    )
    with pytest.raises(DataPathError) as err:
        dom.check()
    assert message in str(err.value)


def test_a_link_in_the_data_folder_is_not_followed(tiny_dir, tmp_path_factory):
    from owl_eval.errors import UnsafePathError

    secret = tmp_path_factory.mktemp("elsewhere") / "secret.txt"
    secret.write_text(TINY)
    (tiny_dir / "b.txt").unlink()
    (tiny_dir / "b.txt").symlink_to(secret)
    dom = EthUcyDomain(
        str(tiny_dir), test_group="x", groups={"x": ["a"], "y": ["b"]}, extra_train_files=[], obs_len=2, pred_len=2
    )
    with pytest.raises(UnsafePathError, match=r"b.txt: ETH/UCY file is a symbolic link"):
        dom.check()


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"obs_len": 2.5}, "domain.obs_len: expected an integer, got 2.5 (float)"),
        ({"obs_len": 1}, "domain.obs_len: expected an integer >= 2, got 1"),
        ({"stride": 0}, "domain.stride: expected an integer >= 1, got 0"),
        ({"fps": 0}, "domain.fps: expected a number > 0, got 0"),
        (
            {"windows": "sgan"},
            (
                "domain.windows: expected one of cvm, social_gan, last_observed (which pedestrians a "
                "window scores), got 'sgan'"
            ),
        ),
        ({"windows": 3}, "domain.windows: expected"),
        (
            {"test_group": "mars"},
            "domain.test_group: expected one of ['eth', 'hotel', 'univ', 'zara1', 'zara2'], got 'mars'",
        ),
        ({"groups": {"eth": "biwi_eth"}}, "domain.groups.eth: expected a list of file names, got 'biwi_eth'"),
        (
            {"extra_train_files": ["../../etc/passwd"]},
            "domain.extra_train_files[0]: file name '../../etc/passwd' is not a safe name",
        ),
    ],
)
def test_each_bad_domain_setting_is_one_error_naming_its_key(setting, message):
    with pytest.raises(ValueError) as err:
        EthUcyDomain("somewhere", **setting)
    assert str(err.value).startswith(message)


# Conventions (domain.windows). obs_len 3 + pred_len 2 = 5 steps; steps 0..6 -> window starts 0, 1, 2.
# Pedestrian k walks along y = k - 1 with x = step. Present at steps:
#   1 (A): 0-6      2 (B): 1-6      3 (C): 0-3      4 (D): 2 only      5 (E): 0, 1, 2, 4
CONVENTIONS = "".join(
    f"{10 * t}\t{ped}\t{float(t)}\t{float(ped - 1)}\n"
    for t in range(7)
    for ped, steps in ((1, range(7)), (2, range(1, 7)), (3, range(4)), (4, [2]), (5, [0, 1, 2, 4]))
    if t in steps
)


@pytest.mark.parametrize(
    "windows, pred_len, expected",
    [
        # pred_len 2 (steps 0..6 -> window starts 0, 1, 2):
        # window 0 (obs 0-2, future 3-4): A full; B misses step 0; C full history, future step 3 only; D one point;
        #   E full history, future step 4 only -> cvm (2 future steps) A only; complete only A (one: Social-GAN
        #   drops the window); at the last observed step (2) all five
        # window 1 (obs 1-3, future 4-5): A, B full; C no future; D absent; E misses step 3
        # window 2 (obs 2-4, future 5-6): A, B full; C gone at 4; E at 4 but misses 3
        ("cvm", 2, {0: [1], 10: [1, 2], 20: [1, 2]}),
        ("social_gan", 2, {10: [1, 2], 20: [1, 2]}),
        ("last_observed", 2, {0: [1, 2, 3, 4, 5], 10: [1, 2, 3], 20: [1, 2, 5]}),
        # pred_len 3 under cvm: a window may end 1 step past the recording (2 of its 3 future steps inside it),
        # so the starts are 0, 1, 2 (6-step windows over 7 steps would give only 0, 1):
        # window 0 (future 3-5): A (3 future steps); C and E have one future step each: not scored
        # window 1 (future 4-6): A, B; C has no future; E misses step 3
        # window 2 (future 5-7, 7 after the last frame): A and B with 2 future steps each
        ("cvm", 3, {0: [1], 10: [1, 2], 20: [1, 2]}),
        ("social_gan", 3, {10: [1, 2]}),
    ],
)
def test_window_conventions_select_the_pedestrians_counted_by_hand(tmp_path, windows, pred_len, expected):
    (tmp_path / "c.txt").write_text(CONVENTIONS)
    s = file_scenes(
        tmp_path / "c.txt", frame_step=10, obs_len=3, pred_len=pred_len, stride=1, max_agents=8, windows=windows, dt=0.4
    )
    scored = {}
    for i, frame in enumerate(s.scene_frame.tolist()):
        real = np.isfinite(s.history[i]).all(-1).any(-1) | np.isfinite(s.future[i]).all(-1).any(-1)
        scored[frame] = sorted(int(y) + 1 for y in np.nanmax(s.history[i, real, :, 1], axis=-1))
    assert scored == expected
    if windows != "last_observed":  # every scored pedestrian has a full history: a velocity at the last step
        real = np.isfinite(s.history).all(-1).any(-1)
        assert np.isfinite(s.history[real]).all()
    if windows == "cvm" and pred_len == 3:  # the window past the end: its last future step is missing for both
        last = s.scene_frame.tolist().index(20)
        assert np.isnan(s.future[last, :2, 2]).all() and np.isfinite(s.future[last, :2, :2]).all()


def test_windows_setting_reaches_the_run_tags_and_rejects_unknown_values(tiny_dir):
    from owl_eval.errors import ConfigError

    assert EthUcyDomain(str(tiny_dir)).tags() == {"windows": "cvm"}
    assert EthUcyDomain(str(tiny_dir), windows="social_gan").tags() == {"windows": "social_gan"}
    with pytest.raises(ConfigError, match=r"^domain.windows: expected one of cvm, social_gan, last_observed"):
        EthUcyDomain(str(tiny_dir), windows="complete")
