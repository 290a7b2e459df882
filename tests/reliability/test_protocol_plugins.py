"""Protocol plugins (entry-point group ``owl_eval.protocols``) that are broken or ambiguous, as real installed
distributions: a folder on ``PYTHONPATH`` holding each plugin's package and its ``*.dist-info`` (``METADATA`` and
``entry_points.txt``), which is what ``pip install`` writes and ``importlib.metadata`` reads. The command line
runs as a real ``python -m owl_eval`` (the registry of protocols is read once per process).

- A plugin whose module does not import costs one ``warning:`` line naming its distribution and the error; the
  run of a built-in protocol beside it finishes.
- Two distributions registering one protocol name: one ``error:`` line naming both, and no run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.reliability.harness import PROJECT_ROOT, Workspace, assert_clean_failure, run_cli

pytestmark = pytest.mark.subprocess

RUN = ["+experiment=ond_given_detection", "protocol.num_trials=2", "figures=false"]


def install(site: Path, distribution: str, package: str, entry_points: str, code: str) -> None:
    """A distribution as pip installs it into ``site``: the package and its dist-info metadata."""
    (site / package).mkdir(parents=True)
    (site / package / "__init__.py").write_text(code)
    info = site / f"{distribution.replace('-', '_')}-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(f"[owl_eval.protocols]\n{entry_points}\n")
    (info / "top_level.txt").write_text(f"{package}\n")


def plugin_env(site: Path) -> dict:
    return {"PYTHONPATH": f"{site}:{PROJECT_ROOT}"}


@pytest.fixture()
def site(workspace: Workspace) -> Path:
    folder = workspace.store.parent / "site"  # outside the store: the harness checks it stays unchanged
    folder.mkdir()
    return folder


@pytest.mark.slow
def test_a_plugin_that_fails_to_import_is_one_warning_and_the_other_protocols_run(workspace, site):
    install(
        site,
        "owl-eval-broken-plugin",
        "owl_eval_broken_plugin",
        "broken = owl_eval_broken_plugin:PROTOCOL",
        "import owl_eval_dependency_that_is_not_installed  # the plugin's missing dependency\n",
    )
    result = run_cli("owl_eval", RUN, workspace, env=plugin_env(site))
    assert result.returncode == 0, result.stderr[-3000:]
    warnings = [line for line in result.stderr.splitlines() if "owl-eval-broken-plugin" in line]
    assert len(warnings) == 1, result.stderr[-3000:]
    assert warnings[0].startswith("warning: ")
    assert "ModuleNotFoundError" in warnings[0] and "owl_eval_dependency_that_is_not_installed" in warnings[0]
    assert "Traceback" not in result.stderr
    assert result.runs_after == result.runs_before + 1  # the OND run, FINISHED (the command exited 0)


def test_two_plugins_registering_one_protocol_name_is_one_error_naming_both(workspace, site):
    # a second distribution that registers the built-in name "ond" (re-exporting owl-eval's descriptor)
    install(
        site,
        "owl-eval-ond-fork",
        "owl_eval_ond_fork",
        "ond = owl_eval_ond_fork:PROTOCOL",
        "from owl_eval.protocols.ond.protocol import PROTOCOL\n",
    )
    result = run_cli("owl_eval", RUN, workspace, env=plugin_env(site))
    line = assert_clean_failure(result, "'ond'", "owl-eval-ond-fork", "owl-eval ", "owl_eval_ond_fork:PROTOCOL")
    assert "registered by 2 installed packages" in line
