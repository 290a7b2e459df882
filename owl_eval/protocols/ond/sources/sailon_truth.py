"""Ground truth of one sail-on-client OND test: ``<test_id>_single_df.csv`` and ``<test_id>_metadata.json``.

Reading is split in two because the class convention needs the number of score columns, which only the
agent's classification file tells: :func:`read_truth` parses and checks the files as written, then
:func:`labels` maps the classes to OND labels (0 = unknown, 1..K known) and :func:`red_light` finds the
red-light row, once K is known. Conventions: see :mod:`owl_eval.protocols.ond.sources.sailon`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from owl_eval.errors import ConfigError
from owl_eval.formats.csv_table import column_index, numeric, read_rows
from owl_eval.json_input import parse_json
from owl_eval.sources import SourceFormatError
from owl_eval.typed import as_int

ROLES = ("id", "detection", "class", "novel")
CLASS_INDEX = ("package", "zero_based_known")
# classes and ids beyond this are not class indices (and would overflow int64 arithmetic)
MAX_CLASS = 2**31


@dataclass
class Truth:
    """One test's ground truth as written: classes not yet mapped (see :func:`labels`)."""

    test_id: str
    path: Path  # the _single_df.csv file
    ids: np.ndarray  # str [N], stripped
    line_numbers: np.ndarray  # 1-based line of each sample in ``path``
    classes: np.ndarray  # int64 [N], as written
    class_column: str
    detection: np.ndarray | None  # bool [N]: the cumulative "world has changed" flag, when configured
    novel: np.ndarray | None  # bool [N]: a per-sample novelty column (activity recognition), when configured
    metadata_path: Path | None
    red_light_id: str | None  # the metadata's red_light sample id
    red_light_row: int | None  # its 0-based row
    round_size: int | None  # from the metadata


def read_truth(
    test_id: str, path: Path, text: str, columns: dict, metadata: tuple[Path, str] | None, *, quote_char: str = '"'
) -> Truth:
    """Parse ``T_single_df.csv`` (``text``, read link-free by the caller; fields quoted with ``quote_char``)
    and the optional metadata ``(path, text)``; every malformed value is one error naming the file, row and
    column or key."""
    table = read_rows(path, skip_header=True, text=text, quote_char=quote_char, quote_key="source.quote_char")
    fields, lines = table.fields, table.line_numbers
    if not len(fields):
        raise SourceFormatError(f"{path}: no samples after the header")
    # with a novel column the detection column is not read: the package's evaluation then takes the novel
    # column as the ground truth of novelty (activity recognition) and ignores the other
    used = {
        role: spec
        for role, spec in columns.items()
        if spec is not None and not (role == "detection" and columns.get("novel") is not None)
    }
    roles = {role: column_index(path, table.header, role, spec) for role, spec in used.items()}
    for role, index in roles.items():
        if index >= fields.shape[1]:
            raise SourceFormatError(
                f"{path}: column position {index} (source.columns.{role}) is beyond the "
                f"{fields.shape[1]} columns of the file"
            )
    names = {role: str(columns[role]) for role in roles}

    ids = np.char.strip(fields[:, roles["id"]])
    _check_ids(path, ids, lines, names["id"])
    values = {
        role: numeric(path, fields, columns=[roles[role]], names=[names[role]], first_row_number=2, row_numbers=lines)[
            :, 0
        ]
        for role in ("class", "detection", "novel")
        if role in roles
    }
    classes = values["class"]
    bad = ~np.isfinite(classes) | (classes != np.round(classes)) | (np.abs(classes) >= MAX_CLASS)
    if bad.any():
        i = int(np.argmax(bad))
        raise SourceFormatError(
            f"{path}, row {lines[i]}, column {names['class']!r}: expected an integer class index, "
            f"got {fields[i, roles['class']].strip()[:40]!r}"
        )
    flags = {}
    for role in ("detection", "novel"):
        if role in values:
            not_binary = (values[role] != 0) & (values[role] != 1)
            if not_binary.any():
                i = int(np.argmax(not_binary))
                raise SourceFormatError(
                    f"{path}, row {lines[i]}, column {names[role]!r}: expected 0 or 1, "
                    f"got {fields[i, roles[role]].strip()[:40]!r}"
                )
            flags[role] = values[role] == 1

    meta_path, meta = (None, {}) if metadata is None else (metadata[0], _parse_metadata(*metadata))
    round_size = None
    if meta.get("round_size") is not None:
        try:
            round_size = as_int(meta["round_size"], f"{meta_path}: key 'round_size'", minimum=1, maximum=MAX_CLASS)
        except ConfigError as exc:
            raise SourceFormatError(str(exc)) from None
    red_light_id, red_light_row = _red_light_id(meta_path, meta, ids, path, quote_char)
    return Truth(
        test_id=test_id,
        path=path,
        ids=ids,
        line_numbers=lines,
        classes=classes.astype(np.int64),
        class_column=names["class"],
        detection=flags.get("detection"),
        novel=flags.get("novel"),
        metadata_path=meta_path,
        red_light_id=red_light_id,
        red_light_row=red_light_row,
        round_size=round_size,
    )


