"""Every code block of README.md and docs/*.md is run, composed or checked here (or by test_readme.py).

- ```python blocks are executed as written, each in its own temp folder with ``MLFLOW_TRACKING_URI`` pointing
  to a temp SQLite store; where a block states a value, the value is checked against a hand count.
- ```bash / ```sh / ```console blocks of docs/*.md (and any non-bash shell block of the README; the README's
  ```bash blocks are test_readme.py's) run line by line in a temp workspace, prepared exactly as the README's
  lines are (test_readme.py: small sizes appended, inputs written, ``<run_id>`` filled in), with the docs' own
  placeholders filled from the workspace (``<parent run id>``, ``/abs/path``): in the integration suite
  (integration/commands/test_docs_lines.py; the commands take minutes in all). Lines that cannot run are in
  ``SKIP`` with the reason; the one block that needs a tracking server is run whole, against a real one
  (integration/test_docs_server.py).
  The blocks of docs/TEAM.md that need PostgreSQL are in ``RUN_ELSEWHERE``: integration/test_team_store.py runs
  them against a throwaway PostgreSQL cluster (``.ci/team-store``).
- ```yaml blocks are config files: the first line names ``owl_eval/conf/<group>/<option>.yaml``; the test
  composes the packaged config with the block in a search path, checks that the group's node is the block's
  content, and prepares a job from it (type checks, the agent built and checked for the protocol's methods).
- ```text blocks are trees of the package: every file and folder they name exists (or the block is in
  ``SKIPPED_BLOCKS`` with the reason).

A block in any other language, an untagged block, a new shell line that is neither run nor in ``SKIP``, or a
stale ``SKIP``/``SKIPPED_BLOCKS``/``RUN_ELSEWHERE`` entry fails ``test_every_code_block_is_run_or_listed``.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from tests.runner.test_readme import OND_SMALL, _blocks, _environment, _prepared, _serves_health, run_line

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [PROJECT_ROOT / "README.md", *sorted((PROJECT_ROOT / "docs").glob("*.md"))]
SHELL = ("bash", "sh", "console")
PROTOCOLS = ("ond", "continual", "trajectory", "lifelong_rl")
LANGUAGES = ("python", *SHELL, "yaml", "text")
RAY_LAUNCHER = importlib.util.find_spec("hydra_plugins.hydra_ray_launcher") is not None

# Shell lines of the docs that are not run here, by pattern, with the reason.
SKIP = {
    r"^pip install\b": "installs packages; the test runs in the environment they would install",
    r"^\.ci/ray$": "installs the Ray environment (.venv-ray) and runs tests/runner/test_sweeps_ray.py: .ci/full's own step",
    r"^ray get-auth-token --generate$": "writes a token to ~/.ray; tests/runner/test_sweeps_ray.py passes a fresh "
    "one in RAY_AUTH_TOKEN instead",
    r"^RAY_AUTH_MODE=token RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 ray start\b": "starts a Ray cluster that outlives "
    "the command; tests/runner/test_sweeps_ray.py runs this recipe in the Ray environment",
    r"^RAY_AUTH_MODE=token RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 python -m owl_eval .*ray\.init\.address=": "needs "
    "the cluster of the `ray start` line; tests/runner/test_sweeps_ray.py runs a sweep on such a cluster",
    r"hydra/launcher=submitit_slurm": "needs a Slurm cluster and a tracking server on it",
}
# Skipped only where the condition holds (the line runs elsewhere).
SKIP_UNLESS = {
    r"hydra/launcher=ray\b": (RAY_LAUNCHER, "hydra-ray-launcher is not installed here (the `ray` extra's own venv)"),
    r"^\.venv-ray/bin/python ": (
        (PROJECT_ROOT / ".venv-ray" / "bin" / "python").exists(),
        "the Ray venv of SWEEPS.md is absent here (tests/runner/test_sweeps_ray.py skips itself without it)",
    ),
}
# Whole blocks that are not code, by (document, first line), with the reason.
SKIPPED_BLOCKS = {
    ("FORMATS.md", "<base>/<scenario_name>-<timestamp>/"): "a directory layout with placeholders, not a command; "
    "our writer's output is checked against it in tests/metrics/test_l2_log.py (round trip and layout)",
    ("README.md", "groups by Top-1 accuracy (higher is better), mean ± 95% CI over seeds:"): "the output of a sweep, "
    "not a command; tests/runner/test_sweeps.py checks the printed lines against the jobs' values",
}
# Whole shell blocks run by another test, by (document, start of the first line), with the reason.
_TEAM_STORE = "needs PostgreSQL: integration/test_team_store.py runs it on a throwaway cluster (.ci/team-store)"
RUN_ELSEWHERE = {
    ("TEAM.md", "sudo -u postgres createuser"): "administers the lab's PostgreSQL server; "
    "integration/test_team_store.py makes its throwaway cluster with initdb and createdb instead",
    ("TEAM.md", "mlflow server --backend-store-uri postgresql://"): _TEAM_STORE,
    ("TEAM.md", "export MLFLOW_TRACKING_URI="): _TEAM_STORE + ", the sweep sent to that server",
    ("TEAM.md", "python -m owl_eval -m "): _TEAM_STORE + ", the sweep sent straight to the database",
}
# The block the test runs whole: a tracking server, the environment that points at it, a sweep sent to it.
SERVER_BLOCK = "mlflow server --backend-store-uri sqlite:"


@dataclass(frozen=True)
class Block:
    document: str
    line: int  # of the opening fence, 1-based
    language: str
    text: str

    @property
    def first_line(self) -> str:
        return self.text.splitlines()[0].strip() if self.text.strip() else ""

    @property
    def id(self) -> str:
        return f"{self.document}:{self.line}"


def code_blocks() -> list[Block]:
    """Every fenced block of README.md and docs/*.md, with its language ('' when untagged)."""
    found = []
    for path in DOCUMENTS:
        lines = path.read_text().splitlines()
        i = 0
        while i < len(lines):
            fence = re.match(r"^```(\S*)\s*$", lines[i])
            if fence:
                end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
                found.append(Block(path.name, i + 1, fence[1], "\n".join(lines[i + 1 : end]) + "\n"))
                i = end
            i += 1
    return found


def commands(block: Block) -> list[str]:
    """The commands of a shell block: continuation lines joined, comment-only lines and console output left out."""
    text = block.text.replace("\\\n", " ")
    lines = text.splitlines()
    if block.language == "console":
        lines = [line.strip()[2:] for line in lines if line.strip().startswith("$ ")]
    return [re.sub(r"\s+", " ", line.strip()) for line in lines if line.strip() and not line.lstrip().startswith("#")]


def _run_elsewhere(block: Block) -> bool:
    return any(block.document == doc and block.first_line.startswith(start) for doc, start in RUN_ELSEWHERE)


def _tested_elsewhere(block: Block) -> bool:
    if block.document == "README.md" and block.language == "bash":  # test_readme.py runs every line
        return True
    return block.language in SHELL and _run_elsewhere(block)


def shell_lines() -> list[tuple[Block, str]]:
    return [
        (block, line)
        for block in code_blocks()
        if block.language in SHELL and not _tested_elsewhere(block) and SERVER_BLOCK not in block.text
        for line in commands(block)
    ]


def _skip_reason(line: str) -> str | None:
    for pattern, reason in SKIP.items():
        if re.search(pattern, line):
            return reason
    for pattern, (runs, reason) in SKIP_UNLESS.items():
        if re.search(pattern, line) and not runs:
            return reason
    return None


# -- the inventory ------------------------------------------------------------------------------------------
def test_every_code_block_is_run_or_listed():
    blocks = code_blocks()
    assert len(blocks) >= 25, len(blocks)
    for block in blocks:
        assert block.language in LANGUAGES, (
            f"{block.id}: a ```{block.language} block; tag it with one of {LANGUAGES} (and make this test run it)"
        )
        if block.language == "yaml":
            assert re.match(r"#\s*(owl_eval/)?conf/\S+\.yaml$", block.first_line), (
                f"{block.id}: a YAML block must be a config file whose first line names [owl_eval/]conf/<group>/<x>.yaml"
            )
        if block.language == "text" and (block.document, block.first_line) not in SKIPPED_BLOCKS:
            assert block.first_line.startswith("owl_eval/"), f"{block.id}: not a tree of the package: list it"
        if block.language in SHELL and not _tested_elsewhere(block):
            assert commands(block), f"{block.id}: a shell block without a command"
    keys = {(b.document, b.first_line) for b in blocks}
    for key in SKIPPED_BLOCKS:
        assert key in keys, f"SKIPPED_BLOCKS entry {key} matches no block any more"
    for doc, start in RUN_ELSEWHERE:
        starting = [b for b in blocks if b.document == doc and b.language in SHELL and b.first_line.startswith(start)]
        assert len(starting) == 1, f"RUN_ELSEWHERE entry {(doc, start)} matches {len(starting)} shell blocks, not one"
    lines = [line for _, line in shell_lines()]
    for pattern in [*SKIP, *SKIP_UNLESS]:
        assert any(re.search(pattern, line) for line in lines), f"SKIP pattern {pattern!r} matches no docs line"
    assert sum(SERVER_BLOCK in b.text for b in blocks) == 1


def _path_candidates(token: str, document: Path) -> list[Path] | None:
    """Where a path named in a document must exist (globbing ``<placeholder>`` and ``*``), or None when the
    token is not a path of this checkout (an artifact name, a config override, a URL)."""
    token = token.split("=", 1)[-1].split("#", 1)[0]
    if "://" in token or "/" not in token or not re.match(r"[\w.]", token):
        return None
    first = token.split("/", 1)[0]
    if first in (".", ".."):  # the working folder (./mlflow.db) or beside the checkout (../shared)
        return None
    if first in ("owl_eval", "tests", "docs", "benchmarks", ".ci"):
        bases = [PROJECT_ROOT]
    elif (PROJECT_ROOT / "owl_eval" / first).is_dir() and first != "conf" and token.endswith((".py", ".yaml", "/")):
        bases = [PROJECT_ROOT / "owl_eval"]  # a path inside the package, written without its owl_eval/
    else:
        return None
    token = token.rstrip("/")
    if "<protocol>" in token:  # a claim about every protocol: each one's file must exist
        paths = [base / token.replace("<protocol>", p) for base in bases for p in PROTOCOLS]
        return paths if all(path.exists() for path in paths) else []
    pattern = re.sub(r"<[^>]*>", "*", token)
    return [match for base in bases for match in base.glob(pattern)]


def test_docs_name_files_and_modules_that_exist():
    """Every path of this checkout a document names (in backticks or as a link) exists, at least one file
    for a pattern with a ``<placeholder>``; every dotted ``owl_eval.x.y`` name imports."""
    import importlib

    checked = 0
    for path in DOCUMENTS:
        text = path.read_text()
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        for token in set(re.findall(r"`([^`\s]+)`", prose)):
            token, _, test_name = token.partition("::")  # a pytest node id: the file, then a test defined in it
            candidates = _path_candidates(token, path)
            if candidates is not None:
                assert candidates, f"{path.name}: `{token}` names nothing in this checkout"
                if test_name:
                    name = test_name.split("[", 1)[0]
                    assert any(re.search(rf"^def {name}\(", c.read_text(), re.M) for c in candidates if c.is_file()), (
                        f"{path.name}: `{token}::{test_name}`: no test {name} there"
                    )
                checked += 1
        for link in set(re.findall(r"\]\(([^)#\s]+)\)", prose)):  # links: relative to the document
            if "://" not in link:
                assert (path.parent / link).exists(), f"{path.name}: link ({link}) leads nowhere"
                checked += 1
        for name in set(re.findall(r"`(owl_eval(?:\.\w+)+)`", text)):
            parts = name.split(".")
            package = PROJECT_ROOT / "owl_eval"
            if not ((package / parts[1]).is_dir() or (package / f"{parts[1]}.py").is_file()):
                continue  # an MLflow tag of ours (owl_eval.config_hash, ...), not a module
            for cut in range(len(parts), 0, -1):
                try:
                    obj = importlib.import_module(".".join(parts[:cut]))
                    break
                except ImportError:
                    continue
            for attribute in parts[cut:]:
                assert hasattr(obj, attribute), f"{path.name}: `{name}` ({attribute} not found)"
                obj = getattr(obj, attribute)
            checked += 1
    assert checked >= 40, checked


# -- ```text: trees of the package ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "block",
    [b for b in code_blocks() if b.language == "text" and (b.document, b.first_line) not in SKIPPED_BLOCKS],
    ids=lambda b: b.id,
)
def test_tree_names_what_exists(block):
    """Each name in the tree (``name/``, ``name.py``, ``name.yaml``) exists under the tree's root, or under the
    folder whose line it continues (``metrics/  ... ond/, continual.py``)."""
    root = PROJECT_ROOT / block.first_line.split()[0]
    assert root.is_dir(), root
    names = 0
    folder = root
    for line in block.text.splitlines()[1:]:
        indent = len(line) - len(line.lstrip())
        tokens = re.findall(r"(?<![\w./<])([a-z_0-9]+(?:/|\.py|\.yaml))(?=[\s,)]|$)", line)
        if indent <= 2 and tokens:  # a line of the root: its first name is the folder the next lines continue
            folder = root / tokens[0]
        for token in tokens:
            assert (root / token).exists() or (folder / token).exists(), f"{block.id}: {token} ({line.strip()})"
            names += 1
    assert names >= 8


# -- ```python ---------------------------------------------------------------------------------------------
def _python_blocks():
    for block in code_blocks():
        if block.language == "python":
            runs_a_job = re.search(r"\b(run|evaluate)\(\[", block.text) is not None
            yield pytest.param(block, marks=[pytest.mark.slow] if runs_a_job else [], id=block.id)


def _check_python_api(namespace: dict, store: Path) -> None:
    """README 'Python API': the job ran and logged; the hand-made trial's numbers, counted by hand: the red
    light is sample 3, the first p_world_changed >= 0.5 is sample 4, so M1 = 4 - 3 = 1 and the one novel
    trial is detected (M2 = 100 %); no baseline, so M3 is N/A."""
    from mlflow.tracking import MlflowClient

    assert 0.0 < namespace["scores"]["top1"] <= 1.0
    values, na = namespace["result"].values, namespace["result"].na
    assert values["m1_mean_fn_cdt"] == 1.0 and values["m2_cdt_pct"] == 100.0
    # top-1 of the trial: samples 0, 1, 2, 5 are known (classes 1, 2, 1, 2), column 1 always scores highest
    # among known columns, novel samples 3, 4 have p_unknown 0.8/0.9 (column 0 highest): 4 of 6 correct
    assert values["top1"] == pytest.approx(4 / 6)
    assert "baseline" in na["m3_nrp_top1"]
    client = MlflowClient(tracking_uri=f"sqlite:///{store}")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert [r.info.status for r in runs] == ["FINISHED"]
    assert runs[0].data.metrics["top1"] == pytest.approx(namespace["scores"]["top1"])


def _check_agent_class(namespace: dict, store: Path) -> None:
    """README agent: the class has the three methods the OND protocol calls (it runs in test_readme.py)."""
    agent = namespace["NearestMeanAgent"]()
    assert all(callable(getattr(agent, m, None)) for m in ("fit", "start_trial", "predict_batch"))


def _check_added_metric(namespace: dict, store: Path) -> None:
    """docs/EXTENDING.md 'A metric': the decorated function is computed and declared. By hand: the diagonal of A
    is 0.9, 0.8, so the mean after update 0 is 0.9 and after update 1 is 0.85. The block registered the metric
    for the whole process: it is removed here, and the registry's cached declarations with it."""
    from owl_eval.evaluation import registry
    from owl_eval.metrics.keys import MetricKey
    from owl_eval.protocols.continual.metrics import CONTINUAL

    try:
        results = namespace["results"]
        assert results["learning_accuracy"] == pytest.approx(0.85, abs=1e-12)
        np.testing.assert_allclose(results.series["learning_accuracy"].values, [0.9, 0.85], atol=1e-12)
        registry.forget()
        by_task = MetricKey("learning_accuracy", axis="task")
        assert registry.spec_for("continual", by_task).direction == "maximize"
    finally:
        CONTINUAL.remove(namespace["_learning_accuracy_series"])
        registry.forget()
    assert registry.spec_for("continual", "learning_accuracy") is None


# what each python block must have computed, by a line that identifies the block
PYTHON_CHECKS = {
    "class NearestMeanAgent": _check_agent_class,
    "program_metrics([trial]": _check_python_api,
    "def _learning_accuracy_series": _check_added_metric,
}


@pytest.mark.parametrize("block", list(_python_blocks()))
def test_python_block_runs(block, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    store = tmp_path / "store" / "mlflow.db"
    store.parent.mkdir()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{store}")
    namespace: dict = {"__name__": "__docs__"}
    exec(compile(block.text, block.id, "exec"), namespace)
    checks = [check for key, check in PYTHON_CHECKS.items() if key in block.text]
    assert len(checks) == 1, f"{block.id}: name what this block must compute in PYTHON_CHECKS"
    checks[0](namespace, store)


# -- ```yaml: config files ----------------------------------------------------------------------------------
# the experiment an agent config of each protocol is prepared in (OND's is the default config); a config that needs
# another environment of its protocol is listed by name
AGENT_EXPERIMENTS = {
    "continual": "continual_split_digits",
    "trajectory": "trajectory_crowd",
    "lifelong_rl": "lifelong_rl_cartpole_syllabus",
    "lifelong_rl/tella_q": "lifelong_rl_frozenlake_syllabus",  # a tabular agent: discrete observations
}


def rl_paths(tmp_path: Path) -> list[str]:
    """The lifelong-RL protocol's folders, which default to Hydra's runtime folders (not set when composing)."""
    return [f"protocol.log_dir={tmp_path / 'l2log'}", f"protocol.ste.dir={tmp_path / 'ste'}"]


@pytest.mark.parametrize("block", [b for b in code_blocks() if b.language == "yaml"], ids=lambda b: b.id)
def test_yaml_block_composes_and_prepares_a_job(block, tmp_path, monkeypatch):
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from owl_eval.paths import CONFIG_DIR
    from owl_eval.runner.config.resolvers import register_resolvers
    from owl_eval.runner.job.live import prepare_live

    path = re.match(r"#\s*(?:owl_eval/)?conf/(\S+)\.yaml$", block.first_line)[1]
    group, option = path.split("/", 1)
    (tmp_path / "conf" / path).parent.mkdir(parents=True)
    (tmp_path / "conf" / f"{path}.yaml").write_text(block.text)
    # a README agent config names the README's agent class: write it where the config imports it from
    (tmp_path / "my_agents.py").write_text(next(b for b in _blocks("python") if "class NearestMeanAgent" in b))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    register_resolvers()
    # an agent of another protocol than the default config's (OND) is prepared in one of that protocol's experiments
    experiment = (
        (AGENT_EXPERIMENTS.get(option) or AGENT_EXPERIMENTS.get(option.split("/")[0])) if group == "agent" else None
    )
    if experiment and "lifelong_rl" in experiment:
        pytest.importorskip("gymnasium")
    for module, needed in (("torch", r"\btorch\."), ("stable_baselines3", r"agents\.sb3\.")):
        if re.search(needed, block.text):  # an adapter config of an optional extra (not in .[all])
            pytest.importorskip(module, reason=f"{block.id} needs {module}, an optional extra")
    overrides = [f"+experiment={experiment}"] if experiment else []
    if experiment and "lifelong_rl" in experiment:  # paths that name Hydra's run folder, here in tmp_path
        overrides += rl_paths(tmp_path)
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(
            "config",
            overrides=[*overrides, f"{group}={option}", f"hydra.searchpath=[file://{tmp_path / 'conf'}]"],
        )
    package = re.search(r"#\s*@package\s+(\S+)", block.text)
    node = OmegaConf.select(cfg, package[1] if package else group)
    assert OmegaConf.to_container(node) == OmegaConf.to_container(OmegaConf.create(block.text))
    job = prepare_live(cfg)  # types every value, builds the parts, checks the agent for the protocol's methods
    agent = job.parts["agent"]
    if group == "agent":
        assert type(agent).__name__ == node["_target_"].rsplit(".", 1)[-1]
        for key, value in node.items():
            if key.startswith("_") and key.endswith("_"):  # Hydra's own keys (_target_, _recursive_)
                continue
            if isinstance(value, Mapping):
                # an adapter's nested object, built by Hydra, then held (with _recursive_: false the adapter builds
                # it itself when the protocol starts: the tella agent needs the environment's spaces)
                if "_target_" in value and node.get("_recursive_", True) and hasattr(agent, key):
                    built = getattr(agent, key)
                    assert built is not None and not isinstance(built, Mapping), (key, built)
                continue
            assert getattr(agent, key) == value


# -- running a shell line of the docs (integration/commands/test_docs_lines.py, integration/test_docs_server.py) --
def _sweep_parent(ws: Path) -> str:
    """A sweep parent run of the workspace store (one small sweep is run when there is none)."""
    from mlflow.tracking import MlflowClient

    store = ws / "outputs" / "mlflow.db"
    if store.exists():
        client = MlflowClient(tracking_uri=f"sqlite:///{store}")
        ids = [e.experiment_id for e in client.search_experiments()]
        parents = client.search_runs(ids, filter_string="tags.`owl_eval.kind` = 'sweep'") if ids else []
        if parents:
            return parents[0].info.run_id
    words = ["python", "-m", "owl_eval", "-m", "+experiment=ond_system_detection", "seed=0,1", *OND_SMALL]
    proc = run_line([*words, "progress=false", "figures=false"], ws, _environment(ws))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return _sweep_parent(ws)


def _filled(line: str, ws: Path) -> str:
    """The docs' own placeholders, filled from the workspace."""
    if "<parent run id>" in line:
        line = line.replace("<parent run id>", _sweep_parent(ws))
    return line


def _line_id(block: Block, line: str) -> str:
    return f"{block.id}:" + re.sub(r"[^\w=+./,-]+", "_", line.split(" #")[0])[:60]


def _prepare(line: str, ws: Path) -> tuple[list[str], dict]:
    """As test_readme.py prepares a README line; a compare of one sweep (``--sweep``) needs no inputs."""
    line = _filled(line, ws)
    if "--sweep" in line:
        return shlex.split(line, comments=True), _environment(ws)
    return _prepared(line, ws)


def _run(words: list[str], env: dict, ws: Path, free_port) -> subprocess.CompletedProcess | None:
    if words[:2] == ["mlflow", "ui"]:
        _serves_health(words, env, ws, free_port)
        return None
    cwd = ws
    if "pytest" in words[:3]:  # the suite does not run itself: the line's tests are collected
        # -n 0: collected in one process (pyproject's addopts would start pytest-xdist workers to collect)
        words, cwd = [*words, "--collect-only", "-q", "-n", "0"], PROJECT_ROOT
    proc = run_line(words, cwd, env)
    assert proc.returncode == 0, f"{shlex.join(words)}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return proc
