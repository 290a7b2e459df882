"""The OND protocol drives agents exactly as SAIL-ON prescribes: batches, red light, no labels."""

from __future__ import annotations

import numpy as np
import pytest

from owl_eval.datasets.classification import DigitsDomain
from owl_eval.errors import ConfigError
from owl_eval.paths import group_options
from owl_eval.protocols.base import AgentOutputError
from owl_eval.protocols.ond.driver import OndDriver
from owl_eval.protocols.trajectory.domains.crowd_sim import CrowdSimDomain


class SpyAgent:
    """Records everything it is given; answers uniformly over the K+1 columns."""

    def __init__(self):
        self.fit_args = None
        self.batches = []

    def fit(self, features, labels, *, num_known, rng):
        self.fit_args = (features, labels, num_known)
        self.num_known = num_known

    def start_trial(self, trial_id, num_samples):
        self.batches.append(("start", trial_id, num_samples))

    def predict_batch(self, batch):
        self.batches.append(batch)
        n = len(batch.sample_index)
        return np.zeros(n), np.full((n, self.num_known + 1), 1.0 / (self.num_known + 1))


def small_protocol(**kw):
    opts = dict(
        known_classes=6,
        num_trials=4,
        trials_without_novelty=1,
        pre_novelty=23,
        post_novelty=37,
        novel_fraction=0.5,
        batch_size=7,
    )
    opts.update(kw)
    return OndDriver(**opts)


def batches_of(spy):
    return [b for b in spy.batches if not isinstance(b, tuple)]


def test_batches_cover_each_trial_exactly_once():
    spy = SpyAgent()
    record = small_protocol().run(domain=DigitsDomain(), agent=spy, rng=np.random.default_rng(0), progress=False)
    for trial in record.trials:
        seen = np.concatenate([b.sample_index for b in batches_of(spy) if b.trial_id == trial.trial_id])
        # 60 samples in batches of 7: 9 batches (8 of 7, one of 4), each index once, in order.
        np.testing.assert_array_equal(seen, np.arange(60))
        sizes = [len(b.sample_index) for b in batches_of(spy) if b.trial_id == trial.trial_id]
        assert sizes == [7] * 8 + [4]


def test_system_condition_never_tells_the_red_light():
    spy = SpyAgent()
    small_protocol(condition="system").run(
        domain=DigitsDomain(), agent=spy, rng=np.random.default_rng(1), progress=False
    )
    assert all(b.red_light_index is None for b in batches_of(spy))


def test_given_condition_tells_the_red_light_from_its_batch_on():
    spy = SpyAgent()
    record = small_protocol(condition="given").run(
        domain=DigitsDomain(), agent=spy, rng=np.random.default_rng(2), progress=False
    )
    red = {t.trial_id: t.red_light for t in record.trials}
    for b in batches_of(spy):
        rl = red[b.trial_id]
        if rl is None:
            assert b.red_light_index is None
        else:
            # red light 23, batches of 7: batch 3 holds indices 21..27, so batches 0-2 are not told.
            expected = 23 if b.batch_index >= 3 else None
            assert b.red_light_index == expected


def test_agent_never_receives_stream_labels_and_trains_on_known_classes_only():
    spy = SpyAgent()
    record = small_protocol().run(domain=DigitsDomain(), agent=spy, rng=np.random.default_rng(3), progress=False)
    features, labels, num_known = spy.fit_args
    assert num_known == 6 and set(np.unique(labels)) == set(range(1, 7))
    # Training rows are exactly the known classes' training split: none equals a novel-class image.
    data = DigitsDomain().load()
    novel_images = data.features[np.isin(data.labels, record.novel_classes)]
    assert not (features[:, None, :] == novel_images[None, :, :]).all(-1).any()
    for b in batches_of(spy):
        assert set(vars(b)) == {"trial_id", "batch_index", "sample_index", "features", "red_light_index"}


def test_trials_have_the_configured_structure():
    record = small_protocol().run(domain=DigitsDomain(), agent=SpyAgent(), rng=np.random.default_rng(4), progress=False)
    without = [t for t in record.trials if t.red_light is None]
    assert len(without) == 1 and without[0].gt_novel.sum() == 0
    for t in record.trials:
        if t.red_light is not None:
            assert t.red_light == 23 and t.gt_novel[23] == 1 and t.gt_novel[:23].sum() == 0
            assert t.gt_novel.sum() == round(37 * 0.5)  # 18.5 rounds to 18 (banker's rounding)
            assert np.all((t.gt_class == 0) == (t.gt_novel == 1))


class BadAgent(SpyAgent):
    def __init__(self, fault, at_batch=2):
        super().__init__()
        self.fault, self.at_batch = fault, at_batch

    def predict_batch(self, batch):
        world, p = super().predict_batch(batch)
        if batch.batch_index == self.at_batch:
            if self.fault == "shape":
                p = p[:, :-1]
            elif self.fault == "nan":
                world[0] = np.nan
            elif self.fault == "range":
                world[1] = 1.5
            elif self.fault == "sum":
                p = p * 0.9
        return world, p


