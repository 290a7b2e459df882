"""Trajectory predictors: constant velocity, constant velocity with noise, nearest-neighbour futures."""

from owl_eval.protocols.trajectory.api import TrajectoryPredictor, last_position_and_velocity

__all__ = ["TrajectoryPredictor", "last_position_and_velocity"]
