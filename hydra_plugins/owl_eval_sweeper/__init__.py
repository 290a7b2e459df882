"""owl-eval's sweeper, ``hydra/sweeper=owl_eval`` (the default of owl-eval's config): Hydra's basic sweeper (the same
parameters, batches and job numbers), except that a resumed sweep launches only the jobs not yet finished in the
store (:mod:`owl_eval.runner.sweeps.reuse_first`). ``hydra/sweeper=basic`` gives Hydra's own back: every job is
launched and the finished ones are found by the jobs themselves.

Hydra instantiates a sweeper only from the ``hydra_plugins`` namespace; the work is done in owl-eval's runner.
"""

# No `from __future__ import annotations`: Hydra's plugin scan executes this module outside sys.modules, where a
# dataclass cannot resolve string annotations.
from dataclasses import dataclass
from typing import Any, Optional

from hydra._internal.core_plugins.basic_sweeper import BasicSweeper
from hydra.core.config_store import ConfigStore
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig


@dataclass
class OwlEvalSweeperConf:
    _target_: str = "hydra_plugins.owl_eval_sweeper.OwlEvalSweeper"
    max_batch_size: Optional[int] = None  # noqa: UP045 - OmegaConf reads the annotation at run time
    params: Optional[dict[str, str]] = None  # noqa: UP045


ConfigStore.instance().store(group="hydra/sweeper", name="owl_eval", node=OwlEvalSweeperConf, provider="owl-eval")


class OwlEvalSweeper(BasicSweeper):
    """Hydra's basic sweeper launching only the jobs left (:class:`owl_eval.runner.sweeps.reuse_first.LaunchLeft`)."""

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        from owl_eval.runner.sweeps.reuse_first import LaunchLeft

        super().setup(hydra_context=hydra_context, task_function=task_function, config=config)
        self.launcher: Any = LaunchLeft(self.launcher, config)

    def validate_batch_is_legal(self, batch) -> None:
        """Compose every job of the batch, as Hydra's sweeper does to catch errors before launching
        (:func:`owl_eval.runner.sweeps.compose.compose_batch`); the configs are kept for the launcher, which looks up
        the finished jobs by them."""
        from owl_eval.runner.sweeps.compose import compose_batch

        assert self.hydra_context is not None and self.config is not None
        self.launcher.composed = compose_batch(self.hydra_context.config_loader, self.config, batch)
