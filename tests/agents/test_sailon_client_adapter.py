"""agent=ond/sailon_client: a sail-on-client detector driven through the OND protocol (the Python API; the command
line end to end is tests/runner/test_sailon_client_end_to_end.py)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from owl_eval.datasets.classification import DigitsDomain
from owl_eval.errors import ConfigError
from owl_eval.protocols.base import AgentOutputError
from owl_eval.protocols.ond.agents.sailon_client import SailonClientAgent
from owl_eval.protocols.ond.api import OndBatch
from owl_eval.protocols.ond.driver import OndDriver
from tests.fixtures.agents.ond.sailon_client_detector import NearestMeanDetector

SMALL = dict(num_trials=3, trials_without_novelty=1, pre_novelty=20, post_novelty=40, batch_size=10)


class NativeNearestMean:
    """The fixture detector's rule written directly as an owl-eval OND agent (no files, no ids)."""

    def __init__(self, quantile=0.95, alarm_fraction=0.3):
        self.quantile, self.alarm_fraction = quantile, alarm_fraction

    def fit(self, features, labels, *, num_known, rng):
        self.means = np.stack([features[labels == k].mean(0) for k in range(1, num_known + 1)])
        self.radius = np.quantile(np.linalg.norm(features - self.means[labels - 1], axis=1), self.quantile)

    def start_trial(self, trial_id, num_samples):
        self.changed = False

    def predict_batch(self, batch: OndBatch):
        d = np.linalg.norm(batch.features[:, None, :] - self.means[None], axis=2)
        unknown = d.min(1) > self.radius
        if batch.red_light_index is not None or np.mean(unknown) >= self.alarm_fraction:
            self.changed = True
        known = np.exp(-(d - d.min(1, keepdims=True)))
        known /= known.sum(1, keepdims=True)
        p_unknown = unknown.astype(float)
        return np.full(len(d), float(self.changed)), np.column_stack([p_unknown, (1 - p_unknown)[:, None] * known])


def _run(agent, condition="given", **kw):
    protocol = OndDriver(condition=condition, **(SMALL | kw))
    protocol.check(domain=DigitsDomain(), agent=agent)
    return protocol.run(domain=DigitsDomain(), agent=agent, rng=np.random.default_rng(3), progress=False)


