"""Reading the config, what every other part of the runner uses: Hydra's runtime config (``hydra_runtime``), the
resolvers of the packaged configs, building domain, protocol and agents from their nodes with errors that name the
key (``build``), the options of each group (``groups``), what a sweep hands its jobs (``sweep_context``), and how an
error reaches a person: its one line (``messages``) and the files holding its details (``error_files``).
Imports no other runner sub-package."""
