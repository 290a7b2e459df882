"""The README's promises: every shell line of every ```bash block is taken (run, or listed where another test runs
it), its agent example works, the experiments it names exist; and the machinery that runs a README line.

The lines themselves run in the integration suite (integration/commands/test_readme_lines.py: minutes in all), each
as written in a temp workspace (its own ``outputs/mlflow.db`` SQLite store), with:
- the words of ``SMALL`` appended (small sizes; Hydra takes the last value of a key), by the first pattern found
  in the line; in a ``-m`` sweep every command-line list is cut to its first two values (``seed`` to one);
- the inputs a line reads (``INPUTS``: sail-on-client CSVs, l2logger logs, a Renate results dict, ...) written
  into the workspace first, from the hand-made fixtures of tests/sources (or copied: the repository's
  tests/fixtures/ and the shipped samples of examples/results/);
- the README's config files (a ```yaml block whose first line names ``owl_eval/conf/<group>/<option>.yaml``)
  written under the workspace's ``conf/`` and added with ``hydra.searchpath``, so the package is not touched;
- ``<run_id>`` replaced by a finished run of the workspace store that has a record artifact;
- ``/path/to/eth_ucy`` replaced by the shared ETH/UCY folder (skipped when absent);
- the lines another test runs as written (``RUN_ELSEWHERE``: the ``mlflow ui`` line drives the browser test of
  the integration suite, the test command is CI's own) are not run twice.
``pip install`` lines are skipped: the test runs inside the environment they would install.
The README's other blocks (python, yaml, text) and every block of docs/*.md are checked by test_docs.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from owl_eval.datasets.classification import DigitsDomain
from owl_eval.paths import config_file
from owl_eval.protocols.ond.driver import OndDriver

PROJECT_ROOT = Path(__file__).resolve().parents[2]
README = PROJECT_ROOT / "README.md"
ETH_UCY = PROJECT_ROOT.parent / "shared" / "data" / "eth_ucy"

SKIP = {r"^pip install\b": "installs packages; the test runs in the environment they would install"}
# Lines another test runs as written, by pattern, with where: they are not run twice.
RUN_ELSEWHERE = {
    r"^mlflow ui\b": "integration/browser/test_mlflow_ui.py starts the UI with this very line (readme_ui_command) "
    "and drives it in Chromium",
    r"^python -m pytest$": ".ci/run runs this very command: the test suite is that line",
    r"^python -m owl_eval -m \+experiment=ond_system_detection agent=ond/knn_novelty,ond/closed_world seed=0,1,2( "
    r"hydra/launcher=joblib)?$": "integration/commands/test_launchers.py runs both lines (all three seeds) and compares their runs",
    r"^MLFLOW_TRACKING_URI=\S+ mlflow artifacts download |^owl-eval-evaluate \+source=record source\.path=downloaded/": "integration/commands/test_readme_lines.py runs the two lines in turn (the record downloaded, then re-scored)",
}
# Lines that need an optional package (an extra not in .[all]): skipped with the reason where it is not installed.
NEEDS = {
    r"agent=lifelong_rl/(sb3|dqn)\b": ("stable_baselines3", 'needs the sb3 extra (pip install -e ".[sb3]")'),
    r"agent=(ond|continual)/torch": ("torch", 'needs the torch extra (pip install -e ".[torch]")'),
}
OND_SMALL = [
    "protocol.num_trials=2",
    "protocol.trials_without_novelty=1",
    "protocol.pre_novelty=20",
    "protocol.post_novelty=40",
    "metrics.asymptotic_width=20",
]
RL_SMALL = [
    "protocol.syllabus.generate.train_episodes=8",
    "protocol.syllabus.generate.test_episodes=2",
    "protocol.syllabus.generate.cycles=1",
    "protocol.ste.episodes=6",
]
# Appended to a line by the first pattern found in it (after the line's own words: they win over its values).
SMALL = [
    # a command-line list replaces the experiment's own sweep list (Hydra refuses hydra.sweeper.params.* lists)
    # the torch and SB3 adapters' lines: fewer epochs and learning steps (a line that sets them keeps its own)
    (r"agent=ond/torch(?!.*agent\.epochs=)", [*OND_SMALL, "agent.epochs=3"]),
    (r"agent=lifelong_rl/(sb3|dqn)\b(?!.*timesteps_per_episode=)", [*RL_SMALL, "agent.timesteps_per_episode=20"]),
    (r"\+experiment=ond_all_domains", ["seed=0", "agent=ond/knn_novelty", "domain=digits", *OND_SMALL]),
    (r"\+experiment=ond_", OND_SMALL),
    (r"\+experiment=continual_", ["agent.epochs=1"]),
    (r"\+experiment=trajectory_crowd", ["domain.num_train_scenes=6", "domain.num_test_scenes=4"]),
    (r"\+experiment=trajectory_eth_ucy", ["domain.stride=40"]),
    (r"\+experiment=(lifelong_)?rl_\w+_ste", ["protocol.ste.episodes=6"]),
    (r"\+experiment=(lifelong_)?rl_ant_a", ["protocol.ste.missing=skip"]),  # ANT_A lists its blocks: nothing to shrink
    (r"\+experiment=(lifelong_)?rl_ant_b", ["protocol.ste.missing=skip", *RL_SMALL]),
    # Stable-Baselines3: a short rollout per logged episode instead of one full episode's 200 steps
    (r"agent=lifelong_rl/sb3\b", [*RL_SMALL, "agent.timesteps_per_episode=32", "agent.algo_kwargs.n_steps=32"]),
    (r"agent=lifelong_rl/dqn\b", [*RL_SMALL, "agent.timesteps_per_episode=32", "agent.algo_kwargs.learning_starts=32"]),
    (r"\+experiment=(lifelong_)?rl_", RL_SMALL),
    # the hand-made results of tests/sources write known classes 0..K-1 and novel ones negative (the repository's
    # fixtures and the shipped samples of examples/results/ are read as they are)
    (r"\+source=sailon\b(?!.*(tests/fixtures|examples/results)/)", ["source.class_index=zero_based_known"]),
    # the hand-made arrays hold 2 predictions per agent
    (r"\+source=trajectories\b(?!.*examples/results/)", ["metrics.k_values=[2]"]),
]
OWL_EVAL = re.compile(r"(python -m owl_eval\b|owl-eval\b|owl-eval-evaluate\b|owl-eval-compare\b)")
RUNS_A_JOB = re.compile(
    r"(python -m owl_eval( |$)|python -m owl_eval\.runner\.evaluate\b|owl-eval( |$)|owl-eval-evaluate\b)"
)
TAKES_CONFIG_GROUPS = re.compile(r"(python -m owl_eval( |$)|owl-eval( |$))")


def _blocks(language: str, documents: tuple[Path, ...] = (README,)) -> list[str]:
    return [b for doc in documents for b in re.findall(rf"```{language}\n(.*?)```", doc.read_text(), flags=re.S)]


def bash_lines(documents: tuple[Path, ...] = (README,)) -> list[str]:
    """Every command of every ```bash block: continuation lines joined, comment-only lines left out."""
    lines = []
    for block in _blocks("bash", documents):
        for line in block.replace("\\\n", " ").splitlines():
            if line.strip() and not line.lstrip().startswith("#"):
                lines.append(re.sub(r"\s+", " ", line.strip()))
    return lines


def readme_configs() -> dict[str, str]:
    """The README's config files: ```yaml blocks whose first line is ``# conf/<path>.yaml`` (the reader's own folder,
    given with ``--config-dir conf``) or ``# owl_eval/conf/<path>.yaml`` (docs/ show the shipped ones)."""
    found = {}
    for block in _blocks("yaml"):
        match = re.match(r"#\s*(?:owl_eval/)?conf/(\S+\.yaml)\s*\n", block)
        if match:
            found[match[1]] = block
    return found


