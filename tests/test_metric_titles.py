"""Every headline metric of the built-in protocols has a short title, and ``metric_keys.json`` carries it."""

from __future__ import annotations

import math

import pytest

from owl_eval.evaluation.registry import headline_rank, spec_for
from owl_eval.metrics.keys import MetricKey
from owl_eval.metrics.results import MetricSpec
from owl_eval.protocols import get_protocol
from owl_eval.tracking.key_index import LoggedKey
from owl_eval.tracking.keys import logged_key_entry

BUILT_IN = ("ond", "continual", "trajectory", "lifelong_rl")


def _headline_keys(protocol: str) -> list[MetricKey]:
    """The descriptor's headline names as keys, a ``{k}`` template for K = 1 and K = 20."""
    keys = []
    for name in get_protocol(protocol).headline:
        keys += [MetricKey(name, k=k) for k in (1, 20)] if "{k}" in name else [MetricKey(name)]
    return keys


@pytest.mark.parametrize("protocol", BUILT_IN)
def test_every_headline_metric_has_a_title(protocol):
    keys = _headline_keys(protocol)
    assert keys
    for key in keys:
        assert headline_rank(protocol, key) is not None, key
        spec = spec_for(protocol, key)
        assert spec is not None, key
        assert spec.title, f"{protocol}: {key} has no title"
        assert spec.title != spec.name and "{k}" not in spec.title, (key, spec.title)
        assert spec.display_name == spec.title
        entry = logged_key_entry(key, protocol, series=False)
        assert entry.title == spec.title


def test_template_title_takes_k():
    assert spec_for("trajectory", MetricKey("min_ade_{k}_marginal", k=20)).title == "minADE@20"
    assert spec_for("trajectory", MetricKey("min_fde_{k}_marginal", k=1)).title == "minFDE@1"


def test_display_name_falls_back_to_the_name():
    spec = MetricSpec("x", "toy", True)
    assert spec.title == "" and spec.display_name == "x"
    assert MetricSpec("x", "toy", True, title="The X").display_name == "The X"


def test_logged_key_entry_title_only_for_headline_keys():
    assert logged_key_entry(MetricKey("m1_mean_fn_cdt"), "ond", series=False).title == (
        "M1: FN in correctly detected trials"
    )
    assert logged_key_entry(MetricKey("top1"), "ond", series=False).title == "Top-1 accuracy"
    # the baseline's own value, a series, a point of a threshold sweep and a non-headline name keep their raw key
    assert logged_key_entry(MetricKey("top1", agent="baseline"), "ond", series=False).title == ""
    assert logged_key_entry(MetricKey("top1", axis="batch"), "ond", series=True).title == ""
    assert logged_key_entry(MetricKey("m1_mean_fn_cdt", threshold=0.5), "ond", series=False).title == ""
    assert logged_key_entry(MetricKey("top1_pre"), "ond", series=False).title == ""
    assert logged_key_entry(MetricKey("not_declared"), "ond", series=False).title == ""


def test_logged_key_round_trips_its_title():
    entry = LoggedKey(MetricKey("top1"), True, "maximize", (0.0, math.inf), False, 0, "Top-1 accuracy")
    data = entry.as_json()
    assert data["title"] == "Top-1 accuracy"
    assert LoggedKey.from_json(data) == entry
    # an index written before titles existed
    del data["title"]
    assert LoggedKey.from_json(data).title == ""
    assert LoggedKey.from_json(data) == LoggedKey(MetricKey("top1"), True, "maximize", (0.0, math.inf), False, 0)
