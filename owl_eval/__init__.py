"""owl-eval: a declarative, config-driven evaluation harness for open-world novelty detection, continual
learning, trajectory prediction and lifelong RL, logged to MLflow.

Layers, each importing only its own and the ones before it (``tests/test_layers.py`` reads every import):

1. ``errors``, ``typed``, ``safe_paths``, ``json_input``, ``paths`` (checks of user input, where the configs are);
2. ``api`` (what agents, domains and protocols exchange);
3. ``metrics`` (pure functions of arrays, no file I/O) and ``formats`` (reading and writing files), apart;
4. ``agents`` and ``domains``, apart (a domain never imports an agent);
5. ``protocols`` (drive agents over a domain, return a record);
6. ``sources`` (records of results produced elsewhere) and ``plots`` (draw computed values: no agent,
   protocol or metric computation);
7. ``evaluation`` (score a record: typed metric options -> results and figure data -> figures);
8. ``runner`` (config, MLflow, the command line).
"""

__version__ = "0.1.0"
