"""The only package that talks to MLflow; everything else hands it values.

``settings`` (the ``tracking`` node: where the store and artifacts are, checked), ``store`` (the store's client and
its checks, MLflow's batch limits), ``keys`` (the MLflow key of a metric key, the tags owl-eval sets), ``runs`` (a
job's run: created, logged in batches, ended), ``sweep_parent`` (a sweep's parent run), ``reuse`` (a resumed sweep's
finished jobs), ``finished_runs`` (its stand-ins: runs created FINISHED, in one transaction where the store is
MLflow's SQL store), ``reading`` (runs read back for comparisons), ``key_index`` (each run's ``metric_keys.json``),
``threshold_tables``, ``liveness`` (whether a run's process is alive; runs of dead processes ended), ``faults`` (a
full disk, a lost server: one line), ``redaction`` (the secrets of tracking URIs kept out of everything written)."""
