"""An agent's result files of one sail-on-client OND test: ``<session>.<test_id>_detection.csv`` rows
``id,P_world_changed`` and ``<session>.<test_id>_classification.csv`` rows ``id,p_0,...,p_K`` (no header,
appended round by round; fields may be quoted as in any CSV file). The files are parsed column-wise
(:func:`owl_eval.formats.csv_table.read_numeric_rows`) and every value is checked at once, so an error names
the file's line and column; the rows are then put in ground-truth order by sample id.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from owl_eval.formats.csv_table import NumericTable, read_numeric_rows
from owl_eval.protocols.ond.metrics import ROW_SUM_TOLERANCE
from owl_eval.sources import SourceFormatError


def read_detection(path: Path, data: bytes, ids: np.ndarray, gt_path: Path, *, quote_char: str = '"') -> np.ndarray:
    """``P_world_changed[N]`` in ground-truth order (``data``: the bytes of ``path``)."""
    names = ["P_world_changed"]
    table = _read(
        path,
        data,
        min_width=2,
        name=lambda j: names[0] if j == 0 else f"field {j + 2}",
        layout="id,P_world_changed",
        gt_path=gt_path,
        n_samples=len(ids),
        quote_char=quote_char,
    )
    if table.values.shape[1] != 1:
        raise SourceFormatError(
            f"{path}, row {table.line_numbers[0]}: expected 2 comma-separated fields "
            f"(id,P_world_changed), got {table.values.shape[1] + 1}"
        )
    _check_probabilities(path, table, names)
    return table.values[alignment(path, table, ids, gt_path), 0]


def read_classification(
    path: Path,
    data: bytes,
    ids: np.ndarray,
    gt_path: Path,
    *,
    unknown_column: str,
    sum_tolerance: float,
    normalize: bool,
    quote_char: str = '"',
) -> np.ndarray:
    """``p_class[N, K+1]`` in ground-truth order with the unknown column first (``data``: the bytes of ``path``).

    Rows must sum to 1 within ``sum_tolerance`` (or are rescaled with ``normalize``). Rows that pass but are
    off by more than :data:`owl_eval.protocols.ond.metrics.ROW_SUM_TOLERANCE` are divided by their sum, so that the trial's own
    fixed check accepts what the configured tolerance accepted; other rows are left exactly as written.
    """
    table = _read(
        path,
        data,
        min_width=3,
        name="p_{}".format,
        layout="id,p_0,...,p_K",
        gt_path=gt_path,
        n_samples=len(ids),
        quote_char=quote_char,
    )
    width = table.values.shape[1]
    names = [f"p_{k}" for k in range(width)]
    _check_probabilities(path, table, names)
    scores = table.values
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
                f"{path}, row {table.line_numbers[i]} (sample {str(table.ids[i])[:80]!r}): "
                f"class scores sum to {sums[i]:.9g}, expected 1 within source.sum_tolerance="
                f"{sum_tolerance:g} (set source.normalize=true to rescale)"
            )
        loose = error > ROW_SUM_TOLERANCE
        if loose.any():
            scores[loose] /= sums[loose, None]
    if unknown_column == "last":
        scores = np.roll(scores, 1, axis=1)
    return scores[alignment(path, table, ids, gt_path)]


def _read(
    path: Path,
    data: bytes,
    *,
    min_width: int,
    name: Callable[[int], str],
    layout: str,
    gt_path: Path,
    n_samples: int,
    quote_char: str,
) -> NumericTable:
    table = read_numeric_rows(
        path, data, min_width=min_width, name=name, quote_char=quote_char, quote_key="source.quote_char"
    )
    if not len(table.ids):
        raise SourceFormatError(
            f"{path}: no rows; expected one row '{layout}' for each of the {n_samples} samples of {gt_path.name}"
        )
    return table


def _check_probabilities(path: Path, table: NumericTable, names: list[str]) -> None:
    """NaN, inf, negative and > 1 are refused with the row and column of the first (in file order)."""
    values = table.values
    outside = ~((values >= 0.0) & (values <= 1.0))
    if outside.any():
        i, j = (int(x) for x in np.argwhere(outside)[0])
        row, value = table.line_numbers[i], float(values[i, j])
        if np.isnan(value):
            raise SourceFormatError(f"{path}, row {row}, column {names[j]!r}: NaN where a value is required")
        raise SourceFormatError(
            f"{path}, row {row}, column {names[j]!r}: expected a probability in [0, 1], got {value!r}"
        )


def alignment(path: Path, table: NumericTable, gt_ids: np.ndarray, gt_path: Path) -> np.ndarray:
    """Row order that puts a result file's rows in ground-truth order; every id exactly once."""
    result_ids = table.ids
    if len(result_ids) == len(gt_ids) and np.array_equal(result_ids, gt_ids):
        return np.arange(len(gt_ids))
    sorter = np.argsort(result_ids, kind="stable")
    ordered = result_ids[sorter]
    same = ordered[1:] == ordered[:-1]
    if same.any():
        k = int(np.argmax(same))
        first, second = sorted((int(sorter[k]), int(sorter[k + 1])))
        raise SourceFormatError(
            f"{path}, row {table.line_numbers[second]}: sample id {str(result_ids[second])[:80]!r} already at row "
            f"{table.line_numbers[first]}; each sample has one row"
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
            f"{path}, row {table.line_numbers[i]}: sample id {str(result_ids[i])[:80]!r} is not in {gt_path.name}"
        )
    return sorter[pos]
