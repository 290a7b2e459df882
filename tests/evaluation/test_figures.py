"""What the figures say and show: the trajectory scenes' titles name the scene and the predictor, the
lifelong-RL learning curve's legend lies inside the saved image."""

from __future__ import annotations

import io

import matplotlib.pyplot as plt
import numpy as np
from PIL import Image

from owl_eval.evaluation import evaluation_for
from owl_eval.evaluation.options import parse
from owl_eval.protocols.lifelong_rl.figures import learning_curve
from owl_eval.protocols.trajectory.record import TrajectoryRecord


def _record() -> TrajectoryRecord:
    """3 scenes of 3 agent slots, 2 predictions; scene 1 has agents 0 and 2 only, scene 2 none."""
    n_s, n_p, n_a, n_i, n_o = 3, 2, 3, 8, 12
    rng = np.random.default_rng(0)
    history = rng.normal(size=(n_s, n_a, n_i, 2))
    true = rng.normal(size=(n_s, 1, n_a, n_o, 2))
    pred = true + rng.normal(scale=0.1, size=(n_s, n_p, n_a, n_o, 2))
    steps = np.ones((n_s, n_a, n_o), bool)
    steps[1, 1] = False
    steps[2] = False
    history[1, 1] = true[1, :, 1] = pred[1, :, 1] = np.nan
    return TrajectoryRecord(
        path_true=true,
        path_pred=pred,
        pred_steps=steps,
        path_history=history,
        p_true=np.zeros((0, 2)),
        p_pred=np.zeros((0, 2)),
        class_index=np.zeros((0, 2), int),
        class_names=np.array(["left", "right"]),
        scene_source=np.array(["biwi_eth", "biwi_hotel", "crowds_zara01"]),
        scene_frame=np.array([780, 1200, 40]),
        dt=0.4,
    )


def test_each_example_scene_title_names_the_scene_its_agents_and_the_predictor():
    evaluation = evaluation_for("trajectory", {"num_preds": 2, "plot_scenes": 2, "agent": "trajectory/cv_sampled"})
    options = parse("trajectory", {"k_values": [2]})
    scored = evaluation.score(_record(), options)
    fig = evaluation.figures(scored, options)["example_scenes"]
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == [
        "biwi_eth, frame 780 (test scene 0 of 3)\ntrajectory/cv_sampled: agents 0-2, 2 of 2 predictions",
        "biwi_hotel, frame 1200 (test scene 1 of 3)\ntrajectory/cv_sampled: agents 0, 2, 2 of 2 predictions",
    ]
    # each drawn agent is labelled with its index, in its colour, at its last observed position
    labels = [(t.get_text(), tuple(np.round(t.xy, 6))) for t in fig.axes[1].texts]
    last = _record().path_history[1, :, -1]
    assert labels == [("0", tuple(np.round(last[0], 6))), ("2", tuple(np.round(last[2], 6)))]
    plt.close("all")


def _learning_curve_data(names: list[str]) -> dict:
    spans, start = [], 0
    for k, name in enumerate(names * 2):
        for test, n in ((False, 20), (True, 4)):
            episodes = np.arange(start, start + n)
            spans.append(
                {
                    "start": start - 0.5,
                    "end": start + n - 0.5,
                    "task": name,
                    "test": test,
                    "episodes": episodes,
                    "smoothed": np.linspace(10, 100 + k, n),
                }
            )
            start += n
    episodes = np.arange(start)
    return {
        "episodes": episodes,
        "reward": np.sin(episodes / 5.0) * 50 + 100,
        "tasks": names,
        "spans": spans,
        "saturation": [(19, 100.0), (43, 101.0)],
        "recovery": [(60, 90.0)],
    }


def test_the_learning_curve_legend_lies_inside_the_saved_figure():
    names = ["cartpole_default", "cartpole_reversed_force", "cartpole_long_pole_and_a_longer_variant_name"]
    fig = learning_curve(_learning_curve_data(names))
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")  # as MLflow's log_figure saves it: no bbox_inches
    width, height = Image.open(io.BytesIO(buffer.getvalue())).size
    renderer = fig.canvas.get_renderer()
    legends = [a for ax in fig.axes for a in ax.get_children() if isinstance(a, plt.matplotlib.legend.Legend)]
    assert len(legends) == 1
    texts = [t.get_text() for t in legends[0].get_texts()]
    assert texts == [*names, "evaluation block (hatched)", "reward per episode", "saturation", "recovery"]
    box = legends[0].get_window_extent(renderer)
    assert (width, height) == (round(fig.bbox.width), round(fig.bbox.height))
    assert 0 <= box.x0 and box.x1 <= width and 0 <= box.y0 and box.y1 <= height, (box, width, height)
    # and it does not cover the data: it is right of the axes
    assert box.x0 >= fig.axes[0].get_window_extent(renderer).x1
    plt.close(fig)


def test_a_live_job_hands_the_agent_name_to_the_figures():
    from hydra import compose, initialize_config_dir

    from owl_eval.paths import CONFIG_DIR
    from owl_eval.runner.config.resolvers import register_resolvers
    from owl_eval.runner.job.live import prepare_live

    register_resolvers()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose("config", overrides=["+experiment=trajectory_crowd", "agent=trajectory/constant_velocity"])
    job = prepare_live(cfg)
    # outside a Hydra launch the agent is named by its class (inside one: the option, trajectory/constant_velocity)
    assert job.parts["names"]["agent"] == type(job.parts["agent"]).__name__ == "ConstantVelocityPredictor"
    assert job.evaluation.context["agent"] == "ConstantVelocityPredictor"
