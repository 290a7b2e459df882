"""Model-level mistakes are config errors, found before any run exists: a scikit-learn estimator's parameter of the
wrong type or range (scikit-learn itself checks only in ``fit``, mid-run, which left a FAILED run), a torch module
whose output width is not what the protocol needs (one forward pass on a batch of zeros of the domain's input
shape), an optimizer setting torch refuses. One ``error:`` line naming the config key, no run."""

from __future__ import annotations

import textwrap

import pytest

from tests.reliability.harness import assert_clean_failure, run_cli

OND = ["+experiment=ond_given_detection", "protocol.num_trials=2", "figures=false"]
CONTINUAL = ["+experiment=continual_split_digits", "figures=false"]


def _forest_agent(workspace) -> str:
    """README's ``forest_lof`` agent (a RandomForestClassifier), in a user's config folder; the search-path override."""
    path = workspace.root / "conf" / "agent" / "ond" / "forest.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(
        textwrap.dedent("""\
            # @package agent
            _target_: owl_eval.protocols.ond.agents.sklearn_model.SklearnNoveltyAgent
            classifier:
              _target_: sklearn.ensemble.RandomForestClassifier
              n_estimators: 20
            novelty: max_softmax
        """)
    )
    return f"hydra.searchpath=[file://{workspace.root / 'conf'}]"


def test_estimator_parameter_of_the_wrong_type(workspace):
    result = run_cli(
        "runner", [_forest_agent(workspace), *OND, "agent=ond/forest", "agent.classifier.n_estimators=lots"], workspace
    )
    assert_clean_failure(
        result, "agent.classifier.n_estimators:", "RandomForestClassifier", "must be an int", "Got 'lots'"
    )


SKLEARN_CASES = [
    # (id, args, words of the error line)
    (
        "novelty-detector",
        [*OND, "agent=ond/sklearn", "agent.novelty.n_estimators=lots"],
        ["agent.novelty.n_estimators:", "IsolationForest", "Got 'lots'"],
    ),
    (
        "inside-a-pipeline",
        [*OND, "agent=ond/sklearn", "agent.classifier._args_.1.C=-1"],
        ["agent.classifier._args_[1].C:", "LogisticRegression", "Got -1"],
    ),
    (
        "continual-estimator",
        [*CONTINUAL, "agent=continual/sklearn", "agent.estimator.loss=squared"],
        ["agent.estimator.loss:", "SGDClassifier", "Got 'squared'"],
    ),
]


@pytest.mark.parametrize("args,mentions", [pytest.param(*c[1:], id=c[0]) for c in SKLEARN_CASES])
def test_estimator_parameter_refused_before_the_run(workspace, args, mentions):
    assert_clean_failure(run_cli("runner", args, workspace), *mentions)


TORCH_CASES = [
    (
        "ond-output-width",
        [*OND, "agent=ond/torch", "agent.module._args_.2.out_features=4"],
        ["agent.module", "outputs shape (2, 4)", "expected (2, 6)", "known class (K = 6)"],
    ),
    (
        "continual-output-width",
        [*CONTINUAL, "agent=continual/torch", "agent.module._args_.2.out_features=7"],
        ["agent.module", "outputs shape (2, 7)", "expected (2, 10)"],
    ),
    (
        "ond-input-width",
        [
            *OND,
            "agent=ond/torch",
            "agent.module._args_.0._target_=torch.nn.Linear",
            "+agent.module._args_.0.in_features=3",
        ],
        ["agent.module", "fails on a batch of shape (2, 64)", "input width must be 64"],
    ),
    (
        "ond-optimizer",
        [*OND, "agent=ond/torch", "agent.optimizer.lr=-1"],
        ["agent.optimizer:", "Invalid learning rate: -1"],
    ),
]


@pytest.mark.parametrize("args,mentions", [pytest.param(*c[1:], id=c[0]) for c in TORCH_CASES])
def test_torch_module_probed_before_the_run(workspace, args, mentions):
    pytest.importorskip("torch")
    assert_clean_failure(run_cli("runner", args, workspace), *mentions)
