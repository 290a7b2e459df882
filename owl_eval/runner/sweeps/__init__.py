"""A multirun (``-m``): the Hydra callback that gives the sweep one parent run, hands its id and swept keys to the
jobs and compares them at the end (``callbacks``), and what SIGTERM and Ctrl-C do to the sweep's jobs
(``termination``). May import ``runner.config``, ``runner.process`` and ``runner.job``."""
