"""What Hydra tells a running job about itself (its runtime config), read in one place."""

from __future__ import annotations

from typing import Any


def hydra_runtime() -> Any:
    """HydraConfig when running under Hydra (CLI, launchers, tests that set it), else None."""
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.get() if HydraConfig.initialized() else None


def is_multirun(hc: Any) -> bool:
    """Whether the Hydra runtime ``hc`` (None outside Hydra) is a job of a sweep (``-m``)."""
    return hc is not None and str(hc.mode) == "RunMode.MULTIRUN"
