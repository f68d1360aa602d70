"""docs/results.md: every table is a report block equal to what ``rlpipe report`` prints from the result
files committed under docs/results/, so no figure there lacks a producer or drifts from its files."""
from __future__ import annotations

from pathlib import Path

from rlpipe.tools.report_docs import BLOCK, update_report_blocks

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results.md"


def test_every_report_block_equals_what_its_files_give():
    assert update_report_blocks(RESULTS, check=True) == []


def test_every_table_of_the_results_page_is_in_a_report_block():
    outside = BLOCK.sub("", RESULTS.read_text())
    tables = [line for line in outside.splitlines() if line.lstrip().startswith("|")]
    assert tables == [], f"a table not made by rlpipe report: {tables[0]}"
