"""The process boundary: a job's work in a forked process of its own while the launching process owns its MLflow
run (``worker``: signals passed on, a timeout, the record so far kept, processes an agent left ended), socket paths
that fit under a long ``$TMPDIR`` (``short_tmp``), and the launcher's own workers stopped at a sweep's end
(``sweep_processes``). May import ``runner.config``."""
