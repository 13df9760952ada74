"""CSV cells a spreadsheet would run as a formula are made text, whatever blanks or quotes come first
(apps.common.exports, docs/portal.md "Exports"); numbers and ordinary text are left as they are."""

import pytest

from apps.common.exports import csv_cell

FORMULAS = [
    "=HYPERLINK(\"http://x\")", "+cmd", "-2+3", "@SUM(A1)", "\tanything", "\rline", "\nline",
    " =1+1", "  +1+1", "\t=1+1", "\r\n=1+1", "\u00a0=1+1", "\u2003@SUM(A1)", "\u3000=1", "\u200b=1", "\ufeff=1",
    "\"=1+1", "'=1+1", "\" =1+1", "`=1", "\u201c=1", " \"\t-1+1",
    "\uff1d1+1", "\uff0bcmd", "\uff0d1+1", "\uff20SUM(A1)", "=", "-", "- 5",
]
KEPT = ["M100001", "order 42", "", "2026-11-28T00:00:00+08:00", "5000", "-500", "+63", "12.50", "a=b", "x+1",
        "GCash", "#comment", "'already text", "\"quoted\"", "   "]


@pytest.mark.parametrize("text", FORMULAS)
def test_a_cell_a_spreadsheet_would_run_gets_a_leading_apostrophe(text):
    assert csv_cell(text) == "'" + text


@pytest.mark.parametrize("text", KEPT)
def test_numbers_and_ordinary_text_are_left_as_they_are(text):
    assert csv_cell(text) == text


def test_values_that_are_not_text_become_their_text():
    assert (csv_cell(None), csv_cell(-1250), csv_cell(0)) == ("", "-1250", "0")
