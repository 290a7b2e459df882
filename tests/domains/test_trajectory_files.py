"""``domain=trajectory_files``: a folder of TrajNet++ ``.ndjson``, ``frame id x y`` text or CSV track files.

ETH/UCY written out in each layout gives exactly ETH/UCY's windows and the same logged metrics; a synthetic folder
with ``train/`` and ``test/`` at another frame rate is cut as counted by hand; every bad input is one error naming
the file and the line.
"""

from __future__ import annotations

import gzip
import inspect
import json

import numpy as np
import pytest

from owl_eval.errors import ConfigError
from owl_eval.protocols.trajectory.domains.eth_ucy import DEFAULT_GROUPS, EthUcyDomain, read_tracks
from owl_eval.protocols.trajectory.domains.files import DEFAULT_IGNORE, TrajectoryFilesDomain

LAYOUTS = ("ndjson", "csv", "text")


def _eth_ucy(shared_dir):
    return shared_dir / "data" / "eth_ucy"


def write_layout(array: np.ndarray, path, kind: str) -> None:
    """``rows [N, 4]`` (frame, id, x, y) as a TrajNet++ ``.ndjson`` (with scene lines), a CSV with a header in
    another column order (gzipped), or whitespace-separated text; coordinates written exactly (``repr``)."""
    rows = [(int(f), int(p), float(x), float(y)) for f, p, x, y in array]
    if kind == "ndjson":
        lines = []
        for pid in np.unique(array[:, 1]):  # one scene line per pedestrian: read and ignored
            frames = array[array[:, 1] == pid, 0]
            scene = {"id": int(pid), "p": int(pid), "s": int(frames.min()), "e": int(frames.max()), "fps": 2.5}
            lines.append(json.dumps({"scene": scene}))
        lines += [json.dumps({"track": {"f": f, "p": p, "x": x, "y": y}}) for f, p, x, y in rows]
        path.with_suffix(".ndjson").write_text("\n".join(lines) + "\n")
    elif kind == "csv":
        text = "id,frame,y,x\n" + "".join(f"{p},{f},{y!r},{x!r}\n" for f, p, x, y in rows)
        path.with_suffix(".csv.gz").write_bytes(gzip.compress(text.encode(), mtime=0))
    else:
        path.with_suffix(".txt").write_text("".join(f"{f} {p} {x!r}  {y!r}\n" for f, p, x, y in rows))


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """ETH/UCY in each layout: ``{layout: folder}`` (None when the shared folder is absent)."""
    from tests.conftest import SHARED_DIR

    source = SHARED_DIR / "data" / "eth_ucy"
    if not source.is_dir():
        return None
    folders = {}
    for kind in LAYOUTS:
        folder = tmp_path_factory.mktemp(f"eth_ucy_{kind}")
        for file in sorted(source.glob("*.txt.gz")):
            write_layout(read_tracks(file), folder / file.name.split(".")[0], kind)
        folders[kind] = folder
    return folders


def assert_same_scenes(a, b):
    assert a.dt == b.dt
    assert a.history.shape == b.history.shape and a.future.shape == b.future.shape
    assert np.array_equal(a.history, b.history, equal_nan=True)
    assert np.array_equal(a.future, b.future, equal_nan=True)
    assert a.scene_source.tolist() == b.scene_source.tolist()
    assert a.scene_frame.tolist() == b.scene_frame.tolist()


# ------------------------------------------------------------------------------ ETH/UCY, written in each layout


@pytest.mark.parametrize("kind", LAYOUTS)
@pytest.mark.parametrize("test_group, windows", [("hotel", "cvm"), ("univ", "social_gan")])
@pytest.mark.slow
def test_eth_ucy_in_each_layout_gives_exactly_its_windows(shared_dir, converted, kind, test_group, windows):
    reference = EthUcyDomain(str(_eth_ucy(shared_dir)), test_group=test_group, windows=windows).load()
    files = TrajectoryFilesDomain(
        str(converted[kind]), test_group=test_group, groups=DEFAULT_GROUPS, windows=windows
    ).load()
    assert_same_scenes(reference.test, files.test)
    assert_same_scenes(reference.train, files.train)  # same files in the same order
    assert reference.test.num_scenes > 100


