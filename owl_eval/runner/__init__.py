"""owl-eval runner: builds domain, protocol and agents from Hydra config, runs, logs to MLflow."""