# -- inputs a README line reads, written into the workspace ---------------------------------------------------
def _sailon(ws: Path, line: str) -> None:
    from tests.sources.test_sailon_source import write_fixture

    session = re.search(r"source\.session=(\S+)", line)
    write_fixture(ws / re.search(r"source\.path=(\S+)", line)[1].rstrip("/"), session=session[1] if session else "S1")


def _l2logger(ws: Path, line: str) -> None:
    from tests.sources.test_l2logger_source import write_log, write_ste

    log_path = Path(re.search(r"source\.path=(\S+)", line)[1])
    write_log(ws / log_path.parent, name=log_path.name)
    for ste in re.findall(r"source\.ste_paths=\[([^\]]*)\]", line)[0].split(","):
        write_ste(ws / ste.strip().rstrip("/"))


def _accuracy_matrix(ws: Path, line: str) -> None:
    from tests.sources.test_accuracy_matrix_source import CSV, A, B, N

    path = ws / re.search(r"source\.path=(\S+)", line)[1]
    path.write_text(
        json.dumps({"accuracy": A, "accuracy_init": [B], "num_instances": N}) if path.suffix == ".json" else CSV
    )


def _trajectories(ws: Path, line: str) -> None:
    from tests.sources.test_trajectories_source import arrays

    np.savez(ws / re.search(r"source\.path=(\S+)", line)[1], **arrays())