@pytest.mark.parametrize("condition", ["given", "system"])
@pytest.mark.parametrize("features", ["files", "saved"])
def test_the_adapted_detector_gives_what_the_same_rule_gives_natively(condition, features):
    adapted = _run(SailonClientAgent(NearestMeanDetector(), features=features), condition)
    native = _run(NativeNearestMean(), condition)
    assert len(adapted.trials) == len(native.trials) == 3
    for a, n in zip(adapted.trials, native.trials):
        np.testing.assert_array_equal(a.p_world_changed, n.p_world_changed)
        np.testing.assert_allclose(a.p_class, n.p_class, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(np.argmax(a.p_class, 1), np.argmax(n.p_class, 1))
    if condition == "given":  # told the red light's id from its round on, the detector says so from there
        assert all(t.p_world_changed[t.red_light] == 1.0 for t in adapted.trials if t.red_light is not None)


def test_steps_toolsets_and_red_light_as_the_client_gives_them(tmp_path):
    record = tmp_path / "calls.jsonl"
    agent = SailonClientAgent(NearestMeanDetector(record=str(record)), adaptation_step="auto")
    out = _run(agent, "given", num_trials=2, trials_without_novelty=0)
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    red = out.trials[0].red_light
    # one Initialize, then per round FE, WD, NC and the adaptation step (the detector's own spelling), then
    # NoveltyCharacterization after the 6th and last round (60 samples in rounds of 10)
    steps = [c["step"] for c in calls]
    assert steps[: 1 + 4 * 6 + 1] == [
        "Initialize",
        *["FeatureExtraction", "WorldDetection", "NoveltyClassification", "NoveltyAdaption"] * 6,
        "NoveltyCharacterization",
    ]
    assert steps[26] == "Initialize" and steps.count("Initialize") == 2 and len(steps) == 52
    init = calls[0]
    assert {"session_id", "test_id", "test_type", "pre_novelty_batches", "quantile", "alarm_fraction"} <= set(
        init["keys"]
    )
    assert {"train_dataset", "train_ground_truth", "dataset_root", "known_classes"} <= set(init["keys"])
    fe, wd, nc, na = calls[1:5]
    assert fe["keys"] == ["dataset", "dataset_root", "round_id"] and fe["round_id"] == 0
    assert wd["keys"] == ["features_dict", "logit_dict", "redlight_image", "round_id"]
    assert nc["keys"] == ["features_dict", "logit_dict", "round_id"]
    assert na["keys"] == ["round_id"]
    assert calls[25]["keys"] == ["dataset_ids"]
    # the red light's id from the round that holds it on, "" before
    redlights = [c["redlight_image"] for c in calls[:26] if c["step"] == "WorldDetection"]
    holder = red // 10
    assert redlights[:holder] == [""] * holder
    assert redlights[holder:] == [f"trial000/{red:06d}.npy"] * (6 - holder)
    # the client deletes the round's dataset file and the returned detection and classification CSVs (the
    # characterization file is the detector's; a trial's feature files go when the trial ends)
    assert os.listdir(agent.root / "rounds") == []
    assert os.listdir(agent.detector.results_dir) == ["nc.csv"]
    assert os.listdir(agent.dataset_root) == ["train"]


def test_training_files_are_in_the_clients_ground_truth_layout():
    agent = SailonClientAgent(NearestMeanDetector())
    x = np.arange(12.0).reshape(4, 3)
    agent.fit(x, np.array([1, 2, 2, 1]), num_known=2, rng=np.random.default_rng(0))
    lines = agent.train_ground_truth.read_text().splitlines()
    assert lines == ["id,detection,classification", "train/000000.npy,0,1", "train/000001.npy,0,2",
                     "train/000002.npy,0,2", "train/000003.npy,0,1"]  # fmt: skip
    assert agent.train_dataset.read_text().split() == [line.split(",")[0] for line in lines[1:]]
    np.testing.assert_array_equal(np.load(agent.dataset_root / "train/000002.npy"), x[2])


# -- bad detectors: one error before any run -------------------------------------------------------------------
class NoExecute:
    pass


class OneArgExecute:
    def execute(self, toolset):
        pass


class MissingStep(NearestMeanDetector):
    def __init__(self):
        super().__init__()
        del self.step_dict["NoveltyCharacterization"]


@pytest.mark.parametrize(
    "detector, kw, message",
    [
        (
            NoExecute(),
            {},
            "agent.detector: tests.agents.test_sailon_client_adapter.NoExecute has no method "
            "execute(toolset, step_descriptor)",
        ),
        (
            OneArgExecute(),
            {},
            "agent.detector: tests.agents.test_sailon_client_adapter.OneArgExecute.execute(toolset) cannot be called "
            "as execute(toolset, step_descriptor)",
        ),
        ({"_target_": "x.Y"}, {}, "agent.detector: expected your detector object"),
        (MissingStep(), {}, "step_dict has no step 'NoveltyCharacterization', which the OND protocol calls (or set "),
        (NearestMeanDetector(), {"adaptation_step": "NoveltyAdaptation"}, "step_dict has no step 'NoveltyAdaptation'"),
        (NearestMeanDetector(), {"features": "images"}, "agent.features: expected one of ['files', 'saved']"),
    ],
)
def test_a_bad_detector_is_one_error_naming_what_is_missing(detector, kw, message):
    with pytest.raises(ConfigError) as err:
        SailonClientAgent(detector, **kw)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_missing_characterization_is_fine_when_not_called():
    SailonClientAgent(MissingStep(), characterization=False)


def test_the_runner_names_a_bad_detector_before_any_run():
    from tests.inprocess import run_module

    proc = run_module(
        "owl_eval",
        [
            "+experiment=ond_given_detection",
            "agent=ond/sailon_client",
            "agent.detector._target_=tests.agents.test_sailon_client_adapter.NoExecute",
            "tracking.uri=sqlite:///:memory:",
            "progress=false",
        ],
        cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))),
        timeout=120,
    )
    assert proc.returncode != 0
    last = proc.stderr.strip().splitlines()[-1]
    assert last == (
        "error: agent.detector: tests.agents.test_sailon_client_adapter.NoExecute has no method "
        "execute(toolset, step_descriptor)"
    )