@pytest.mark.parametrize(
    "fault, words",
    [
        ("shape", ["p_class has shape (7, 6), expected (7, 7)"]),
        ("nan", ["p_world_changed contains NaN"]),
        ("range", ["p_world_changed must lie in [0, 1]"]),
        ("sum", ["p_class row 0 sums to 0.9", "protocol.normalize"]),
    ],
)
def test_bad_agent_output_names_trial_batch_and_array(fault, words):
    with pytest.raises(AgentOutputError) as info:
        small_protocol().run(domain=DigitsDomain(), agent=BadAgent(fault), rng=np.random.default_rng(5), progress=False)
    message = str(info.value)
    assert "trial 'trial000', batch 2" in message
    for w in words:
        assert w in message


def test_normalize_rescales_rows_instead_of_failing():
    record = small_protocol(normalize=True).run(
        domain=DigitsDomain(), agent=BadAgent("sum"), rng=np.random.default_rng(5), progress=False
    )
    np.testing.assert_allclose(record.trials[0].p_class.sum(1), 1.0)


def test_bad_protocol_config_names_the_key():
    with pytest.raises(ValueError, match="protocol.condition"):
        OndDriver(condition="maybe")
    with pytest.raises(ValueError, match="protocol.known_classes"):
        small_protocol(known_classes=10).run(
            domain=DigitsDomain(), agent=SpyAgent(), rng=np.random.default_rng(0), progress=False
        )


@pytest.mark.parametrize(
    "setting, message",
    [
        ({"batch_size": 2.5}, "protocol.batch_size: expected an integer, got 2.5 (float)"),
        ({"num_trials": 2.5}, "protocol.num_trials: expected an integer, got 2.5 (float)"),
        ({"known_classes": "abc"}, "protocol.known_classes: expected an integer, got 'abc'"),
        ({"novel_fraction": 1.5}, "protocol.novel_fraction: expected a number <= 1, got 1.5"),
        ({"novel_fraction": 0}, "protocol.novel_fraction: expected a number > 0, got 0"),
        ({"condition": "sytem"}, "protocol.condition: expected one of ['system', 'given'], got 'sytem'"),
        ({"sum_tolerance": float("inf")}, "protocol.sum_tolerance: expected a finite number, got inf"),
        ({"sum_tolerance": "inf"}, "protocol.sum_tolerance: expected a finite number, got 'inf'"),
        ({"normalize": "maybe"}, "protocol.normalize: expected true or false, got 'maybe'"),
        ({"train_fraction": 1.0}, "protocol.train_fraction: expected a number < 1, got 1.0"),
        ({"batch_size": 0}, "protocol.batch_size: expected an integer >= 1, got 0"),
        ({"pre_novelty": -1}, "protocol.pre_novelty: expected an integer >= 0, got -1"),
        ({"post_novelty": True}, "protocol.post_novelty: expected an integer, got True (bool)"),
        (
            {"num_trials": 3, "trials_without_novelty": 4},
            "protocol.trials_without_novelty: expected at most protocol.num_trials (3), got 4",
        ),
    ],
)
def test_each_bad_protocol_setting_is_one_error_naming_its_key(setting, message):
    with pytest.raises(ConfigError) as err:
        OndDriver(**setting)
    assert str(err.value) == message


def test_integers_given_as_text_or_whole_floats_run_as_integers():
    text = OndDriver(
        batch_size="7",
        num_trials=4.0,
        known_classes="6",
        pre_novelty=23.0,
        post_novelty="37",
        trials_without_novelty=1,
        sum_tolerance="1e-6",
        normalize="false",
    )
    assert (text.batch_size, text.num_trials, text.known_classes, text.pre_novelty, text.post_novelty) == (
        7,
        4,
        6,
        23,
        37,
    )
    assert text.sum_tolerance == 1e-6 and text.normalize is False
    a = text.run(domain=DigitsDomain(), agent=SpyAgent(), rng=np.random.default_rng(3), progress=False)
    b = small_protocol().run(domain=DigitsDomain(), agent=SpyAgent(), rng=np.random.default_rng(3), progress=False)
    assert [t.trial_id for t in a.trials] == [t.trial_id for t in b.trials]
    for x, y in zip(a.trials, b.trials):
        np.testing.assert_array_equal(x.gt_class, y.gt_class)
        assert x.batch_size == y.batch_size == 7


# ------------------------------------------------------------------------------ checks before any run


class CountingDigits(DigitsDomain):
    """Digits that count how often their data are read from disk."""

    def __init__(self):
        super().__init__()
        self.loads = 0

    def read(self):
        self.loads += 1
        return super().read()


