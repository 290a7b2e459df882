"""The runner: a config in, an evaluation run and logged out. Its sub-packages, each importing only those listed
before it (``tests/test_layers.py`` checks it), and MLflow only through :mod:`owl_eval.tracking`:

1. ``config``: reading the config: Hydra's runtime, resolvers, building objects from ``_target_`` nodes (an unknown
   key named), the options of each group, what a sweep hands its jobs, and how an error reaches a person (its one
   line, the files holding its details).
2. ``process``: the job's process: its work forked off the launching process (signals passed on, a killed job's
   saved part, processes an agent left), socket paths that fit, the launcher's workers stopped.
3. ``job``: one job top to bottom (``job/execute.py``): its config read once, the parts built and checked, the run
   opened, the record made and scored, everything logged.
4. ``sweeps``: a multirun: the Hydra callback (the parent run, its end and comparison), stop signals for the
   sweep's jobs.
5. ``cli``: the command lines (``owl-eval``, ``owl-eval-evaluate``): flags, repeated arguments, the help page, one
   ``error:`` line, the end-of-run summary.

``api.py`` is the Python API (``run``, ``evaluate``): ``config`` and ``job``, without a command line.
"""
