"""owl-eval's sweeper (``hydra/sweeper=owl_eval``, the default): a resumed sweep launches only the jobs left.

Checked against Hydra's own basic sweeper (``hydra/sweeper=basic``, every job launched, each finding its finished
run itself) and against the jobs' own config hashes: the job configs the sweeper composes equal Hydra's full
composition, the hash it predicts is the one the job computes, and a resumed sweep ends with the same runs under
its parent as under Hydra's sweeper, the launched jobs keeping their numbers.
"""

from __future__ import annotations

import importlib.util
import uuid
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.errors import ConfigCompositionException
from hydra.types import RunMode
from omegaconf import OmegaConf, open_dict

from owl_eval.paths import CONFIG_DIR, group_options
from owl_eval.runner.job.planned import job_identity, planned_hash
from owl_eval.runner.sweeps.compose import compose_batch, task_container
from tests.runner.test_sweeps import snapshot, sweep

SMALL = [
    "protocol.num_trials=2",
    "protocol.pre_novelty=20",
    "protocol.post_novelty=40",
    "figures=false",
    "progress=false",
]


def _task(cfg) -> dict:
    """A job config without its ``hydra`` node, as plain containers (interpolations unresolved)."""
    plain = OmegaConf.to_container(cfg, resolve=False)
    plain.pop("hydra")
    return plain


def _job_config(cfg):
    """What Hydra's ``run_job`` hands a job: a copy of the composed config without its ``hydra`` node."""
    import copy

    from omegaconf import read_write

    task = copy.deepcopy(cfg)
    with read_write(task), open_dict(task):
        del task["hydra"]
    return task


@pytest.mark.parametrize(
    "base, per_job",
    [
        # values only: one composition, the others a copy with their values
        (["+experiment=ond_given_detection", "protocol.num_trials=2"], [[f"seed={s}"] for s in range(4)]),
        # a group swept beside values: one composition per agent
        (
            ["+experiment=ond_system_detection"],
            [
                [f"agent={a}", f"seed={s}", "metrics.threshold=0.6"]
                for a in ("ond/knn_novelty", "ond/closed_world")
                for s in (0, 1)
            ],
        ),
        # a dict value (Hydra merges it into the node): composed whole each time
        (
            ["+experiment=ond_given_detection"],
            [[f"seed={s}", f"+tracking.tags={{run: r{s}}}"] for s in range(2)]
            + [["seed=2", "+tracking.tags={other: 1}"]],
        ),
        # an addition and a value of a group's node
        (
            ["+experiment=continual_split_digits"],
            [[f"seed={s}", "+tracking.tags.note=x", f"agent.epochs={e}"] for s, e in ((0, 1), (1, 2))],
        ),
    ],
)
def test_the_sweepers_job_configs_are_hydras_full_compositions(base, per_job):
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        master = loader.load_configuration("config", base, run_mode=RunMode.MULTIRUN)
        batch = [job + base for job in per_job]
        ours = compose_batch(loader, master, batch)
        hydras = [loader.load_sweep_config(master_config=master, sweep_overrides=list(job)) for job in batch]
    assert ours == [_task(c) for c in hydras]
    assert len({str(c) for c in ours}) == len(batch)  # each job its own config


def test_a_value_hydra_refuses_is_refused_with_hydras_words():
    GlobalHydra.instance().clear()
    base = ["+experiment=ond_given_detection"]
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        loader = GlobalHydra.instance().config_loader()
        master = loader.load_configuration("config", base, run_mode=RunMode.MULTIRUN)
        bad = [["seed=0", "protocol.num_trials=2", *base], ["seed=1", "protocol.num_trialz=2", *base]]
        with pytest.raises(ConfigCompositionException) as hydras:
            loader.load_sweep_config(master_config=master, sweep_overrides=bad[1])
        with pytest.raises(ConfigCompositionException) as ours:
            compose_batch(loader, master, bad)
    assert str(ours.value) == str(hydras.value) and "num_trialz" in str(ours.value)