# -- bad result files: one error naming the step, the file and what is wrong ----------------------------------
class Writes(NearestMeanDetector):
    """The fixture detector whose classification (or detection) file is replaced by ``text(ids)``."""

    def __init__(self, step, text):
        super().__init__()
        self.bad_step, self.text = step, text
        self.step_dict[step] = self._bad

    def _bad(self, toolset):
        good = (self.world_detection if self.bad_step == "WorldDetection" else self.novelty_classification)(toolset)
        ids = [line.split(",")[0] for line in open(good).read().splitlines()]
        with open(good, "w") as f:
            f.write(self.text(ids))
        return good


def _row(i, values):
    return i + "," + ",".join(map(str, values)) + "\n"


UNIFORM = [0.0, 1 / 6, 1 / 6, 1 / 6, 1 / 6, 1 / 6, 1 / 6]


@pytest.mark.parametrize(
    "step, text, message",
    [
        ("WorldDetection", lambda ids: "".join(_row(i, [0.2]) for i in ids[1:]), "no row for 1 of the round's 10 ids"),
        ("WorldDetection", lambda ids: "".join(_row(i, [0.2, 0.1]) for i in ids), "line 1 has 3 columns, expected 2"),
        (
            "WorldDetection",
            lambda ids: "".join(_row(i, [1.5]) for i in ids),
            "column 2 is '1.5', expected a probability",
        ),
        (
            "WorldDetection",
            lambda ids: "".join(_row(i, [0]) for i in ids) + _row(ids[0], [0]),
            "line 11 repeats the id 'trial000/000000.npy'",
        ),
        ("WorldDetection", lambda ids: _row("nope.png", [0]), "line 1 has the id 'nope.png', which is not in"),
        ("NoveltyClassification", lambda ids: "".join(_row(i, UNIFORM[1:]) for i in ids), "has 7 columns, expected 8"),
        (
            "NoveltyClassification",
            lambda ids: "".join(_row(i, [0.5] + UNIFORM[1:]) for i in ids),
            "the row of id 'trial000/000000.npy' sums to 1.5, expected 1 within agent.sum_tolerance (0.001)",
        ),
        (
            "NoveltyClassification",
            lambda ids: "".join(_row(i, ["nan"] + UNIFORM[1:]) for i in ids),
            "column 2 is 'nan'",
        ),
    ],
)
def test_a_bad_result_file_is_one_error_naming_step_file_and_row(step, text, message):
    agent = SailonClientAgent(Writes(step, text))
    with pytest.raises(AgentOutputError) as err:
        _run(agent, num_trials=1, trials_without_novelty=0)
    text = str(err.value)
    assert text.startswith(
        f"agent.detector (tests.agents.test_sailon_client_adapter.Writes) step {step}, trial 'trial000', round 0, file "
    )
    assert ("wc.csv" if step == "WorldDetection" else "ncl.csv") in text and message in text, text


def test_a_step_returning_no_path_is_named():
    class ReturnsNone(NearestMeanDetector):
        def __init__(self):
            super().__init__()
            self.step_dict["WorldDetection"] = lambda toolset: None

    with pytest.raises(AgentOutputError, match=r"step WorldDetection, trial 'trial000', round 0: returned None"):
        _run(SailonClientAgent(ReturnsNone()), num_trials=1, trials_without_novelty=0)


def test_round_off_is_rescaled_unknown_last_is_moved_first_and_normalize_rescales():
    rounded = lambda ids: "".join(_row(i, [f"{v:.4f}" for v in UNIFORM[1:]] + [0.0]) for i in ids)  # noqa: E731
    out = _run(SailonClientAgent(Writes("NoveltyClassification", rounded), unknown_column="last"), num_trials=1)
    p = out.trials[0].p_class
    np.testing.assert_allclose(p.sum(1), 1.0, atol=1e-15)
    np.testing.assert_array_equal(p[:, 0], 0.0)  # the last column, moved first
    np.testing.assert_allclose(p[:, 1:], 1 / 6, atol=1e-15)
    double = lambda ids: "".join(_row(i, [0.4, 0.4] + [0.2] * 5) for i in ids)  # noqa: E731 (sums to 1.8)
    out = _run(SailonClientAgent(Writes("NoveltyClassification", double), normalize=True), num_trials=1)
    np.testing.assert_allclose(out.trials[0].p_class[0], np.array([0.4, 0.4] + [0.2] * 5) / 1.8, atol=1e-15)
