"""owl-eval: a declarative, config-driven evaluation harness for open-world novelty detection, continual
learning, trajectory prediction and lifelong RL, logged to MLflow.

A protocol is a folder, ``owl_eval/protocols/<name>/``, described by one ``Protocol`` descriptor and found
through the entry-point group ``owl_eval.protocols`` (a plugin package adds one the same way). The shared
parts know no protocol by name. Layers, each importing only its own and the ones before it
(``tests/test_layers.py`` reads every import):

1. ``errors``, ``typed``, ``safe_paths``, ``json_input`` (checks of user input);
2. ``metrics`` (the shared metric types: results, N/A, validation) and ``formats`` (reading and writing
   files), apart;
3. ``datasets`` (the shared data sets: digits, the SAIL-ON-style sets, a user's own data set read from a path:
   arrays, tables, image folders, Hugging Face ``save_to_disk`` folders, lazily; and provenance, what data a run
   used, with a content digest) and ``stats``
   (interquartile mean, probability of improvement, stratified bootstrap, paired differences and their two-sided
   test, Holm, rounding to an interval's digits);
4. ``protocols`` (the descriptor, finding protocols, the driver base) and ``paths`` (where configs are);
5. ``sources`` (what readers of results produced elsewhere return) and ``evaluation`` (what scoring
   provides: typed metric options, results and figure data; the metric-name registry);
6. each protocol's folder (its driver, record, metrics, evaluation, figures, agents, sources, configs): it
   imports the shared parts, never another protocol;
7. ``tracking``: the only part that talks to MLflow (stores, runs, batches, artifacts, reading runs back, the
   runs a resumed sweep reuses, the secrets of tracking URIs); everything else hands it values;
8. ``runner`` (the config, the job, its process, sweeps, the command lines: ``owl_eval/runner/__init__.py`` says
   which sub-package may import which): it learns of protocols through their descriptors only; and
   ``comparison`` (agents compared over seeds: tables, verdicts, figures, the report, ``owl-eval-compare``), which
   reads runs through ``tracking`` and is called at a sweep's end.
"""

__version__ = "0.1.0"
