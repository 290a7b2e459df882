"""Re-create the sample results of ``examples/results/`` from four small owl-eval runs.

    python examples/results/make_samples.py                      # every sample, into examples/results/
    python examples/results/make_samples.py --out /tmp/samples   # somewhere else
    python examples/results/make_samples.py --only sailon record # some of them

Run it from the repository root in the environment owl-eval is installed in (the ``l2logger`` sample needs the
``rl`` extra: gymnasium). Each run is the record step of an ``owl-eval`` job (the driver runs the agents over
the domain, seeded by ``seed=0``), and its record is saved exactly as a job saves its ``record/`` artifact
(``owl_eval.runner.job.scoring.record_and_score``, BLAS held to one thread); no MLflow run is made. Every sample is
then written from that saved record folder, as a user would write them from a downloaded record:

- ``record/``: the OND run's record folder as saved (``ond_record.npz``), read by ``+source=record``;
- ``sailon/``: the same OND run in sail-on-client's local-harness layout (``+source=sailon``): ground truth
  ``data/OND/image_classification/<test_id>_single_df.csv`` and ``<test_id>_metadata.json``, the agent's
  (session ``knn_novelty``) and the baseline's (session ``closed_world``) result files under
  ``results/OND/image_classification/``; the class is the column of the K+1 scores (0 = unknown), floats are
  written with ``repr`` so the files read back to exactly the record's numbers;
- ``accuracy_matrix/``: the two text copies of the continual run's record (``renate_results.json``,
  ``accuracy_matrix.csv``) as saved;
- ``trajectories/crowd_knn_futures.npz``: the trajectory run's General-Framework arrays (``Path_true``,
  ``Path_pred`` as float32, ``Pred_steps``) and, per scene, the behaviour class of the scene's first agent
  (``P_true``, ``P_pred``, ``Class_names``), saved uncompressed (``np.savez``);
- ``l2logger/``: the lifelong-RL run's l2logger log (``l2log/<scenario>-<stamp>/``) and the STE logs it used
  (``ste/<task>/<task>-<stamp>/``) as saved. l2logger names a log's folder by the time it was written and
  logs a wall-clock ``timestamp`` per episode, so only these differ from one generation to the next.

Everything else is the same byte for byte on every generation (``tests/sources/test_samples.py`` checks it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SEED = 0
# The four runs, as command-line overrides of `python -m owl_eval` (small sizes: the samples stay small).
RUNS = {
    "ond": [
        "+experiment=ond_system_detection",
        "protocol.num_trials=5",
        "protocol.trials_without_novelty=1",
        "protocol.pre_novelty=30",
        "protocol.post_novelty=60",
    ],
    "continual": ["+experiment=continual_split_digits"],
    "trajectory": ["+experiment=trajectory_crowd", "domain.num_train_scenes=60", "domain.num_test_scenes=8"],
    "lifelong_rl": [
        "+experiment=lifelong_rl_cartpole_syllabus",
        "protocol.syllabus.generate.train_episodes=20",
        "protocol.syllabus.generate.test_episodes=3",
        "protocol.ste.episodes=20",
    ],
}
# sample -> the run it is written from
SAMPLES = {
    "sailon": "ond",
    "record": "ond",
    "accuracy_matrix": "continual",
    "trajectories": "trajectory",
    "l2logger": "lifelong_rl",
}
SESSION, BASELINE_SESSION = "knn_novelty", "closed_world"
TRAJECTORY_FILE = "crowd_knn_futures.npz"


def saved_record(run: str, scratch: Path) -> Path:
    """The ``record/`` folder a job of ``RUNS[run]`` saves (its record step and scoring, no MLflow run)."""
    from owl_eval.runner.api import run_composed
    from owl_eval.runner.job.live import prepare_live
    from owl_eval.runner.job.scoring import record_and_score

    job_dir = scratch / run
    overrides = [*RUNS[run], f"seed={SEED}", "figures=false", "progress=false"]
    if run == "lifelong_rl":  # the STE logs are computed here, not taken from a store of earlier runs
        overrides.append(f"protocol.ste.dir={job_dir / 'ste_store'}")
    outcome = run_composed(
        "config", overrides, lambda cfg: record_and_score(prepare_live(cfg), job_dir / "scratch"), output_dir=job_dir
    )
    assert outcome.record_dir is not None, "tracking.log_record is off: no record was saved"
    return outcome.record_dir


# -- writers: one sample each, from a saved record folder ---------------------------------------------------
def write_record(record_dir: Path, out: Path) -> None:
    shutil.copytree(record_dir, out)  # ond_record.npz: the whole record/ artifact of the run


def write_sailon(record_dir: Path, out: Path) -> None:
    from owl_eval.protocols.ond.record import OndRecord

    record = OndRecord.load(record_dir)
    assert record.baseline_trials is not None, "the OND run has no baseline"
    data = out / "data" / "OND" / "image_classification"
    results = out / "results" / "OND" / "image_classification"
    data.mkdir(parents=True)
    results.mkdir(parents=True)
    for t, (trial, base) in enumerate(zip(record.trials, record.baseline_trials), start=1):
        test_id = f"OND.{100 + t}.000.{t:04d}"
        ids = [f"digits/{test_id}/{i:04d}.png" for i in range(len(trial.gt_class))]
        assert np.array_equal(trial.gt_novel, trial.gt_class == 0)  # a novel sample is one of the unknown class
        red = trial.red_light
        world_changed = [int(red is not None and i >= red) for i in range(len(ids))]  # cumulative, as sail-on's
        gt = ["id,detection,classification"]
        gt += [f"{i},{d},{int(c)}" for i, d, c in zip(ids, world_changed, trial.gt_class)]
        (data / f"{test_id}_single_df.csv").write_text("\n".join(gt) + "\n")
        metadata = {
            "domain": "image_classification",
            "protocol": "OND",
            "known_classes": int(trial.p_class.shape[1] - 1),
            "round_size": int(trial.batch_size),
            "red_light": ids[red] if red is not None else "",
        }
        (data / f"{test_id}_metadata.json").write_text(json.dumps(metadata) + "\n")
        for session, outputs in ((SESSION, trial), (BASELINE_SESSION, base)):
            assert np.array_equal(outputs.gt_class, trial.gt_class)
            detection = [f"{i},{float(p)!r}" for i, p in zip(ids, outputs.p_world_changed)]
            (results / f"{session}.{test_id}_detection.csv").write_text("\n".join(detection) + "\n")
            scores = [",".join([i, *(repr(float(p)) for p in row)]) for i, row in zip(ids, outputs.p_class)]
            (results / f"{session}.{test_id}_classification.csv").write_text("\n".join(scores) + "\n")


def write_accuracy_matrix(record_dir: Path, out: Path) -> None:
    out.mkdir(parents=True)
    for name in ("renate_results.json", "accuracy_matrix.csv"):
        shutil.copy2(record_dir / name, out / name)


def write_trajectories(record_dir: Path, out: Path) -> None:
    from owl_eval.protocols.trajectory.record import TrajectoryRecord

    record = TrajectoryRecord.load(record_dir)
    # General-Framework's class arrays are one row per scene: each scene's first classified agent
    first = [int(np.flatnonzero(record.class_index[:, 0] == s)[0]) for s in range(record.num_scenes)]
    out.mkdir(parents=True)
    np.savez(
        out / TRAJECTORY_FILE,
        Path_true=record.path_true.astype(np.float32),
        Path_pred=record.path_pred.astype(np.float32),
        Pred_steps=record.pred_steps.astype(bool),
        P_true=record.p_true[first],
        P_pred=record.p_pred[first],
        Class_names=np.asarray(record.class_names, dtype=str),
    )


def write_l2logger(record_dir: Path, out: Path) -> None:
    out.mkdir(parents=True)
    for part in ("l2log", "ste"):
        shutil.copytree(record_dir / part, out / part)


WRITERS = {
    "sailon": write_sailon,
    "record": write_record,
    "accuracy_matrix": write_accuracy_matrix,
    "trajectories": write_trajectories,
    "l2logger": write_l2logger,
}


def make_samples(out: Path = HERE, only: list[str] | None = None) -> list[Path]:
    """Write the samples named in ``only`` (default: all) under ``out``, replacing what is there; returns
    the sample folders written."""
    names = list(only or SAMPLES)
    unknown = sorted(set(names) - set(SAMPLES))
    if unknown:
        raise SystemExit(f"unknown sample(s) {unknown}; choose from {sorted(SAMPLES)}")
    written = []
    with tempfile.TemporaryDirectory(prefix="owl-eval-samples-") as tmp:
        records: dict[str, Path] = {}
        for name in names:
            run = SAMPLES[name]
            if run not in records:
                print(f"running {run}: {' '.join(RUNS[run])} seed={SEED}", file=sys.stderr)
                records[run] = saved_record(run, Path(tmp))
            target = out / name
            if target.exists():
                shutil.rmtree(target)
            WRITERS[name](records[run], target)
            written.append(target)
            print(f"wrote {target}", file=sys.stderr)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=HERE, help="folder to write the samples into (default: %(default)s)"
    )
    parser.add_argument("--only", nargs="+", choices=sorted(SAMPLES), help="write only these samples")
    args = parser.parse_args(argv)
    make_samples(args.out, args.only)


if __name__ == "__main__":
    main()