def _check_ids(path: Path, ids: np.ndarray, lines: np.ndarray, column: str) -> None:
    empty = np.char.str_len(ids) == 0
    if empty.any():
        i = int(np.argmax(empty))
        raise SourceFormatError(f"{path}, row {lines[i]}, column {column!r}: empty sample id")
    order = np.argsort(ids, kind="stable")
    same = ids[order][1:] == ids[order][:-1]
    if same.any():
        k = int(np.argmax(same))
        first, second = sorted((int(order[k]), int(order[k + 1])))
        raise SourceFormatError(
            f"{path}, row {lines[second]}, column {column!r}: sample id {str(ids[second])[:80]!r} "
            f"already at row {lines[first]}; every sample appears once"
        )


def _parse_metadata(path: Path, text: str) -> dict:
    return parse_json(
        text, where=str(path), error=SourceFormatError, expect_object="test settings (round_size, red_light, ...)"
    )


def _red_light_id(
    meta_path: Path | None, meta: dict, ids: np.ndarray, gt_path: Path, quote_char: str = '"'
) -> tuple[str | None, int | None]:
    """The metadata's ``red_light`` sample id and its row; absent, null or "" (the package's default) = none.
    The id may be written quoted as in the CSV files (``|img_12.png|`` with ``source.quote_char``, or
    ``"img_12.png"``): the ground truth's ids are read unquoted, so a quoted id names the same sample."""
    value = meta.get("red_light")
    if value is None or value == "":
        return None, None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise SourceFormatError(
            f"{meta_path}: key 'red_light': expected the sample id (a string) of the first novel "
            f"sample, got {str(value)[:80]!r} ({type(value).__name__})"
        )
    sample = str(value).strip()
    rows = np.flatnonzero(ids == sample)
    unquoted = _unquoted(sample, quote_char)
    if not rows.size and unquoted != sample:
        sample, rows = unquoted, np.flatnonzero(ids == unquoted)
    if not rows.size:
        raise SourceFormatError(
            f"{meta_path}: red_light sample id {sample[:120]!r} is not a sample of {gt_path.name} ({len(ids)} samples)"
        )
    return sample, int(rows[0])


def _unquoted(text: str, quote_char: str) -> str:
    """``text`` without the CSV quotes around it (``quote_char`` or ``"``; a doubled quote inside is one), stripped
    of spaces as the ground truth's ids are; ``text`` itself when it is not quoted."""
    for quote in dict.fromkeys((quote_char, '"')):
        if len(text) >= 2 and text[0] == quote and text[-1] == quote:
            return text[1:-1].replace(quote * 2, quote).strip()
    return text


def labels(
    truth: Truth, n_columns: int, *, class_index: str, unknown_column: str, scores_path: Path
) -> tuple[np.ndarray, np.ndarray]:
    """``(gt_class, gt_novel)`` for ``n_columns = K + 1`` scores: OND labels (0 = unknown, 1..K known)
    under ``class_index`` (see :mod:`owl_eval.protocols.ond.sources.sailon`); a class outside the convention is one error."""
    K = n_columns - 1
    c = truth.classes
    if class_index == "package":
        # the class is the 0-based column of the K+1 scores as written; move it to our layout (unknown first)
        low, high = 0, K
        label = c if unknown_column == "first" else (c + 1) % n_columns
        meaning = (
            f"with source.class_index=package the class is the column of the {n_columns} scores in "
            f"{scores_path.name} (unknown column {unknown_column}), so 0..{K}; for known classes 0..K-1 with "
            "negative novel classes set source.class_index=zero_based_known"
        )
    else:
        low, high = None, K - 1
        label = np.where(c < 0, 0, c + 1)
        meaning = (
            f"with source.class_index=zero_based_known known classes are 0..{K - 1} ({scores_path.name} has "
            f"{K} known-class columns) and novel classes negative"
        )
    outside = (c > high) | ((c < low) if low is not None else False)
    if outside.any():
        i = int(np.argmax(outside))
        raise SourceFormatError(
            f"{truth.path}, row {truth.line_numbers[i]}, column {truth.class_column!r}: class {int(c[i])} "
            f"is out of range; {meaning}"
        )
    novel = truth.novel if truth.novel is not None else label == 0
    return label.astype(np.int64), novel.astype(np.int64)


def red_light(truth: Truth, gt_novel: np.ndarray) -> int | None:
    """The 0-based red-light row: the metadata's ``red_light`` sample, else the first 1 of the detection
    column, else the first novel sample. It must be the first novel sample (None: no novelty)."""
    novel_rows = np.flatnonzero(gt_novel)
    first_novel = int(novel_rows[0]) if novel_rows.size else None
    if truth.red_light_row is not None and truth.red_light_id is not None:  # set together
        row, told = truth.red_light_row, f"{truth.metadata_path}: red_light {truth.red_light_id[:120]!r}"
    elif truth.detection is not None and truth.detection.any():
        row = int(np.argmax(truth.detection))
        told = f"{truth.path}: the detection column (first 1)"
    else:
        return first_novel
    if row != first_novel:
        lines = truth.line_numbers
        novel_what = (
            "the novel column"
            if truth.novel is not None
            else f"the first sample whose class maps to unknown ({truth.class_column!r})"
        )
        where = f"row {lines[first_novel]}" if first_novel is not None else "nowhere (no novel sample)"
        raise SourceFormatError(
            f"{told} puts the red light at row {lines[row]} of {truth.path.name}, but {novel_what} "
            f"is at {where}; the red light is the first novel sample (check source.class_index "
            "and source.columns)"
        )
    return row
