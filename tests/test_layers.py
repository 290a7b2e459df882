"""No module imports upward: the layer order of owl_eval/__init__.py's docstring, read from every module's
imports with ``ast`` (lazy imports inside functions included). A protocol's folder (``owl_eval/protocols/<name>/``)
is a part of its own: no shared part and no other protocol imports it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import owl_eval

PACKAGE = Path(owl_eval.__file__).resolve().parent
# The layer of each top-level part; a module may import its own layer and the ones below it.
LAYERS = {
    "__init__": 0,
    "errors": 0,
    "typed": 0,
    "safe_paths": 0,
    "json_input": 0,
    "metrics": 1,
    "formats": 1,
    "datasets": 2,
    "stats": 2,
    "protocols": 3,
    "paths": 3,
    "sources": 4,
    "evaluation": 4,
    "protocol": 5,  # owl_eval/protocols/<name>/: one part per protocol (see part)
    "tracking": 6,  # the only part that talks to MLflow
    "runner": 7,
    "comparison": 7,
    "__main__": 7,
}
PROTOCOL_FOLDERS = sorted(p.name for p in (PACKAGE / "protocols").iterdir() if (p / "protocol.py").is_file())
# Known upward imports, each with its owner's fix; the test fails when one is gone (remove it here then).
KNOWN: set[str] = set()  # upward imports still to fix (none)
# Parts of one layer that must not import each other in this direction.
FORBIDDEN = {
    ("metrics", "formats"),
    ("formats", "metrics"),
    ("sources", "evaluation"),
}


def part(module: str) -> str:
    """``owl_eval.metrics.results`` -> ``metrics``; ``owl_eval.protocols.ond.driver`` -> ``protocol:ond``."""
    pieces = module.split(".")
    if len(pieces) > 2 and pieces[1] == "protocols" and pieces[2] in PROTOCOL_FOLDERS:
        return f"protocol:{pieces[2]}"
    return pieces[1] if len(pieces) > 1 else "__init__"


def layer(name: str) -> int:
    return LAYERS["protocol"] if name.startswith("protocol:") else LAYERS.get(name, 99)


def imports(path: Path, root: Path = PACKAGE.parent) -> list[tuple[int, str]]:
    """(line, module) of every ``owl_eval`` import in the file, relative imports resolved (``root``: the folder
    holding the ``owl_eval`` package)."""
    rel = path.relative_to(root).with_suffix("")
    here = list(rel.parts) if path.name == "__init__.py" else list(rel.parts[:-1])
    if path.name == "__init__.py":
        here = here[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            found.append((node.lineno, name))
    return [(line, name) for line, name in found if name == "owl_eval" or name.startswith("owl_eval.")]


def violations(package: Path = PACKAGE) -> list[str]:
    out = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent)
        mine = part(".".join(rel.with_suffix("").parts))
        assert layer(mine) < 99, f"{rel}: part {mine!r} has no layer; add it to LAYERS and owl_eval/__init__.py"
        for line, name in imports(path, package.parent):
            theirs = part(name)
            if theirs == mine:
                continue
            across = mine.startswith("protocol:") and theirs.startswith("protocol:")  # one protocol, another
            if (
                layer(theirs) >= LAYERS["protocol"]
                and not mine.startswith("protocol:")
                and theirs not in ("tracking", "runner", "comparison")
            ):
                across = True  # a shared part learns of a protocol only through its descriptor
            if layer(theirs) > layer(mine) or across or (mine, theirs) in FORBIDDEN:
                out.append(f"{rel}:{line}: {mine} imports {name}")
    return out


def test_no_module_imports_upward():
    found = violations()
    assert [v for v in found if v not in KNOWN] == []
    assert sorted(KNOWN - set(found)) == [], "fixed: remove these from KNOWN"


def test_the_docstring_names_every_layer_in_order():
    doc = owl_eval.__doc__
    positions = {name: doc.index(f"``{name}``") for name in LAYERS if not name.startswith("__") and name != "protocol"}
    by_layer = sorted(positions, key=lambda n: (LAYERS[n], positions[n]))
    assert by_layer == sorted(positions, key=positions.get)


def test_the_checker_sees_lazy_and_relative_imports(tmp_path):
    """A function-level import is an import too (the checker reads the whole tree, not the module header). On a probe
    package of its own: a file written into owl_eval/ would be read by the other checks running in other workers."""
    metrics = tmp_path / "owl_eval" / "metrics"
    metrics.mkdir(parents=True)
    (metrics / "_layer_probe.py").write_text(
        "def f():\n    from owl_eval.runner import app\n    from ..formats import npz\n"
    )
    found = {v.split(": ", 1)[1] for v in violations(tmp_path / "owl_eval")}
    assert found == {"metrics imports owl_eval.runner", "metrics imports owl_eval.formats"}


def test_metrics_and_formats_agree_on_the_l2logger_timestamp_format():
    from owl_eval.formats.l2logger import TIMESTAMP_FORMAT
    from owl_eval.protocols.lifelong_rl.metrics.pipeline import TIMESTAMP_FORMAT as METRICS_FORMAT

    assert METRICS_FORMAT == TIMESTAMP_FORMAT == "%Y%m%dT%H%M%S.%f"


@pytest.mark.parametrize("name", ["ond", "continual", "trajectory", "lifelong_rl"])
def test_protocol_plots_compute_no_metric(name):
    """A protocol's figures draw the evaluation's figure data: from owl_eval they import the result types only
    (the results and the keys they are looked up by; no evaluate_log, KDE levels or detection tables recomputed
    while drawing)."""
    found = {module for _, module in imports(PACKAGE / "protocols" / name / "figures.py")}
    assert found <= {"owl_eval.metrics.results", "owl_eval.metrics.keys"}


def test_the_four_protocols_are_folders_with_a_descriptor():
    assert PROTOCOL_FOLDERS == ["continual", "lifelong_rl", "ond", "trajectory"]


def test_the_shared_code_names_no_protocol():
    """Outside the protocol folders (and the docs and configs), no module names a protocol: a fifth one is
    added without editing a shared table. Checked on the code, comments and docstrings left out."""
    import io
    import re
    import tokenize

    word = re.compile(r"\b(ond|continual|trajectory|lifelong_rl)\b", re.IGNORECASE)
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "protocols" and len(rel.parts) > 2 and rel.parts[1] in PROTOCOL_FOLDERS:
            continue
        tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
        code = [
            t for t in tokens if t.type not in (tokenize.COMMENT, tokenize.STRING) or not _is_docstring_or_comment(t)
        ]
        for t in code:
            if t.type in (tokenize.NAME, tokenize.STRING) and word.search(t.string):
                found.append(f"{rel}:{t.start[0]}: {t.string[:60]}")
    assert found == []


def _is_docstring_or_comment(token) -> bool:
    """Comments, and strings that stand alone on their line (docstrings): prose, not code."""
    import tokenize

    if token.type == tokenize.COMMENT:
        return True
    return token.type == tokenize.STRING and token.line.strip() == token.string.strip()


def module_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package's modules it imports anywhere in its file (lazy and ``TYPE_CHECKING`` imports
    included: a reader follows those too); ``from pkg import sub`` is an import of the module ``pkg.sub``."""
    files = {}
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package.parent).with_suffix("")
        files[".".join(rel.parts[:-1] if path.name == "__init__.py" else rel.parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Import):
                candidates = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                parts = here[: len(here) - node.level + 1] + [node.module] if node.level else [node.module]
                base = ".".join(p for p in parts if p)
                candidates = [f"{base}.{a.name}" for a in node.names] + [base or ""]
            else:
                continue
            for candidate in candidates:
                while candidate and candidate not in files:
                    candidate = candidate.rpartition(".")[0]
                if candidate and candidate != name:
                    targets.add(candidate)
                    break
        graph[name] = targets
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_circle():
    """No module reaches itself through the imports of others (function-level ones included)."""
    assert circles(module_graph()) == []


def test_the_circle_check_sees_a_circle_through_a_lazy_import(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg import b\n")
    (package / "b.py").write_text("def f():\n    from . import c\n")
    (package / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import x\n")
    (package / "d.py").write_text("from pkg import a\n")
    assert circles(module_graph(package)) == [["pkg.a", "pkg.b", "pkg.c"]]


# The runner's sub-packages in their order (owl_eval/runner/__init__.py): each may import those before it only.
RUNNER_ORDER = ["config", "process", "job", "sweeps", "cli"]
RUNNER_MODULES = {"api": {"config", "job"}}  # modules at the runner's top level and the sub-packages they use


def runner_part(module: str) -> str | None:
    """``owl_eval.runner.job.execute`` -> ``job``; ``owl_eval.runner.api`` -> ``api``; None outside the runner."""
    pieces = module.split(".")
    return pieces[2] if len(pieces) > 2 and pieces[:2] == ["owl_eval", "runner"] else None


def runner_violations(package: Path = PACKAGE) -> list[str]:
    out = []
    for path in sorted((package / "runner").rglob("*.py")):
        rel = path.relative_to(package.parent).with_suffix("")
        mine = runner_part(".".join(rel.parts))
        if mine is None or mine == "__init__":
            continue
        if mine in RUNNER_MODULES:
            allowed = RUNNER_MODULES[mine]
        else:
            assert mine in RUNNER_ORDER, f"{rel}: runner part {mine!r} has no place; add it to RUNNER_ORDER"
            allowed = set(RUNNER_ORDER[: RUNNER_ORDER.index(mine)])
        for line, name in imports(path, package.parent):
            theirs = runner_part(name)
            if theirs is not None and theirs != mine and theirs not in allowed:
                out.append(f"{rel}:{line}: runner.{mine} imports {name}")
    return out


def test_runner_sub_packages_import_only_those_before_them():
    assert runner_violations() == []


def test_every_runner_sub_package_says_what_it_owns_and_may_import():
    import importlib

    for name in RUNNER_ORDER:
        doc = importlib.import_module(f"owl_eval.runner.{name}").__doc__ or ""
        assert len(doc) > 150, f"owl_eval/runner/{name}/__init__.py: a paragraph of what it owns"
        before = RUNNER_ORDER[: RUNNER_ORDER.index(name)]
        assert ("Imports no other runner sub-package" in doc) == (not before), name
        for earlier in before if name != "cli" else ():
            assert f"``runner.{earlier}``" in doc, f"{name} does not say it may import runner.{earlier}"


def test_the_runner_check_sees_an_upward_import(tmp_path):
    """On a probe package of its own (a file written into owl_eval/ would be read by the other checks running at the
    same time in other workers)."""
    config = tmp_path / "owl_eval" / "runner" / "config"
    config.mkdir(parents=True)
    (config / "_layer_probe.py").write_text(
        "def f():\n    from owl_eval.runner.job import execute\n    from ..cli import main\n"
    )
    found = {v.split(": ", 1)[1] for v in runner_violations(tmp_path / "owl_eval")}
    assert found == {"runner.config imports owl_eval.runner.job", "runner.config imports owl_eval.runner.cli"}


def test_only_tracking_imports_mlflow():
    """MLflow is called from one package: every other module hands ``owl_eval.tracking`` values."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if rel.parts[0] == "tracking":
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [f"{rel}:{node.lineno}: {n}" for n in names if n == "mlflow" or n.startswith("mlflow.")]
    assert found == []
