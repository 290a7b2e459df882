"""Every declared metric, by protocol: collected from each metric module's ``SPECS`` list."""
from __future__ import annotations

import importlib

from metrics.results import MetricSpec

PROTOCOL_MODULES = {
    "ond": ("metrics.ond",),
    "continual": ("metrics.continual",),
    "trajectory": ("metrics.trajectory",),
    "lifelong_rl": ("metrics.lifelong_rl",),
}


def specs(protocol: str) -> dict[str, MetricSpec]:
    """The metric declarations of one protocol, by name."""
    if protocol not in PROTOCOL_MODULES:
        raise KeyError(f"unknown protocol {protocol!r}; known protocols: {sorted(PROTOCOL_MODULES)}")
    out: dict[str, MetricSpec] = {}
    for module_name in PROTOCOL_MODULES[protocol]:
        module = importlib.import_module(module_name)
        out.update({s.name: s for s in getattr(module, "SPECS", [])})
    return out


def base_name(name: str) -> str:
    """The declared metric behind a reported name: ``baseline.top1``, ``m2_cdt_pct@0.3`` and
    ``task/<task>/saturation`` map to ``top1``, ``m2_cdt_pct`` and ``saturation``."""
    return name.split("baseline.", 1)[-1].split("@", 1)[0].rsplit("/", 1)[-1]


def spec_for(protocol: str, name: str) -> MetricSpec | None:
    """The declaration behind a reported name (see :func:`base_name`), or None."""
    return specs(protocol).get(base_name(name))
