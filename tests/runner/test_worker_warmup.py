"""A job's process tells the launching process which installed libraries it imported; the next job's fork imports
them first (owl_eval.runner.process.worker): the user's own modules and fork-unsafe libraries are never imported there."""

from __future__ import annotations

import sys
import sysconfig
import types
from pathlib import Path

import pytest

from owl_eval.runner.process import worker


def _fresh_stdlib_module() -> str:
    """A small standard-library module this process has not imported (so its import can be seen)."""
    for name in ("tabnanny", "mailbox", "netrc", "plistlib", "sndhdr", "imghdr", "pyclbr"):
        if name not in sys.modules and (Path(sysconfig.get_paths()["stdlib"]) / f"{name}.py").is_file():
            return name
    pytest.skip("every candidate standard-library module is imported already")


def _job(imports: list[str]):
    def prepare():
        for name in imports:
            __import__(name)
        return None

    return worker.ForkedWorker(prepare, lambda prepared: "done", header=lambda prepared: None)


@pytest.mark.skipif(not worker.fork_wanted(), reason="jobs run in a forked process on Linux only")
def test_the_next_fork_imports_the_libraries_a_job_imported_and_not_the_users(tmp_path, monkeypatch):
    library = _fresh_stdlib_module()
    user = f"users_own_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{user}.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(worker, "_warm_modules", [])

    first = _job([library, user])
    first.prepared()
    assert first.result() == "done"
    first.close()
    # the child imported both; this process has imported neither yet, and knows of the library only
    assert library not in sys.modules and user not in sys.modules
    assert library in worker._warm_modules and user not in worker._warm_modules

    second = _job([])
    try:
        assert library in sys.modules  # imported here before the fork: the second job inherits it
        assert user not in sys.modules
        second.prepared()
        assert second.result() == "done"
    finally:
        second.close()
        sys.modules.pop(library, None)


def test_only_installed_libraries_outside_the_fork_unsafe_ones_are_named(tmp_path, monkeypatch):
    site = Path(sysconfig.get_paths()["purelib"])
    made = {
        "owl_warm_fake_lib": site / "owl_warm_fake_lib" / "__init__.py",  # an installed library
        "torch._owl_warm_fake": site / "torch" / "_owl_warm_fake.py",  # fork-unsafe: left to each job
        "owl_warm_users_agent": tmp_path / "owl_warm_users_agent.py",  # the user's own file
        "owl_warm_builtin_like": None,  # no file at all
    }
    already = set(sys.modules)
    for name, path in made.items():
        module = types.ModuleType(name)
        if path is not None:
            module.__file__ = str(path)
        monkeypatch.setitem(sys.modules, name, module)
    assert worker._library_modules(already) == ["owl_warm_fake_lib"]
