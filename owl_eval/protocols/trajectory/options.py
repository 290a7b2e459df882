"""The trajectory ``metrics`` node, typed: General-Framework's metric table settings (METRICS.md section 3)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from owl_eval.errors import ConfigError
from owl_eval.evaluation.options import (
    MetricOptions,
    checked,
    choice,
    metric_names,
    non_negative,
    positive_int,
)
from owl_eval.typed import as_bool, as_int_list, as_str


def _k_values(value, key):
    ks = as_int_list(value, key, minimum=1)
    twice = [k for i, k in enumerate(ks) if k in ks[:i]]
    if twice:  # the same K twice would add its metric's sums twice under one name
        raise ConfigError(f"{key}: {twice[0]} is listed twice")
    return ks


@dataclass(frozen=True)
class TrajectoryMetricOptions(MetricOptions):
    """The ``metrics`` node ``metrics=trajectory``: General-Framework's metric table (METRICS.md section 3)."""

    protocol = "trajectory"
    k_values: list[int] = checked([20], _k_values)  # K of the *_K metrics (minADE_20, ...)
    miss_threshold: float = checked(2.0, non_negative)  # [m]
    collision_radius: float = checked(0.2, non_negative)  # [m]
    step_count: str = checked("agent", choice("agent", "sample"))  # sample: General-Framework's zero-fill
    kde: bool = checked(True, as_bool)  # false skips the KDE metrics (NLL, ECE, ML, Brier)
    chunk_size: int = checked(256, positive_int)  # scenes scored at a time (memory); the numbers do not depend on it
    class_ece_bins: int = checked(10, positive_int)
    auc_score: str = checked("raw", choice("raw", "general_framework"))
    tnr_pr_positive: str = checked("straight", as_str)  # class whose recall must be perfect for TNR-PR
    names: list[str] | None = checked(None, metric_names("trajectory"))  # null = every metric; or the names to keep

    def check_against(
        self,
        *,
        where: str = "metrics",
        num_preds: int | None = None,
        class_names: Any = None,
        preds_from: str = "protocol.num_preds",
        **known: Any,
    ) -> None:
        """``k_values`` within the ``num_preds`` predictions per agent, ``tnr_pr_positive`` among the
        behaviour ``class_names``."""
        if num_preds is not None:
            too_many = [k for k in self.k_values if k > num_preds]
            if too_many:
                raise ConfigError(
                    f"{where}.k_values: K={too_many[0]} exceeds the {num_preds} predictions per agent "
                    f"({preds_from}); expected values in 1..{num_preds}, e.g. {where}.k_values=[{num_preds}]"
                )
        names = [str(c) for c in class_names] if class_names is not None and len(class_names) else None
        if names is not None and self.tnr_pr_positive not in names:
            raise ConfigError(
                f"{where}.tnr_pr_positive: expected one of the classes {names}, got {self.tnr_pr_positive!r}"
            )

    @classmethod
    def record_context(cls, record: Any) -> dict[str, Any]:
        """The predictions per agent of a record. Not its class names: a file's own classes may lack the
        default ``tnr_pr_positive`` (TNR-PR is then N/A with the reason), while a live run's classes are fixed
        and a wrong name there is a typo."""
        num_preds = getattr(record, "num_preds", None)
        pred = getattr(record, "path_pred", None)
        if num_preds is None and pred is not None and getattr(pred, "ndim", 0) == 5:
            num_preds = pred.shape[1]
        return {} if num_preds is None else {"num_preds": int(num_preds)}
