"""Hydra finds each installed owl-eval protocol's configs: its ``conf`` folder is added to the search path.

Hydra discovers search-path plugins in the ``hydra_plugins`` namespace package; this one adds the config folder
of every protocol registered under the ``owl_eval.protocols`` entry-point group (its descriptor's
``config``), only for owl-eval's own apps (whose primary config folder is ``owl_eval/conf``), so a protocol's
agents, metrics, experiments and sources are config options like the shipped ones. Before that it puts each
protocol's typed ``metrics`` node in Hydra's ConfigStore (``owl_eval.paths.register_configs``): Hydra calls
search-path plugins before it composes anything, for ``hydra.main`` and ``initialize_config_dir`` alike.
"""
