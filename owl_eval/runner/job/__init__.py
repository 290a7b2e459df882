"""One job, read top to bottom in ``execute.py``: its config read once (``config``), what makes the record built and
checked in the job's process (``live`` for ``owl-eval``, ``source`` for ``owl-eval-evaluate``; ``prepared`` holds
what they hand on, ``naming`` the run's name), the run opened, the record made and scored (``scoring``), everything
logged through :mod:`owl_eval.tracking`. May import ``runner.config`` and ``runner.process``."""
