"""The OND protocol drives agents exactly as SAIL-ON prescribes: batches, red light, no labels."""
from __future__ import annotations

import numpy as np
import pytest

from runner.domains.classification import DigitsDomain
from runner.protocols.base import AgentOutputError
from runner.protocols.ond import OndProtocol


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
    opts = dict(known_classes=6, num_trials=4, trials_without_novelty=1, pre_novelty=23, post_novelty=37,
                novel_fraction=0.5, batch_size=7)
    opts.update(kw)
    return OndProtocol(**opts)


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
    small_protocol(condition="system").run(domain=DigitsDomain(), agent=spy, rng=np.random.default_rng(1), progress=False)
    assert all(b.red_light_index is None for b in batches_of(spy))


def test_given_condition_tells_the_red_light_from_its_batch_on():
    spy = SpyAgent()
    record = small_protocol(condition="given").run(domain=DigitsDomain(), agent=spy, rng=np.random.default_rng(2), progress=False)
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


@pytest.mark.parametrize("fault, words", [
    ("shape", ["p_class has shape (7, 6), expected (7, 7)"]),
    ("nan", ["p_world_changed contains NaN"]),
    ("range", ["p_world_changed must lie in [0, 1]"]),
    ("sum", ["p_class row 0 sums to 0.9", "protocol.normalize"]),
])
def test_bad_agent_output_names_trial_batch_and_array(fault, words):
    with pytest.raises(AgentOutputError) as info:
        small_protocol().run(domain=DigitsDomain(), agent=BadAgent(fault), rng=np.random.default_rng(5), progress=False)
    message = str(info.value)
    assert "trial 'trial000', batch 2" in message
    for w in words:
        assert w in message


def test_normalize_rescales_rows_instead_of_failing():
    record = small_protocol(normalize=True).run(domain=DigitsDomain(), agent=BadAgent("sum"), rng=np.random.default_rng(5), progress=False)
    np.testing.assert_allclose(record.trials[0].p_class.sum(1), 1.0)


def test_bad_protocol_config_names_the_key():
    with pytest.raises(ValueError, match="protocol.condition"):
        OndProtocol(condition="maybe")
    with pytest.raises(ValueError, match="protocol.known_classes"):
        small_protocol(known_classes=10).run(domain=DigitsDomain(), agent=SpyAgent(), rng=np.random.default_rng(0), progress=False)