EXTRA = {"ond_handwriting": "mlxtend", "ond_activity": "seglearn", "ond_image": "river", "ond_sailon": "river"}
EXTRA |= {"ond_all": "river", "lifelong_rl": "gymnasium", "lifelong_rl_minigrid": "minigrid"}


def _experiment_params():
    for name in group_options("experiment"):
        marks = [] if name == "ond_given_detection" else [pytest.mark.slow]
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", _experiment_params())
def test_the_predicted_hash_is_the_one_the_job_computes(name, tmp_path, shared_dir_or_none):
    """For every experiment: the hash predicted from the composed config (domain built alone, no Hydra runtime for
    the identity) equals the one the job's own prepare step hands over (driver, domain and agents built and
    checked)."""
    from owl_eval.runner.config.resolvers import register_resolvers
    from owl_eval.runner.job.live import prepare_live
    from owl_eval.runner.job.prepared import job_header

    register_resolvers()  # ${owl_eval.folder:} of a sweep's folder (an experiment that is a sweep resolves it)

    for prefix, package in EXTRA.items():
        if name.startswith(prefix) and importlib.util.find_spec(package) is None:
            pytest.skip(f"{package} is not installed (an optional extra)")
    overrides = [f"+experiment={name}"]
    if name in ("trajectory_eth_ucy", "trajectory_files"):
        if shared_dir_or_none is None:
            pytest.skip("ETH/UCY files are in ../shared/data/eth_ucy, absent here")
        overrides.append(f"domain.path={shared_dir_or_none / 'data' / 'eth_ucy'}")
        if name == "trajectory_files":  # a folder of 'frame id x y' files, one of them the test group
            overrides.append("domain.test_group=biwi_eth")
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        full = compose("config", overrides=overrides, return_hydra_config=True)
    identity = job_identity(task_container(full))
    planned = planned_hash(identity, {}) if identity is not None else None
    with open_dict(full):
        full.hydra.runtime.output_dir = str(tmp_path)
        full.hydra.runtime.cwd = str(tmp_path)
        full.hydra.job.num = 0  # an experiment that is a sweep (hydra.mode: MULTIRUN) names its job folders by it
    HydraConfig.instance().set_config(full)
    try:
        computed = job_header(prepare_live(_job_config(full))).config_hash
    finally:
        HydraConfig.instance().cfg = None
    assert planned is not None and planned == computed


def _under_parent(runs: dict) -> tuple[dict, list[dict]]:
    (parent,) = [r for r in runs.values() if r["tags"].get("owl_eval.kind") == "sweep"]
    return parent, [r for r in runs.values() if r["tags"].get("mlflow.parentRunId") == parent["id"]]


def _shape(runs: dict) -> list[tuple[str, str, str]]:
    """The runs under the sweep's parent: (run name, kind, status), sorted."""
    _, under = _under_parent(runs)
    return sorted((r["tags"]["mlflow.runName"], r["tags"]["owl_eval.kind"], r["status"]) for r in under)


