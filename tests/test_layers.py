"""No module imports upward: the layer order of owl_eval/__init__.py's docstring, read from every module's
imports with ``ast`` (lazy imports inside functions included)."""

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
    "paths": 0,
    "api": 1,
    "metrics": 2,
    "formats": 2,
    "agents": 3,
    "domains": 3,
    "protocols": 4,
    "sources": 5,
    "plots": 5,
    "evaluation": 6,
    "runner": 7,
    "__main__": 7,
}
# Known upward imports, each with its owner's fix; the test fails when one is gone (remove it here then).
KNOWN: set[str] = set()  # upward imports still to fix (none)
# Parts of one layer that must not import each other in this direction.
FORBIDDEN = {
    ("metrics", "formats"),
    ("formats", "metrics"),
    ("domains", "agents"),
    ("agents", "domains"),
    ("plots", "agents"),
    ("plots", "protocols"),
    ("plots", "sources"),
    ("sources", "plots"),
}


def part(module: str) -> str:
    """``owl_eval.protocols.ond.metrics`` -> ``metrics``."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "__init__"


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every ``owl_eval`` import in the file, relative imports resolved."""
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
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


def violations() -> list[str]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent)
        mine = part(".".join(rel.with_suffix("").parts))
        assert mine in LAYERS, f"{rel}: part {mine!r} has no layer; add it to LAYERS and owl_eval/__init__.py"
        for line, name in imports(path):
            theirs = part(name)
            if theirs == mine:
                continue
            if LAYERS.get(theirs, 99) > LAYERS[mine] or (mine, theirs) in FORBIDDEN:
                out.append(f"{rel}:{line}: {mine} imports {name}")
    return out


def test_no_module_imports_upward():
    found = violations()
    assert [v for v in found if v not in KNOWN] == []
    assert sorted(KNOWN - set(found)) == [], "fixed: remove these from KNOWN"


def test_the_docstring_names_every_layer_in_order():
    doc = owl_eval.__doc__
    positions = {name: doc.index(f"``{name}``") for name in LAYERS if not name.startswith("__")}
    by_layer = sorted(positions, key=lambda n: (LAYERS[n], positions[n]))
    assert by_layer == sorted(positions, key=positions.get)


def test_the_checker_sees_lazy_and_relative_imports(tmp_path):
    """A function-level import is an import too (the checker reads the whole tree, not the module header)."""
    path = PACKAGE / "metrics" / "_layer_probe.py"
    path.write_text("def f():\n    from owl_eval.runner import app\n    from ..formats import npz\n")
    try:
        found = {v.split(": ", 1)[1] for v in violations() if "_layer_probe" in v}
    finally:
        path.unlink()
    assert found == {"metrics imports owl_eval.runner", "metrics imports owl_eval.formats"}


def test_metrics_and_formats_agree_on_the_l2logger_timestamp_format():
    from owl_eval.formats.l2logger import TIMESTAMP_FORMAT
    from owl_eval.protocols.lifelong_rl.metrics.pipeline import TIMESTAMP_FORMAT as METRICS_FORMAT

    assert METRICS_FORMAT == TIMESTAMP_FORMAT == "%Y%m%dT%H%M%S.%f"


@pytest.mark.parametrize("name", ["ond", "continual", "trajectory", "lifelong_rl"])
def test_protocol_plots_compute_no_metric(name):
    """A protocol's plots draw the evaluation's figure data: from owl_eval they import the result type only
    (no evaluate_log, KDE levels or detection tables recomputed while drawing)."""
    found = {module for _, module in imports(PACKAGE / "plots" / f"{name}.py")}
    assert found <= {"owl_eval.metrics.results"}