@pytest.mark.slow
def test_the_original_eth_ucy_folder_reads_as_track_files(shared_dir):
    """The shipped folder itself (its licence file is ignored by ``domain.ignore``); a file name as test_group."""
    reference = EthUcyDomain(str(_eth_ucy(shared_dir)), test_group="eth").load()
    files = TrajectoryFilesDomain(str(_eth_ucy(shared_dir)), test_group="biwi_eth").load()
    assert_same_scenes(reference.test, files.test)
    # without groups the other files train in name order: the same scenes, in another order
    assert sorted(set(files.train.scene_source)) == sorted(set(reference.train.scene_source))
    assert files.train.num_scenes == reference.train.num_scenes


SMALL_RUN = [
    "agent=trajectory/constant_velocity",
    "protocol.num_preds=1",
    "metrics.k_values=[1]",
    "domain.test_group=hotel",
    "domain.stride=20",
]


def _run(experiment, name: str, args: list[str]) -> None:
    from tests.inprocess import run_module

    overrides = [o for o in experiment["overrides"] if not o.startswith("experiment_name=")]
    proc = run_module(
        "owl_eval", [*args, *SMALL_RUN, *overrides, f"experiment_name={name}"], cwd=experiment["cwd"], timeout=300
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def _metrics_and_na(client, name: str) -> tuple[dict, dict]:
    runs = client.search_runs([client.get_experiment_by_name(name).experiment_id])
    assert len(runs) == 1 and runs[0].info.status == "FINISHED"
    data = runs[0].data
    return data.metrics, {k: v for k, v in data.tags.items() if k.startswith("na.")}


@pytest.mark.slow
def test_eth_ucy_in_each_layout_logs_the_same_metrics(shared_dir, converted, experiment, client):
    """A constant-velocity run on the converted files logs every metric of the run on the original files."""
    groups = "{" + ",".join(f"{g}:[{','.join(names)}]" for g, names in DEFAULT_GROUPS.items()) + "}"
    _run(
        experiment,
        f"{experiment['name']}-eth_ucy",
        ["+experiment=trajectory_eth_ucy", f"domain.path={_eth_ucy(shared_dir)}"],
    )
    reference, reference_na = _metrics_and_na(client, f"{experiment['name']}-eth_ucy")
    assert reference["ade_marginal"] > 0.1 and reference["detail/num_scenes"] > 10
    for kind in LAYOUTS:
        name = f"{experiment['name']}-{kind}"
        _run(
            experiment,
            name,
            ["+experiment=trajectory_files", f"domain.path={converted[kind]}", f"domain.groups={groups}"],
        )
        metrics, na = _metrics_and_na(client, name)
        assert sorted(metrics) == sorted(reference), kind
        compared = 0
        for key, value in reference.items():
            if key.startswith("time/"):  # timings: not numbers of the data
                continue
            assert metrics[key] == pytest.approx(value, rel=1e-12), (kind, key)
            compared += 1
        assert na == reference_na
        print(f"{kind}: {compared} of {len(reference)} metrics equal, ade_marginal {metrics['ade_marginal']!r}")
        assert compared >= 20


# ------------------------------------------------------------------------------ train/ and test/, another rate

# Frames every 5 at 10 frames per second (dt = 0.5 s). Pedestrian k walks along y = k with x = 0.25 * step.
FRAME_STEP, FPS = 5, 10.0


def _walk(pid: int, steps, first_frame: int = 100) -> list[tuple[int, int, float, float]]:
    return [(first_frame + FRAME_STEP * t, pid, 0.25 * t + 0.123456789012345, pid + 1e-13 * t) for t in steps]


@pytest.fixture()
def split_folder(tmp_path):
    """train/: a CSV (header x,y,frame,id, a comment) and a text file; test/: a gzipped TrajNet++ file."""
    (tmp_path / "train").mkdir()
    (tmp_path / "test").mkdir()
    train_a = _walk(1, range(8)) + _walk(2, range(2, 8))
    (tmp_path / "train" / "a.csv").write_text(
        "# a comment\nx,y,frame,id\n" + "".join(f"{x!r},{y!r},{f},{p}\n" for f, p, x, y in train_a)
    )
    (tmp_path / "train" / "b.txt").write_text("".join(f"{f}\t{p}\t{x!r}\t{y!r}\n" for f, p, x, y in _walk(3, range(6))))
    # test: pedestrian 7 at steps 0..6, pedestrian 8 at steps 1..6 but not 3
    test = _walk(7, range(7)) + _walk(8, [1, 2, 4, 5, 6])
    lines = [json.dumps({"scene": {"id": 0, "p": 7, "s": 100, "e": 130}})]
    lines += [json.dumps({"track": {"f": f, "p": p, "x": x, "y": y}}) for f, p, x, y in test]
    (tmp_path / "test" / "c.ndjson.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    (tmp_path / "test" / "README.md").write_text("not a track file: not read\n")
    return tmp_path


def test_train_and_test_folders_at_another_frame_rate(split_folder):
    dom = TrajectoryFilesDomain(
        str(split_folder), obs_len=3, pred_len=2, frame_step=FRAME_STEP, fps=FPS, windows="last_observed"
    )
    splits = dom.load()
    test = splits.test
    assert test.dt == 0.5 and splits.train.dt == 0.5
    assert set(test.scene_source) == {"c"} and set(splits.train.scene_source) == {"a", "b"}
    # 7 steps (frames 100..130), windows of 5 steps start at steps 0, 1, 2 (frames 100, 105, 110);
    # last observed steps 2, 3, 4: pedestrian 8 is absent at step 3
    assert test.scene_frame.tolist() == [100, 105, 110]
    assert test.agent_mask.sum(1).tolist() == [2, 1, 2]
    # full precision: the positions are the written floats
    assert test.history[0, 0].tolist() == [[x, y] for _, _, x, y in _walk(7, range(3))]
    assert test.future[2, 1].tolist() == [[x, y] for _, _, x, y in _walk(8, [5, 6])]
    assert np.isnan(test.history[0, 1, 0]).all()  # pedestrian 8 starts at step 1
    assert dom.tags() == {"windows": "last_observed"}
    # train: a.csv windows start at steps 0..3 (8 steps), b.txt at steps 0, 1 (6 steps)
    assert splits.train.scene_frame.tolist() == [100, 105, 110, 115, 100, 105]


def test_train_and_test_folders_run_from_the_command_line(split_folder, experiment, client):
    """Straight walkers: the constant-velocity prediction is exact (ADE 0) and dt reaches the run."""
    from tests.inprocess import run_module

    proc = run_module(
        "owl_eval",
        [
            "+experiment=trajectory_files",
            f"domain.path={split_folder}",
            "domain.obs_len=3",
            "domain.pred_len=2",
            f"domain.frame_step={FRAME_STEP}",
            f"domain.fps={FPS}",
            "agent=trajectory/constant_velocity",
            "protocol.num_preds=1",
            "metrics.k_values=[1]",
            *experiment["overrides"],
        ],
        cwd=experiment["cwd"],
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    run = client.search_runs([client.get_experiment_by_name(experiment["name"]).experiment_id])[0]
    assert run.data.metrics["ade_marginal"] == pytest.approx(0.0, abs=1e-9)
    assert run.data.metrics["detail/num_scenes"] == 3  # cvm: windows 0, 1, 2 (2 future steps) with pedestrian 7
    assert run.data.tags["domain"] == "trajectory_files"


# ------------------------------------------------------------------------------ the config


def test_the_domain_config_lists_every_option_with_its_default():
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from owl_eval.paths import CONFIG_DIR

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        node = compose("config", overrides=["domain=trajectory_files"]).domain
    values = OmegaConf.to_container(node, resolve=False)
    assert values.pop("_target_") == "owl_eval.protocols.trajectory.domains.files.TrajectoryFilesDomain"
    defaults = {k: p.default for k, p in inspect.signature(TrajectoryFilesDomain).parameters.items()}
    assert list(values) == list(defaults)
    defaults["ignore"] = DEFAULT_IGNORE  # None in Python: the default patterns
    assert values == defaults


def test_the_experiment_composes_builds_and_checks(split_folder, tmp_path):
    from hydra import compose, initialize_config_dir

    from owl_eval.paths import CONFIG_DIR
    from owl_eval.runner.config.build import build_part

    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=[
                "+experiment=trajectory_files",
                f"domain.path={split_folder}",
                "domain.obs_len=3",
                "domain.pred_len=2",
                "domain.frame_step=5",
            ],
        )
    dom = build_part(cfg, "domain")
    assert isinstance(dom, TrajectoryFilesDomain) and dom.name == "trajectory_files"
    dom.check()
    assert dom.load().test.num_scenes > 0


# ------------------------------------------------------------------------------ errors: one line, file and line

GOOD = "0 1 0.0 0.0\n10 1 1.0 0.0\n20 1 2.0 0.0\n30 1 3.0 0.0\n"


@pytest.mark.parametrize(
    "name, content, mentions",
    [
        ("a.txt", GOOD + "40 1 4.0\n", ["a.txt, line 5: expected 4 numbers frame, id, x, y", "'40 1 4.0'"]),
        ("a.txt", GOOD + "40 1 4.0 zero\n", ["a.txt, line 5: expected 4 numbers"]),
        ("a.csv", "frame,id,x,y\n0,1,0.0,0.0\n10,1,,0.0\n", ["a.csv, line 3: expected 4 numbers", "comma"]),
        ("a.csv", "frame,pid,x,y\n0,1,0.0,0.0\n", ["a.csv, line 1: header", "has no column id"]),
        ("a.txt", GOOD + "40 1 inf 0.0\n", ["a.txt, line 5: x is inf; expected a finite number"]),
        ("a.txt", GOOD + "40 1 4.0 nan\n", ["a.txt, line 5: y is nan; expected a finite number"]),
        ("a.ndjson", '{"track": {"f": 0, "p": 1, "x": NaN, "y": 0}}\n', ["a.ndjson, line 1: x is nan"]),
        (
            "a.ndjson",
            '{"scene": {"id": 0}}\n{"track": {"f": 0, "p": 1, "x": 1.0,\n',
            ["a.ndjson, line 2: not valid JSON"],
        ),
        ("a.ndjson", '{"track": {"f": 0, "p": 1, "x": 1.0}}\n', ["a.ndjson, line 1: track without field 'y'"]),
        ("a.ndjson", '{"track": {"f": 0, "p": 1, "x": "1", "y": 0}}\n', ["line 1: track field 'x' is '1'"]),
        ("a.ndjson", "[1, 2]\n", ["a.ndjson, line 1: expected a TrajNet++ object"]),
        (
            "a.txt",
            GOOD + "10 1 1.5 0.0\n",
            ["a.txt, line 5: pedestrian 1 at frame 10 again, at (1.5, 0.0); line 2 has it at (1.0, 0.0)"],
        ),
        ("a.txt", "0 1 0 0\n15 1 1 0\n", ["a.txt, line 2: frame 15 is not on the grid of frame_step=10"]),
        ("a.txt", "# only a comment\n\n", ["a.txt: no rows"]),
        ("a.txt.gz", "0 1 0 0\n", ["a.txt.gz: not a readable gzip file"]),
    ],
)
def test_a_bad_file_is_one_error_naming_file_and_line(tmp_path, name, content, mentions):
    (tmp_path / name).write_text(content)
    (tmp_path / "b.txt").write_text(GOOD)
    dom = TrajectoryFilesDomain(str(tmp_path), test_group="a", obs_len=2, pred_len=1)
    with pytest.raises(ConfigError) as err:
        dom.check()
    text = str(err.value)
    assert "\n" not in text
    for mention in mentions:
        assert mention in text


def test_exact_repeats_are_read_once(tmp_path):
    (tmp_path / "a.txt").write_text(GOOD + GOOD)
    (tmp_path / "b.txt").write_text(GOOD)
    once = TrajectoryFilesDomain(str(tmp_path), test_group="a", obs_len=2, pred_len=1).load()
    (tmp_path / "a.txt").write_text(GOOD)
    assert_same_scenes(
        once.test, TrajectoryFilesDomain(str(tmp_path), test_group="a", obs_len=2, pred_len=1).load().test
    )


@pytest.mark.parametrize(
    "files, settings, mentions",
    [
        ([], {"test_group": "a"}, ["has no track file (read: .ndjson, .ndjson.gz, .csv, .csv.gz, .txt, .txt.gz"]),
        (["notes.md", "LICENSE.txt"], {"test_group": "a"}, ["has no track file"]),
        (["a.txt", "b.txt"], {"test_group": "mars"}, ["domain.test_group: 'mars' names no group", "files: a, b"]),
        (
            ["a.txt", "b.txt"],
            {"test_group": "g", "groups": {"g": ["a", "zz"]}},
            ["domain.groups.g: 'zz' names no file"],
        ),
        (["a.txt", "b.txt"], {}, ["has no sub-folders train/ and test/"]),
        (["a.txt", "a.csv", "b.txt"], {"test_group": "b"}, ["two files are named 'a' (a.csv, a.txt)"]),
        (["a.txt"], {"test_group": "a"}, ["no file besides the test split's"]),
    ],
)
def test_a_bad_folder_or_split_is_one_error(tmp_path, files, settings, mentions):
    for name in files:
        (tmp_path / name).write_text(GOOD)
    with pytest.raises(ConfigError) as err:
        TrajectoryFilesDomain(str(tmp_path), obs_len=2, pred_len=1, **settings).check()
    assert "\n" not in str(err.value)
    for mention in mentions:
        assert mention in str(err.value)


def test_an_empty_sub_folder_is_one_error(split_folder):
    for file in (split_folder / "test").iterdir():
        file.unlink()
    with pytest.raises(ConfigError, match=r"test has no track file \(read: .ndjson"):
        TrajectoryFilesDomain(str(split_folder), obs_len=3, pred_len=2).check()


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"obs_len": 1}, "domain.obs_len: expected an integer >= 2, got 1"),
        ({"fps": 0}, "domain.fps: expected a number > 0, got 0"),
        ({"windows": "sgan"}, "domain.windows: expected one of cvm, social_gan, last_observed"),
        ({"groups": {"eth": "biwi_eth"}}, "domain.groups.eth: expected a list of file names, got 'biwi_eth'"),
        ({"ignore": "*.md"}, "domain.ignore: expected a list of file name patterns"),
        ({"test_group": 3}, "domain.test_group: expected a non-empty string"),
    ],
)
def test_each_bad_setting_is_one_error_naming_its_key(setting, message):
    with pytest.raises(ConfigError) as err:
        TrajectoryFilesDomain("somewhere", **setting)
    assert str(err.value).startswith(message)


def test_a_bad_file_from_the_command_line_is_one_error_line(tmp_path, experiment):
    from tests.inprocess import run_module

    folder = tmp_path / "data"
    (folder / "train").mkdir(parents=True)
    (folder / "test").mkdir()
    (folder / "train" / "a.txt").write_text(GOOD)
    (folder / "test" / "b.ndjson").write_text('{"track": {"f": 0, "p": 1, "x": 1.0}}\n')
    proc = run_module(
        "owl_eval",
        ["+experiment=trajectory_files", f"domain.path={folder}", *experiment["overrides"]],
        cwd=experiment["cwd"],
    )
    assert proc.returncode != 0
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), proc.stderr
    assert "b.ndjson, line 1: track without field 'y'" in lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr
