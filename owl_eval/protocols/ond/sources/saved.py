"""An OND record saved by an owl-eval run (``ond_record.npz``), read back for re-scoring (its arrays are
checked when read: ``OndRecord.from_arrays``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from owl_eval.sources import SourceData


def read_saved(file: Path, *, settings: Mapping[str, Any], chunk_size: int) -> SourceData:
    from owl_eval.protocols.ond.record import OndRecord

    record = OndRecord.load(file)
    return SourceData("ond", record, {"condition": record.condition, "trials": str(len(record.trials))})