def _runs_to_compare(ws: Path, line: str) -> None:
    """Two small seeds of the experiment a compare line names, unless an earlier line already ran it."""
    from mlflow.tracking import MlflowClient

    from owl_eval.runner.api import run

    name = re.search(r"experiment=(\w+)", line)[1]
    store = ws / "outputs" / "mlflow.db"
    if store.exists() and MlflowClient(tracking_uri=f"sqlite:///{store}").get_experiment_by_name(name) is not None:
        return
    for seed in (0, 1):
        small = next((extra for pattern, extra in SMALL if re.search(pattern, f"+experiment={name}")), [])
        run(
            [
                f"+experiment={name}",
                f"seed={seed}",
                f"tracking.store_dir={ws / 'outputs'}",
                *small,
                "figures=false",
                "progress=false",
            ],
            output_dir=ws / "jobs" / str(seed),
        )


def _shipped_samples(ws: Path, line: str) -> None:
    """A line that scores the shipped samples (``examples/results/...``) finds them in the workspace."""
    if not (ws / "examples" / "results").exists():
        shutil.copytree(
            PROJECT_ROOT / "examples" / "results",
            ws / "examples" / "results",
            ignore=shutil.ignore_patterns("__pycache__", "*.py", "*.md"),
        )


def _shipped_data(ws: Path, line: str) -> None:
    """A line that reads the sample data sets (``examples/data/...``) finds them in the workspace."""
    if not (ws / "examples" / "data").exists():
        shutil.copytree(
            PROJECT_ROOT / "examples" / "data",
            ws / "examples" / "data",
            ignore=shutil.ignore_patterns("__pycache__", "*.py"),
        )


def _repository_fixtures(ws: Path, line: str) -> None:
    """A line that reads the repository's own fixtures (``tests/fixtures/<name>/...``) finds them in the workspace."""
    for name in set(re.findall(r"tests/fixtures/([\w.-]+)", line)):
        if not (ws / "tests" / "fixtures" / name).exists():
            shutil.copytree(PROJECT_ROOT / "tests" / "fixtures" / name, ws / "tests" / "fixtures" / name)


# the patterns that write hand-made inputs leave the lines that read the shipped samples alone
INPUTS = {
    r"(runner\.compare|owl-eval-compare)\b": _runs_to_compare,
    r"tests/fixtures/": _repository_fixtures,
    r"examples/results/": _shipped_samples,
    r"examples/data/": _shipped_data,
    r"\+source=sailon\b(?!.*(tests/fixtures|examples/results)/)": _sailon,
    r"\+source=l2logger\b(?!.*examples/results/)": _l2logger,
    r"\+source=accuracy_matrix\b(?!.*examples/results/)": _accuracy_matrix,
    r"\+source=trajectories\b(?!.*examples/results/)": _trajectories,
}


