"""The lifelong-RL ``metrics`` node, typed: l2metrics 3.1 settings (METRICS.md section 4)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from owl_eval.errors import ConfigError
from owl_eval.evaluation.options import MetricOptions, checked, choice, metric_names, positive_int, unit_interval
from owl_eval.typed import as_bool, as_float, as_int, as_str, check_keys


def _window_length(value, key):
    return None if value is None else as_int(value, key, minimum=1)


def _data_range(value, key):
    """``null`` or ``{task: {min: number, max: number}}`` with min < max."""
    if value is None:
        return None
    if not isinstance(value, Mapping) or not value:
        raise ConfigError(f"{key}: expected null or a mapping {{task: {{min: ..., max: ...}}}}, got {value!r}")
    out = {}
    for task, bounds in value.items():
        where = f"{key}.{task}"
        if not isinstance(bounds, Mapping):
            raise ConfigError(f"{where}: expected {{min: ..., max: ...}}, got {bounds!r}")
        check_keys(bounds, ["min", "max"], where)
        if "min" not in bounds or "max" not in bounds:
            raise ConfigError(f"{where}: expected both min and max, got {dict(bounds)!r}")
        low, high = as_float(bounds["min"], f"{where}.min"), as_float(bounds["max"], f"{where}.max")
        if not low < high:
            raise ConfigError(f"{where}: expected min < max, got min={low:g}, max={high:g}")
        out[str(task)] = {"min": low, "max": high}
    return out


@dataclass(frozen=True)
class LifelongRLMetricOptions(MetricOptions):
    """The ``metrics`` node ``metrics=lifelong_rl``: l2metrics 3.1 settings (METRICS.md section 4); the defaults reproduce
    l2metrics 3.1."""

    protocol = "lifelong_rl"
    perf_measure: str = checked("reward", as_str)
    preset: str = checked("l2metrics", choice("l2metrics"))
    smoothing: str = checked("flat", choice("flat", "hanning", "hamming", "bartlett", "blackman", "none"))
    smoothing_fraction: float = checked(0.2, unit_interval)  # window min(int(fraction * n), max_window) (the seed's s)
    window_length: int | None = checked(None, _window_length)
    max_window: int = checked(100, positive_int)
    smooth_eval: bool = checked(False, as_bool)
    normalization: str = checked("task", choice("task", "run", "none"))
    data_range: dict | None = checked(None, _data_range)
    clamp_outliers: bool = checked(False, as_bool)
    aggregation: str = checked("mean", choice("mean", "median"))  # over tasks
    # time to learn: fraction of the STE saturation
    learn_threshold: float = checked(0.9, lambda v, k: as_float(v, k, minimum=0.0, maximum=1.0, open_minimum=True))
    # aware: the task name <task>_<variant> is a task; agnostic: <task> only
    variant_mode: str = checked("aware", choice("aware", "agnostic"))
    names: list[str] | None = checked(None, metric_names("lifelong_rl"))  # null = every metric; or the names to keep

    def check_against(self, *, where: str = "metrics", columns: Any = None, **known: Any) -> None:
        """``perf_measure`` among the log's performance ``columns``."""
        if columns is not None:
            valid = sorted(str(c) for c in columns)
            if self.perf_measure not in valid:
                raise ConfigError(
                    f"{where}.perf_measure: expected a performance column of the log {valid}, got {self.perf_measure!r}"
                )

    @classmethod
    def record_context(cls, record: Any) -> dict[str, Any]:
        """The performance columns of the record's log (what l2metrics' reader accepts as ``perf_measure``)."""
        log = getattr(record, "log", None)
        if log is not None and isinstance(getattr(log, "columns", None), Mapping):
            return {"columns": tuple(log.columns)}
        return {}
