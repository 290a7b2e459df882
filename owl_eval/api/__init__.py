"""The interfaces agents and domains exchange: OND batches, RL task and block descriptions, trajectory geometry."""
