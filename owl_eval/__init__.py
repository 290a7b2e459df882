"""owl-eval: a declarative, config-driven evaluation harness for open-world novelty detection, continual
learning, trajectory prediction and lifelong RL, logged to MLflow.

Layers, each importing only the ones before it: ``errors``/``typed``/``safe_paths``/``json_input`` (checks of
user input) -> ``api`` (what agents and domains exchange) -> ``metrics`` (pure functions of arrays) and
``formats`` (reading and writing files) -> ``agents``, ``domains`` -> ``protocols``, ``sources`` -> ``plots`` ->
``runner`` (config, MLflow, the command line).
"""
__version__ = "0.1.0"