def test_check_loads_the_data_once_and_the_run_gives_the_same_numbers():
    domain = CountingDigits()
    protocol = small_protocol()
    protocol.check(domain=domain, agent=SpyAgent(), baseline=SpyAgent())
    checked = protocol.run(domain=domain, agent=SpyAgent(), rng=np.random.default_rng(4), progress=False)
    assert domain.loads == 1  # the domain keeps what it read; the driver keeps nothing
    assert not vars(protocol).keys() - vars(small_protocol()).keys()  # no state left on the driver
    plain = small_protocol().run(domain=DigitsDomain(), agent=SpyAgent(), rng=np.random.default_rng(4), progress=False)
    for x, y in zip(checked.trials, plain.trials):
        np.testing.assert_array_equal(x.gt_class, y.gt_class)
        np.testing.assert_array_equal(x.p_class, y.p_class)


# every agent option of the OND protocol (closed_world, knn_novelty, sailon_client, ...), as the message lists them
OND_AGENTS = ", ".join(o for o in group_options("agent") if o.startswith("ond/"))


class RLLikeAgent:
    def seed(self, rng): ...

    def act(self, observation): ...


class OldSignatureAgent(SpyAgent):
    def fit(self, features, labels):  # no num_known / rng keywords
        pass


@pytest.mark.parametrize(
    "kw, message",
    [
        (
            dict(agent=RLLikeAgent()),
            "agent (tests.runner.test_ond_protocol.RLLikeAgent) is not an OND agent: it has no "
            f"predict_batch(batch) method; choose agent=ond/<option> ({OND_AGENTS})",
        ),
        (
            dict(baseline=RLLikeAgent()),
            "baseline (tests.runner.test_ond_protocol.RLLikeAgent) is not an OND agent: it has "
            "no predict_batch(batch) method; choose baseline=ond/<option> (ond/closed_world, "
            "ond/knn_novelty, none)",
        ),
        (
            dict(agent=OldSignatureAgent()),
            "agent (tests.runner.test_ond_protocol.OldSignatureAgent) is not an OND agent: "
            "its fit(features, labels) cannot be called as fit(features, labels, *, "
            "num_known, rng)",
        ),
        (
            dict(domain=CrowdSimDomain()),
            "domain (owl_eval.protocols.trajectory.domains.crowd_sim.CrowdSimDomain) is not an OND domain: its "
            "load(rng) cannot be called as load() (labelled features) (missing a required "
            "argument: 'rng'); choose domain=<option> (digits, handwriting, activity, "
            "image_segments)",
        ),
    ],
)
def test_check_names_an_agent_or_domain_of_another_protocol(kw, message):
    parts = dict(domain=DigitsDomain(), agent=SpyAgent(), baseline=None) | kw
    with pytest.raises(ConfigError) as err:
        small_protocol().check(**parts)
    assert str(err.value).startswith(message)


@pytest.mark.parametrize(
    "setting, message",
    [
        (
            {"known_classes": 20},
            "protocol.known_classes: expected 1..9 for domain 'digits' (10 classes: at least one "
            "must stay novel), got 20",
        ),
        (
            {"known_classes": 8, "novel_classes_per_trial": 3},
            "protocol.novel_classes_per_trial: expected 1..2 (domain 'digits' has 10 classes, protocol.known_classes = 8), got 3",
        ),
        # digits' classes hold 174..183 images; half stay for the streams: 87, 89, 89, 89 ... -> 87 + 89 = 176 for K = 2
        (
            {"known_classes": 2, "pre_novelty": 100, "post_novelty": 77},
            "protocol.pre_novelty + protocol.post_novelty = 177 exceeds the 176 held-out known samples domain 'digits' "
            "guarantees for 2 known classes (train_fraction 0.5); shorten the trials",
        ),
    ],
)
def test_check_fits_the_settings_to_the_domain_before_any_run(setting, message):
    with pytest.raises(ConfigError) as err:
        small_protocol(**setting).check(domain=DigitsDomain(), agent=SpyAgent())
    assert str(err.value) == message
    small_protocol(known_classes=2, pre_novelty=100, post_novelty=76).check(domain=DigitsDomain(), agent=SpyAgent())


def test_check_asks_the_agents_whether_the_training_split_is_large_enough():
    from owl_eval.protocols.ond.agents.closed_world import ClosedWorldAgent
    from owl_eval.protocols.ond.agents.knn_novelty import KnnNoveltyAgent

    # K = 1 known class: the fewest training images of any digit, round(0.5 x 174) = 87
    protocol = small_protocol(known_classes=1, novel_classes_per_trial=1, pre_novelty=20, post_novelty=20)
    protocol.check(
        domain=DigitsDomain(), agent=KnnNoveltyAgent(k_class=87, k_novelty=86), baseline=ClosedWorldAgent(k=87)
    )
    with pytest.raises(ConfigError) as err:
        protocol.check(domain=DigitsDomain(), agent=KnnNoveltyAgent(k_novelty=87))
    assert str(err.value) == (
        "agent.k_novelty: expected at most 86 (the 87 training samples of the known classes, "
        "less the sample itself), got 87"
    )
    with pytest.raises(ConfigError) as err:
        protocol.check(domain=DigitsDomain(), agent=SpyAgent(), baseline=ClosedWorldAgent(k=88))
    assert str(err.value) == "baseline.k: expected at most the 87 training samples of the known classes, got 88"
