"""A SAIL-ON metadata file whose ``red_light`` names its sample id quoted as the CSV files quote ids
(``|id|`` with sail-on-client's quote character, or ``"id"``) reads like the unquoted id: the same row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from owl_eval.protocols.ond.sources.sailon_truth import read_truth

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sailon_client" / "data" / "OND" / "image_classification"
TEST = "OND.101.000.0001"
RED = "unknown_classes/images/val/00000/00051.JPEG"
COLUMNS = {"id": 0, "detection": 1, "class": 2, "novel": None}


def truth(red_light: str, *, quote_char: str = "|", gt_text: str | None = None):
    gt = FIXTURE / f"{TEST}_single_df.csv"
    meta = json.loads((FIXTURE / f"{TEST}_metadata.json").read_text()) | {"red_light": red_light}
    return read_truth(
        TEST,
        gt,
        gt_text if gt_text is not None else gt.read_text(),
        COLUMNS,
        (FIXTURE / f"{TEST}_metadata.json", json.dumps(meta)),
        quote_char=quote_char,
    )


@pytest.mark.parametrize("quoted", [f"|{RED}|", f'"{RED}"', f" | {RED} | ".strip(), f'"{RED} "'])
def test_a_quoted_red_light_id_names_the_same_sample(quoted):
    plain = truth(RED)
    assert plain.red_light_row is not None
    read = truth(quoted)
    assert (read.red_light_row, read.red_light_id) == (plain.red_light_row, RED)


def test_a_quoted_red_light_matches_ids_quoted_in_the_ground_truth():
    gt_text = (FIXTURE / f"{TEST}_single_df.csv").read_text().replace(RED, f'"{RED}"')
    plain = truth(RED, quote_char='"', gt_text=gt_text)
    quoted = truth(f'"{RED}"', quote_char='"', gt_text=gt_text)
    assert quoted.red_light_row == plain.red_light_row is not None
