"""MetricKey: a reported name as a value. Its text is the name as reported before keys were values (hand-written
expectations, one per form), it equals and hashes as that text, it is read-only, and it survives pickling and
MetricResults with its fields."""

from __future__ import annotations

import copy
import json
import pickle

import pytest

from owl_eval.metrics.keys import MetricKey, rendered_around
from owl_eval.metrics.results import NA, MetricResults, Series

# (fields, the reported name written by hand)
FORMS = [
    (dict(name="top1"), "top1"),
    (dict(name="fpr_at_95tpr"), "fpr_at_95tpr"),
    (dict(name="m5_opti_top1_n_excluded"), "m5_opti_top1_n_excluded"),
    (dict(name="top1", agent="baseline"), "baseline.top1"),
    (dict(name="m2_cdt_pct", threshold=0.3), "m2_cdt_pct@0.3"),
    (dict(name="m1_mean_fn_cdt", threshold=0.175), "m1_mean_fn_cdt@0.175"),
    (dict(name="m21_fp_pct", threshold=0.9), "m21_fp_pct@0.9"),
    (dict(name="unknown_score_f1_post", agent="baseline", threshold=0.5), "baseline.unknown_score_f1_post@0.5"),
    (dict(name="top1", axis="batch"), "top1_batch"),
    (dict(name="top3", agent="baseline", axis="batch"), "baseline.top3_batch"),
    (dict(name="m2_cdt_pct", axis="threshold"), "m2_cdt_pct_vs_threshold"),
    (dict(name="m21_fp_pct", agent="baseline", axis="threshold"), "baseline.m21_fp_pct_vs_threshold"),
    (dict(name="forgetting", axis="task"), "by_task/forgetting"),
    (dict(name="accuracy", task="3"), "task/3/accuracy"),
    (dict(name="accuracy", task=3), "task/3/accuracy"),
    (dict(name="saturation", task="cartpole_default"), "task/cartpole_default/saturation"),
    (dict(name="saturation", task="frozen lake@v1"), "task/frozen lake@v1/saturation"),
    (dict(name="min_ade_{k}_marginal", k=5), "min_ade_5_marginal"),
    (dict(name="min_fde_{k}_joint", k=20), "min_fde_20_joint"),
    (dict(name="risk_at_{k}_coverage", k=80), "risk_at_80_coverage"),
    (dict(name="displacement_by_step_marginal"), "displacement_by_step_marginal"),
    (dict(name="total_s", timing=True), "time/total_s"),
    (dict(name="syllabus_s", timing=True), "time/syllabus_s"),
    (dict(name="num_scenes"), "num_scenes"),
    (dict(name="ste/reused"), "ste/reused"),
    (dict(name="tasks_completed"), "tasks_completed"),
]


@pytest.mark.parametrize("fields, text", FORMS, ids=[text for _, text in FORMS])
def test_a_key_is_its_reported_name(fields, text):
    key = MetricKey(**fields)
    assert str(key) == text and f"{key}" == text and repr(key) == repr(text)
    assert key == text and hash(key) == hash(text) and {key: 1}[text] == 1 and text in {key}
    assert json.dumps({key: [key]}) == json.dumps({text: [text]})
    assert type(str(key)) is str and type(key + "") is str  # text operations give text, never a key
    for field, value in fields.items():
        assert getattr(key, field) == (str(value) if field == "task" else value), field
    again = MetricKey.from_fields(key.fields())
    assert again == key and again.fields() == key.fields()
    for copied in (pickle.loads(pickle.dumps(key)), copy.deepcopy(key), copy.copy(key)):
        assert type(copied) is MetricKey and copied.fields() == key.fields()


def test_a_key_is_read_only_and_changed_only_into_a_new_key():
    key = MetricKey("top1")
    with pytest.raises(AttributeError):
        key.agent = "baseline"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        key._agent = "baseline"
    baseline = key.with_fields(agent="baseline")
    assert (key, baseline) == ("top1", "baseline.top1") and key.agent == "" and baseline.agent == "baseline"
    assert key.plain and not baseline.plain and MetricKey("min_ade_{k}_marginal", k=5).plain
    assert not any(MetricKey(**f).plain for f, _ in FORMS if set(f) - {"name", "k"})


def test_a_plain_string_is_a_plain_name_and_a_qualified_form_is_refused():
    assert MetricKey.of("top1").fields() == MetricKey("top1").fields()
    key = MetricKey("top1", agent="baseline")
    assert MetricKey.of(key) is key
    for text in ("baseline.top1", "m2_cdt_pct@0.3", "task/3/accuracy", "by_task/forgetting", "time/total_s"):
        with pytest.raises(ValueError, match="qualified form"):
            MetricKey.of(text)
    with pytest.raises(TypeError):
        MetricKey.of(3)  # type: ignore[arg-type]


def test_results_are_keyed_by_metric_keys_and_looked_up_by_reported_names():
    results = MetricResults(values={"top1": 0.5})
    results.set(MetricKey("top1", agent="baseline"), 0.4)
    results.set(MetricKey("m2_cdt_pct", threshold=0.3), NA("no trial"))
    results.series[MetricKey("top1", axis="batch")] = Series([0, 1], [0.5, 0.6])
    assert all(isinstance(k, MetricKey) for k in [*results.values, *results.na, *results.series])
    assert results["top1"] == 0.5 and results["baseline.top1"] == 0.4 and results.values.get("baseline.top1") == 0.4
    assert results["m2_cdt_pct@0.3"] == NA("no trial") and "top1_batch" in results.series
    assert results.values == {"top1": 0.5, "baseline.top1": 0.4}
    (baseline,) = [k for k in results.values if k.agent]
    assert baseline.name == "top1"
    with pytest.raises(ValueError, match="qualified form"):
        results.set("baseline.top3", 0.1)
    with pytest.raises(ValueError, match="qualified form"):
        MetricResults(na={"m2@0.3": "x"})
    other = MetricResults()
    other.update(MetricResults(values={"top3": 0.7}, series=results.series), agent="baseline")
    assert list(other.values) == ["baseline.top3"] and list(other.series) == ["baseline.top1_batch"]
    assert next(iter(other.series)).fields() == MetricKey("top1", agent="baseline", axis="batch").fields()
    assert [k.fields() for k in pickle.loads(pickle.dumps(results)).values] == [k.fields() for k in results.values]


def test_rendered_around_leaves_the_open_part_as_a_gap():
    assert rendered_around("task", "saturation") == ("task/", "/saturation")
    assert rendered_around("k", "min_ade_{k}_marginal") == ("min_ade_", "_marginal")
    assert rendered_around("k", "ade_{k}_joint", agent="baseline") == ("baseline.ade_", "_joint")
    assert rendered_around("name", "", timing=True) == ("time/", "")