SWEEPERS = {
    "owl_eval": ["hydra/sweeper=owl_eval"],
    "basic": ["hydra/sweeper=basic"],
    # batches [0 1] [2 3] [4]: one reused and one launched in each of the first two, the last launched whole
    "owl_eval_batches_of_2": ["hydra/sweeper=owl_eval", "hydra.sweeper.max_batch_size=2"],
    # the jobs left composed again in joblib's worker processes, the job number carried by their overrides
    "owl_eval_joblib": ["hydra/sweeper=owl_eval", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
}


@pytest.mark.slow
@pytest.mark.parametrize("sweeper", list(SWEEPERS))
def test_a_resumed_sweep_launches_only_the_jobs_left_keeping_their_numbers(sweeper, mlflow_store, client, tmp_path):
    """Three seeds finish; seed 1's run is deleted; the sweep is re-run over five seeds. owl-eval's sweeper launches
    jobs 1, 3 and 4 only (their folders and run names keep those numbers) and shows 0 and 2 as reused stand-ins;
    Hydra's basic sweeper launches all five, and the two end with the same runs under the parent."""
    name = f"reuse-first-{sweeper}-{uuid.uuid4().hex[:6]}"
    sweep(mlflow_store, name, tmp_path / "first", "seed=0,1,2", *SMALL)
    first = snapshot(mlflow_store, name)
    seed1 = next(r for r in first.values() if r["tags"].get("owl_eval.kind") == "job" and r["tags"]["seed"] == "1")
    client.delete_run(seed1["id"])
    proc = sweep(mlflow_store, name, tmp_path / "second", "seed=0,1,2,3,4", *SWEEPERS[sweeper], *SMALL)
    second = {k: r for k, r in snapshot(mlflow_store, name).items() if k not in first}
    parent, _ = _under_parent(second)
    assert _shape(second) == [
        ("0-system-knn_novelty-seed0", "reused", "FINISHED"),
        ("1-system-knn_novelty-seed1", "job", "FINISHED"),
        ("2-system-knn_novelty-seed2", "reused", "FINISHED"),
        ("3-system-knn_novelty-seed3", "job", "FINISHED"),
        ("4-system-knn_novelty-seed4", "job", "FINISHED"),
    ]
    assert sorted(k for k in parent["tags"] if k.startswith("owl_eval.reused.")) == sorted(
        f"owl_eval.reused.{r['id']}"
        for r in first.values()
        if r["tags"].get("owl_eval.kind") == "job" and r["tags"]["seed"] in ("0", "2")
    )
    assert parent["metrics"]["knn_novelty/n_seeds"][0][1] == 5
    launched = sorted(p.name for p in (tmp_path / "second").iterdir() if p.is_dir() and p.name.isdigit())
    assert launched == (["0", "1", "2", "3", "4"] if sweeper == "basic" else ["1", "3", "4"])
    for job in launched:  # each launched job's log is in its own numbered folder and names its own seed
        assert "seed=" + job in (tmp_path / "second" / job / ".hydra" / "overrides.yaml").read_text()
    if sweeper != "basic":
        out = proc.stdout + proc.stderr
        assert out.count(" already FINISHED in MLflow run ") == 2 and "OWL_EVAL_JOB_NUM=1" in out


@pytest.mark.slow
def test_skip_finished_false_launches_every_job(mlflow_store, tmp_path):
    name = f"reuse-first-off-{uuid.uuid4().hex[:6]}"
    sweep(mlflow_store, name, tmp_path / "first", "seed=0,1", *SMALL)
    sweep(mlflow_store, name, tmp_path / "second", "seed=0,1", "tracking.skip_finished=false", *SMALL)
    runs = snapshot(mlflow_store, name)
    jobs = [r for r in runs.values() if r["tags"].get("owl_eval.kind") == "job"]
    assert len(jobs) == 4 and not [r for r in runs.values() if r["tags"].get("owl_eval.kind") == "reused"]
    assert sorted(p.name for p in (tmp_path / "second").iterdir() if p.name.isdigit()) == ["0", "1"]


def test_a_job_whose_hash_needs_its_runtime_is_left_to_the_job(tmp_path):
    """A domain node holding a Hydra value, and a source read (owl-eval-evaluate), are not predicted: the job decides."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        ond = compose("config", overrides=["+experiment=ond_given_detection"], return_hydra_config=True)
        evaluate = compose(
            "evaluate", overrides=["+source=record", f"source.path={tmp_path}"], return_hydra_config=True
        )
    with open_dict(ond):
        ond.domain.root = "${hydra:runtime.cwd}/data"
    identity = job_identity(task_container(ond))
    assert identity is not None and planned_hash(identity, {}) is None
    assert job_identity(task_container(evaluate)) is None


def test_a_sweep_job_keeps_the_number_the_sweeper_gave_it():
    from owl_eval.runner.config.sweep_context import JOB_NUM_ENV, job_number

    given = OmegaConf.create({"job": {"num": 0, "env_set": {JOB_NUM_ENV: "7"}}})
    plain = OmegaConf.create({"job": {"num": 3, "env_set": {}}})
    assert (job_number(given), job_number(plain)) == (7, 3)
    assert Path(CONFIG_DIR / "hydra" / "default.yaml").read_text().count(JOB_NUM_ENV) >= 1