# -- running one line --------------------------------------------------------------------------------------
def make_workspace(ws: Path) -> Path:
    """A folder as a README reader has it: the custom agent's module and the README's config files."""
    (ws / "my_agents.py").write_text(next(b for b in _blocks("python") if "class NearestMeanAgent" in b))
    for path, text in readme_configs().items():
        (ws / "conf" / path).parent.mkdir(parents=True, exist_ok=True)
        (ws / "conf" / path).write_text(text)
    return ws


def _environment(ws: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "MLFLOW_RUN_ID", "HYDRA_FULL_ERROR")}
    # the venv's python, mlflow and owl-eval scripts; my_agents.py and this checkout importable
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = f"{ws}{os.pathsep}{PROJECT_ROOT}"
    return env | {"MLFLOW_DISABLE_TELEMETRY": "true"}


def _last_wins(words: list[str]) -> list[str]:
    """A key the small sizes set replaces the line's own value for it (``protocol.num_trials=50`` becomes ``=2``):
    the command line refuses one key given twice with different values."""
    keys = [w.lstrip("+~").split("=", 1)[0] if "=" in w and not w.startswith("-") else None for w in words]
    return [w for i, (w, k) in enumerate(zip(words, keys)) if k is None or k not in keys[i + 1 :]]


def _narrow_sweep(words: list[str]) -> list[str]:
    """In a ``-m`` line, each ``key=a,b,c`` list keeps its first two values (``seed``: one)."""
    if "-m" not in words and "--multirun" not in words:
        return words
    out = []
    for word in words:
        key, sep, value = word.partition("=")
        if sep and "," in value and not value.startswith(("[", "'", '"')) and "(" not in value:
            value = ",".join(value.split(",")[: 1 if key == "seed" else 2])
        out.append(f"{key}{sep}{value}")
    return out


def _run_with_record(ws: Path) -> str:
    """A finished OND job of the workspace store with a record artifact (one small OND job when there is none):
    the README downloads a record to re-score it at another threshold."""
    from mlflow.tracking import MlflowClient

    from owl_eval.runner.api import run

    store = ws / "outputs" / "mlflow.db"
    if store.exists():
        client = MlflowClient(tracking_uri=f"sqlite:///{store}")
        for found in client.search_runs(
            [e.experiment_id for e in client.search_experiments()],
            filter_string="attributes.status = 'FINISHED' and tags.protocol = 'ond'",
            order_by=["start_time DESC"],
        ):
            if any(a.path == "record" for a in client.list_artifacts(found.info.run_id)):
                return found.info.run_id
    run(
        [
            "+experiment=ond_given_detection",
            f"tracking.store_dir={ws / 'outputs'}",
            *OND_SMALL,
            "figures=false",
            "progress=false",
        ],
        output_dir=ws / "job",
    )
    return _run_with_record(ws)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a finder that refuses the module, or a module set to None
        return False


def _prepared(line: str, ws: Path) -> tuple[list[str], dict]:
    """The line's words with placeholders filled and small sizes appended, and its environment."""
    for pattern, reason in SKIP.items():
        if re.search(pattern, line):
            pytest.skip(reason)
    for pattern, (module, reason) in NEEDS.items():
        if re.search(pattern, line) and not _installed(module):
            pytest.skip(reason)
    if "/path/to/eth_ucy" in line:
        if not ETH_UCY.is_dir():
            pytest.skip(f"the shared ETH/UCY folder {ETH_UCY} is absent")
        line = line.replace("/path/to/eth_ucy", str(ETH_UCY))
    if "<run_id>" in line:
        line = line.replace("<run_id>", _run_with_record(ws))
    for pattern, write in INPUTS.items():
        if re.search(pattern, line):
            write(ws, line)
    env = _environment(ws)
    words = shlex.split(line.replace("$PWD", str(ws)), comments=True)
    while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=.*", words[0]):  # VAR=value command ...
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    words = _narrow_sweep(words)
    if RUNS_A_JOB.search(line):
        words += next((extra for pattern, extra in SMALL if re.search(pattern, line)), [])
        words += ["figures=false", "progress=false"]
        words = _last_wins(words)
    if TAKES_CONFIG_GROUPS.search(line) and (ws / "conf").is_dir():
        words.append(f"hydra.searchpath=[file://{ws / 'conf'}]")
    return words, env


