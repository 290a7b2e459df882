"""Time owl_eval.protocols.ond.metrics.program_metrics on 1,000 trials of 1,000 samples (K = 10, seeded).

    python benchmarks/ond_metrics.py [--trials 1000] [--samples 1000] [--reference-trials 100]

Prints the median of 3 runs of ``program_metrics(trials, baseline)``, the same with
``threshold_grid=True``, and, when sail-on-client is installed, the time of its per-trial functions
(``m_num_stats``, ``m_ndp`` pre/post, ``m_acc`` for agent and baseline, ``m_is_cdt_and_is_early``,
``m_nrp``) on the same data and the ratio. The reference is slow, so by default it runs on the first
``--reference-trials`` trials and its time is scaled linearly to all trials (printed as such).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import median_time  # noqa: E402

from owl_eval.protocols.ond.metrics import OndTrial, program_metrics  # noqa: E402


def make_trials(n_trials: int, n_samples: int, n_known: int, seed: int):
    """Synthetic ground truth: 90% of trials with a red light in [10%, 90%) of the trial, half the
    post-novelty samples novel (class 0), known samples uniform over 1..K."""
    rng = np.random.default_rng(seed)
    ground_truth = []
    for t in range(n_trials):
        red_light = int(rng.integers(n_samples // 10, 9 * n_samples // 10)) if rng.random() < 0.9 else None
        gt_novel = np.zeros(n_samples, dtype=np.int64)
        if red_light is not None:
            gt_novel[red_light:] = rng.random(n_samples - red_light) < 0.5
            gt_novel[red_light] = 1
        gt_class = np.where(gt_novel == 1, 0, rng.integers(1, n_known + 1, n_samples))
        ground_truth.append((gt_class, gt_novel, red_light))
    return ground_truth


def agent_outputs(ground_truth, n_known: int, seed: int, *, skill: float, batch_size: int):
    """One agent's OndTrials: class scores softmax(noise + skill on the true class), P(world changed)
    ramping up over 50 samples after the red light plus noise."""
    rng = np.random.default_rng(seed)
    trials = []
    for t, (gt_class, gt_novel, red_light) in enumerate(ground_truth):
        n = gt_class.size
        logits = rng.normal(size=(n, n_known + 1))
        logits[np.arange(n), gt_class] += skill
        p_class = np.exp(logits)
        p_class /= p_class.sum(axis=1, keepdims=True)
        ramp = np.zeros(n) if red_light is None else np.clip((np.arange(n) - red_light) / 50.0, 0, 1)
        p_world_changed = np.clip(0.6 * ramp + rng.uniform(0, 0.45, n), 0, 1)
        trials.append(
            OndTrial(gt_class, gt_novel, red_light, p_world_changed, p_class, batch_size, trial_id=f"trial-{t}")
        )
    return trials


def reference_time(trials, baseline, n_reference: int) -> float | None:
    try:
        import pandas as pd
        from sail_on_client.evaluate.image_classification import ImageClassificationMetrics
    except ImportError:
        return None
    metric = ImageClassificationMetrics("OND", image_id=0, detection=1, classification=2)
    start = time.process_time()
    for trial, base in zip(trials[:n_reference], baseline[:n_reference]):
        gt_novel = pd.Series(trial.gt_novel)
        gt_class = pd.Series(trial.gt_class)
        p_novel = pd.Series(trial.p_world_changed)
        # sail-on-client reads classifications with the sample id in column 0
        classifications = pd.DataFrame(np.column_stack([np.arange(trial.n_samples), trial.p_class]))
        baseline_classifications = pd.DataFrame(np.column_stack([np.arange(base.n_samples), base.p_class]))
        p_unknown = classifications[1]
        stats = metric.m_num_stats(p_novel.to_numpy(), gt_novel.to_numpy())
        metric.m_ndp(p_unknown.to_numpy(), gt_novel.to_numpy())
        metric.m_ndp_pre(p_unknown.to_numpy(), gt_novel.to_numpy())
        metric.m_ndp_post(p_unknown.to_numpy(), gt_novel.to_numpy())
        acc = metric.m_acc(gt_novel, classifications, gt_class, trial.batch_size, 5)
        metric.m_is_cdt_and_is_early(stats["GT_indx"], stats["P_indx_0.5"], trial.n_samples)
        if trial.red_light is not None:
            acc_baseline = metric.m_acc(gt_novel, baseline_classifications, gt_class, trial.batch_size, 5)
            metric.m_nrp(acc, acc_baseline)
    return (time.process_time() - start) * len(trials) / n_reference


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--known", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--reference-trials", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    start = time.perf_counter()
    ground_truth = make_trials(args.trials, args.samples, args.known, args.seed)
    trials = agent_outputs(ground_truth, args.known, args.seed + 1, skill=2.0, batch_size=args.batch_size)
    baseline = agent_outputs(ground_truth, args.known, args.seed + 2, skill=1.5, batch_size=args.batch_size)
    print(
        f"built {args.trials} trials x {args.samples} samples, K={args.known} (+ baseline) "
        f"in {time.perf_counter() - start:.2f} s (includes OndTrial validation)"
    )

    print(f"load average before timing: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    seconds, cpu = median_time(lambda: program_metrics(trials, baseline))
    print(f"program_metrics(trials, baseline): median of 3 = {seconds:.3f} s wall, {cpu:.3f} s CPU")
    seconds_grid, cpu_grid = median_time(lambda: program_metrics(trials, baseline, threshold_grid=True))
    print(
        f"program_metrics(trials, baseline, threshold_grid=True): median of 3 = {seconds_grid:.3f} s wall, {cpu_grid:.3f} s CPU"
    )

    n_reference = min(args.reference_trials, args.trials)
    reference = reference_time(trials, baseline, n_reference)
    if reference is None:
        print("reference not installed (pip install --no-deps sail-on-client==0.30.0 to compare)")
    else:
        print(
            f"sail-on-client 0.30.0 per-trial functions: {reference:.2f} s CPU for {args.trials} trials "
            f"(measured on {n_reference} trials, scaled linearly); ratio reference / ours (CPU) = {reference / cpu:.0f}x"
        )


if __name__ == "__main__":
    main()
