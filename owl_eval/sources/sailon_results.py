"""An agent's result files of one sail-on-client OND test: ``<session>.<test_id>_detection.csv`` rows
``id,P_world_changed`` and ``<session>.<test_id>_classification.csv`` rows ``id,p_0,...,p_K`` (no header,
appended round by round). Every value is checked in file order, so an error names the file's row and
column; the rows are then put in ground-truth order by sample id.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from owl_eval.formats.csv_table import Table, numeric, read_rows
from owl_eval.metrics.ond import ROW_SUM_TOLERANCE
from owl_eval.sources import SourceFormatError


def read_detection(path: Path, text: str, ids: np.ndarray, gt_path: Path) -> np.ndarray:
    """``P_world_changed[N]`` in ground-truth order."""
    table = _read(path, text, min_width=2, layout="id,P_world_changed", gt_path=gt_path, n_samples=len(ids))
    if table.fields.shape[1] != 2:
        raise SourceFormatError(
            f"{path}, row {table.line_numbers[0]}: expected 2 comma-separated fields "
            f"(id,P_world_changed), got {table.fields.shape[1]}"
        )
    world = numeric(
        path, table.fields, columns=[1], names=["P_world_changed"], first_row_number=1, row_numbers=table.line_numbers
    )
    _check_probabilities(path, world, table.line_numbers, ["P_world_changed"])
    return world[alignment(path, table, ids, gt_path), 0]


def read_classification(
    path: Path, text: str, ids: np.ndarray, gt_path: Path, *, unknown_column: str, sum_tolerance: float, normalize: bool
) -> np.ndarray:
    """``p_class[N, K+1]`` in ground-truth order with the unknown column first.

    Rows must sum to 1 within ``sum_tolerance`` (or are rescaled with ``normalize``). Rows that pass but are
    off by more than :data:`owl_eval.metrics.ond.ROW_SUM_TOLERANCE` are divided by their sum, so that the trial's own
    fixed check accepts what the configured tolerance accepted; other rows are left exactly as written.
    """
    table = _read(path, text, min_width=3, layout="id,p_0,...,p_K", gt_path=gt_path, n_samples=len(ids))
    width = table.fields.shape[1]
    names = [f"p_{k}" for k in range(width - 1)]
    scores = numeric(
        path,
        table.fields,
        columns=list(range(1, width)),
        names=names,
        first_row_number=1,
        row_numbers=table.line_numbers,
    )
    _check_probabilities(path, scores, table.line_numbers, names)
    sums = scores.sum(axis=1)
    if normalize:
        zero = sums <= 0
        if zero.any():
            i = int(np.argmax(zero))
            raise SourceFormatError(f"{path}, row {table.line_numbers[i]}: class scores sum to 0; cannot normalise")
        scores = scores / sums[:, None]
    else:
        error = np.abs(sums - 1.0)
        if (error > sum_tolerance).any():
            i = int(np.argmax(error > sum_tolerance))
            raise SourceFormatError(
                f"{path}, row {table.line_numbers[i]} (sample {str(table.fields[i, 0]).strip()[:80]!r}): "
                f"class scores sum to {sums[i]:.9g}, expected 1 within source.sum_tolerance="
                f"{sum_tolerance:g} (set source.normalize=true to rescale)"
            )
        loose = error > ROW_SUM_TOLERANCE
        scores[loose] /= sums[loose, None]
    if unknown_column == "last":
        scores = np.roll(scores, 1, axis=1)
    return scores[alignment(path, table, ids, gt_path)]


def _read(path: Path, text: str, *, min_width: int, layout: str, gt_path: Path, n_samples: int) -> Table:
    table = read_rows(path, skip_header=False, min_width=min_width, text=text)
    if not len(table.fields):
        raise SourceFormatError(
            f"{path}: no rows; expected one row '{layout}' for each of the {n_samples} samples of {gt_path.name}"
        )
    return table


def _check_probabilities(path: Path, values: np.ndarray, lines: np.ndarray, names: list[str]) -> None:
    """NaN was refused when parsing; inf, negative and > 1 are refused here with the row and column."""
    outside = ~((values >= 0.0) & (values <= 1.0))
    if outside.any():
        i, j = (int(x) for x in np.argwhere(outside)[0])
        raise SourceFormatError(
            f"{path}, row {lines[i]}, column {names[j]!r}: expected a probability in [0, 1], "
            f"got {float(values[i, j])!r}"
        )


def alignment(path: Path, table: Table, gt_ids: np.ndarray, gt_path: Path) -> np.ndarray:
    """Row order that puts a result file's rows in ground-truth order; every id exactly once."""
    result_ids = np.char.strip(table.fields[:, 0])
    lines = table.line_numbers
    if len(result_ids) == len(gt_ids) and np.array_equal(result_ids, gt_ids):
        return np.arange(len(gt_ids))
    sorter = np.argsort(result_ids, kind="stable")
    ordered = result_ids[sorter]
    same = ordered[1:] == ordered[:-1]
    if same.any():
        k = int(np.argmax(same))
        first, second = sorted((int(sorter[k]), int(sorter[k + 1])))
        raise SourceFormatError(
            f"{path}, row {lines[second]}: sample id {str(result_ids[second])[:80]!r} already at row "
            f"{lines[first]}; each sample has one row"
        )
    pos = np.minimum(np.searchsorted(ordered, gt_ids), len(result_ids) - 1)
    found = ordered[pos] == gt_ids
    if not found.all():
        i = int(np.argmax(~found))
        raise SourceFormatError(
            f"{path}: no row for sample {str(gt_ids[i])[:80]!r} of {gt_path.name} "
            f"({int((~found).sum())} of its {len(gt_ids)} sample ids missing)"
        )
    extra = ~np.isin(result_ids, gt_ids)
    if extra.any():
        i = int(np.argmax(extra))
        raise SourceFormatError(
            f"{path}, row {lines[i]}: sample id {str(result_ids[i])[:80]!r} is not in {gt_path.name}"
        )
    return sorter[pos]