def _serves_health(words: list[str], env: dict, ws: Path, port: int) -> None:
    words = [str(port) if previous == "--port" else w for previous, w in zip(["", *words], words)]
    proc = subprocess.Popen(
        words, cwd=ws, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as response:
                    assert response.status == 200
                    return
            except OSError:
                time.sleep(1)
        pytest.fail("mlflow ui did not answer /health within 120 s")
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)


def run_line(words: list[str], cwd: Path, env: dict) -> subprocess.CompletedProcess:
    """One prepared line: ``owl-eval`` and ``owl-eval-evaluate`` (also spelled ``python -m owl_eval...``) run in the
    test process through the function the console scripts call (tests/inprocess.py); a sweep on a launcher that
    starts worker processes (joblib, Ray, submitit) and every other command run as a subprocess.
    ``tests/runner/test_entry_points.py`` and the tests marked ``subprocess`` run the real command lines."""
    from tests.inprocess import run_words

    if any(w.startswith("hydra/launcher=") for w in words):
        return subprocess.run(
            words, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
        )
    return run_words(words, cwd=cwd, env=env, timeout=600)


def _line_id(line: str) -> str:
    return re.sub(r"[^\w=+./,-]+", "_", line.split(" #")[0])[:80]


def distinct(lines: list[str]) -> list[str]:
    """The lines without repeats: a command the README shows twice (comments aside) runs once."""
    seen: set[tuple[str, ...]] = set()
    out = []
    for line in lines:
        words = tuple(shlex.split(line, comments=True))
        if words not in seen:
            seen.add(words)
            out.append(line)
    return out


def lines_run_here(lines: list[str]) -> list[str]:
    return [
        line for line in distinct(lines) if not any(re.search(p, line.split(" #")[0].strip()) for p in RUN_ELSEWHERE)
    ]


def test_every_readme_line_is_taken_and_the_tables_still_match():
    lines = bash_lines()
    assert len(lines) >= 10 and any(OWL_EVAL.search(line) for line in lines)
    # a table pattern that matches no line any more is stale: the README changed, update the table (the docs'
    # lines, run by tests/runner/test_docs.py with these tables, count too)
    documented = lines + bash_lines(tuple(sorted((PROJECT_ROOT / "docs").glob("*.md"))))
    for pattern in [p for p, _ in SMALL if "(lifelong_)?rl_" not in p] + list(INPUTS) + list(NEEDS):
        assert any(re.search(pattern, line) for line in documented), f"no documented line matches {pattern!r} any more"
    for pattern in RUN_ELSEWHERE:
        assert any(re.search(pattern, line.split(" #")[0].strip()) for line in lines), f"{pattern!r} matches no line"


def test_readme_agent_example_runs_and_beats_chance():
    code = next(b for b in _blocks("python") if "class NearestMeanAgent" in b)
    namespace: dict = {}
    exec(compile(code, "README-agent", "exec"), namespace)
    agent = namespace["NearestMeanAgent"]()
    record = OndDriver(num_trials=3, condition="given").run(
        domain=DigitsDomain(), agent=agent, rng=np.random.default_rng(0), progress=False
    )
    known = np.concatenate([t.gt_class[t.gt_class > 0] for t in record.trials])
    predicted = np.concatenate([np.argmax(t.p_class[t.gt_class > 0], 1) for t in record.trials])
    # 6 known classes: chance is 1/6 on known samples.
    assert np.mean(predicted == known) > 0.5


def test_readme_names_the_commands_that_exist():
    text = README.read_text()
    for experiment in re.findall(r"\+experiment=([a-z_]+)", text):
        assert config_file("experiment", experiment).is_file(), experiment


def _bash_line(containing: str) -> str:
    return next(line for line in bash_lines() if containing in line)
