"""Lifelong-RL records read back for re-scoring: a run's record folder (``rl_record.json`` beside ``l2log/``
and ``ste/``) or a bare l2logger log directory."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from owl_eval.sources import SourceData


def read_saved(file: Path, *, settings: Mapping[str, Any], chunk_size: int) -> SourceData:
    from owl_eval.protocols.lifelong_rl.record import RLRecord

    record = RLRecord.load(file)  # lists the record folder without links, checks every name
    return SourceData("lifelong_rl", record, {"rl_mode": "given", "episodes": str(len(record.log))})


def read_log_directory(folder: Path, *, settings: Mapping[str, Any], chunk_size: int) -> SourceData:
    """A bare l2logger log directory, read as ``+source=l2logger`` reads it with the given metric settings."""
    from owl_eval.protocols.lifelong_rl.sources.l2logger import L2LoggerSource

    return L2LoggerSource(
        str(folder),
        perf_measure=str(settings.get("perf_measure", "reward")),
        variant_mode=str(settings.get("variant_mode", "aware")),
    ).load()
